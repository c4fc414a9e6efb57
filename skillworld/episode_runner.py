"""Runs episodes' commands in fresh repository copies; standard library only, so that it also
runs inside the sandbox image, where the project itself is not installed.

usage: episode_runner.py JOBS.json RESULTS.json [WORKERS]
JOBS: [{"files": {path: text}, "commands": [...], "test": "..."}]
JOBS may set "verify": true to run the test command itself after the commands.
RESULTS: [{"outputs": [[output, returncode], ...], "test_returncode": int}]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

# The interpreter running this script comes first on PATH, so `python3` is one that has pytest.
ENV = {"PATH": os.path.dirname(sys.executable) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG": "C.UTF-8",
       "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "HOME": tempfile.gettempdir(),
       # The sandbox image has no pytest plugins; the host's would slow every run and change nothing shown.
       "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def run(command, cwd):
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=60)
    return proc.stdout.decode(errors="replace"), proc.returncode


def _verdict(summary):
    return 0 if " passed" in summary and "failed" not in summary and "error" not in summary else 1


def episode(job):
    repo = tempfile.mkdtemp(prefix="repo-")
    try:
        for rel, text in job["files"].items():
            path = os.path.join(repo, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write(text)
        outputs = [list(run(c, repo)) for c in job["commands"]]
        # The last command is the expert's own full test run; a separate verdict run would
        # only repeat it, and pytest's start-up dominates the cost of making training data.
        verdict = run(job["test"], repo)[1] if job.get("verify") else _verdict(outputs[-1][0])
        return {"outputs": outputs, "test_returncode": verdict}
    finally:
        shutil.rmtree(repo, ignore_errors=True)


def main(jobs_path, results_path, workers=2):
    with open(jobs_path) as fh:
        jobs = json.load(fh)
    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        results = list(pool.map(episode, jobs))
    with open(results_path, "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    main(*sys.argv[1:4])
