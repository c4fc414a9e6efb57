"""Running expert episodes in bulk, outside the agent loop, to make training data quickly.

The commands run in a fresh copy of each repository with bash, stdout and stderr
merged, as the sandbox's command server runs them. With Docker available, all episodes run
inside one container of the sandbox image (its Python and pytest, so the observations match
what the agent sees at run time); without it, on the host. Either way every episode's final
test verdict is recorded, so an expert failure cannot slip into the training data.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skillgraft.skillworld.expert import Step, plan
from skillgraft.skillworld.generate import TEST_COMMAND, WorldTask

RUNNER = Path(__file__).with_name("episode_runner.py")


@dataclass
class Episode:
    task: WorldTask
    steps: list[Step]
    success: bool
    mistake: str | None = None  # the wrong step the expert made and recovered from (expert.MISTAKES)


def run_episodes(tasks: Iterable[WorldTask], backend: str = "auto", image: str | None = None,
                 verify: bool = False, workers: int = 2, mistake: str | None = None) -> list[Episode]:
    """backend: "docker" (inside one sandbox-image container), "local", or "auto".
    verify: run the task's test command after the expert's steps instead of reading the
    verdict from the expert's own final test run. mistake: the wrong step every episode makes
    and recovers from (expert.plan)."""
    tasks = list(tasks)
    plans = [plan(wt, mistake=mistake) for wt in tasks]
    jobs = [{"files": wt.files, "commands": [c for _, c in steps[:-1]], "test": TEST_COMMAND, "verify": verify}
            for wt, steps in zip(tasks, plans)]
    if backend == "auto":
        backend = "docker" if _image_ready(image) else "local"
    with tempfile.TemporaryDirectory(prefix="skillworld-episodes-") as tmp:
        inbox, outbox = Path(tmp) / "jobs.json", Path(tmp) / "results.json"
        inbox.write_text(json.dumps(jobs))
        if backend == "docker":
            _run_in_image(Path(tmp), image, workers)
        else:
            subprocess.run([sys.executable, str(RUNNER), str(inbox), str(outbox), str(workers)], check=True)
        results = json.loads(outbox.read_text())
    episodes = []
    for wt, steps, result in zip(tasks, plans, results):
        done = [Step(t, c, o, rc) for (t, c), (o, rc) in zip(steps, result["outputs"] + [["", 0]])]
        episodes.append(Episode(wt, done, result["test_returncode"] == 0, mistake))
    return episodes


def _image_ready(image: str | None) -> bool:
    try:
        from skillgraft.sandbox.image import IMAGE_TAG, engine, image_exists

        return image_exists(engine(), image or IMAGE_TAG)
    except Exception:  # no engine, or no image: fall back to the host
        return False


def _run_in_image(folder: Path, image: str | None, workers: int) -> None:
    import docker

    from skillgraft.sandbox.image import IMAGE_TAG
    from skillgraft.sandbox.lifecycle import owner_labels

    client = docker.from_env()
    (folder / "episode_runner.py").write_text(RUNNER.read_text())
    folder.chmod(0o777)
    logs = client.containers.run(
        image or IMAGE_TAG, ["python3", "/jobs/episode_runner.py", "/jobs/jobs.json", "/jobs/results.json", str(workers)],
        volumes={str(folder): {"bind": "/jobs", "mode": "rw"}}, network_disabled=True, user="root",
        remove=True, mem_limit="2g", pids_limit=1024,
        # The owner labels let `skillgraft sandbox reap` remove it if this process dies mid-run.
        labels={**owner_labels(), "skillgraft.purpose": "skillworld-episodes"},
    )
    if not (folder / "results.json").exists():
        raise RuntimeError(f"episode runner left no results: {logs[-2000:]!r}")
