"""Task files: every documented form loads, every kind of mistake is refused by name."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from skillgraft.agent.task import GitRepo, InlineRepo, Limits, Task, TaskError, load_task

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"

GOOD = """\
id: demo
repo: {files: {"a.py": "x = 1\\n", "tests/test_a.py": "from a import x\\n\\ndef test_x():\\n    assert x == 2\\n"}}
instruction: Make x equal 2.
test: python3 -m pytest -q
"""


def write(tmp_path: Path, text: str, name: str = "task.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_bundled_examples_load_and_each_has_a_failing_test(tmp_path):
    tasks = [load_task(p) for p in sorted(EXAMPLES.glob("*.yaml"))]
    assert len(tasks) >= 3
    assert len({t.id for t in tasks}) == len(tasks)
    for task in tasks:
        repo = task.materialize(tmp_path / task.id)
        # The test command is written for the sandbox (python3 with pytest); on the host the same
        # module run by this interpreter decides whether the start state really fails.
        proc = subprocess.run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo, capture_output=True, text=True)
        assert proc.returncode == 1, (task.id, proc.stdout)
        assert "failed" in proc.stdout


def test_defaults_and_full_form(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    assert task.limits == Limits()
    assert task.setup == [] and task.tags == [] and task.family is None and task.network is False
    assert isinstance(task.repo, InlineRepo)

    full = GOOD + ("setup: [echo hi]\nfamily: f\ntags: [a, b]\nnetwork: true\ntest_files: tests/**\n"
                   "limits: {steps: 3, wall_time: 10, command_timeout: 5, cost: 0, disk: 512M}\n")
    task = load_task(write(tmp_path, full))
    assert task.limits == Limits(steps=3, wall_time=10.0, command_timeout=5.0, cost=0.0, disk="512m")
    assert (task.setup, task.family, task.tags, task.network) == (["echo hi"], "f", ["a", "b"], True)
    assert task.test_files == ["tests/**"]
    assert Task.from_dict(task.to_dict(), "again").to_dict() == task.to_dict()


def test_inline_repo_materializes_with_a_start_commit(tmp_path):
    repo = load_task(write(tmp_path, GOOD)).materialize(tmp_path / "out")
    assert (repo / "tests" / "test_a.py").read_text().startswith("from a import x")
    assert git("status", "--porcelain", cwd=repo) == ""
    assert git("log", "--format=%s", cwd=repo) == "task start state"


def test_local_repo_is_relative_to_the_task_file_and_leaves_history_behind(tmp_path):
    src = tmp_path / "tasks" / "proj"
    src.mkdir(parents=True)
    (src / "m.py").write_text("v = 1\n")
    git("init", "-q", cwd=src)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "secret fix in history", cwd=src)
    (src / "m.py").write_text("v = 2\n")  # uncommitted edits are part of the start state
    task = load_task(write(tmp_path / "tasks", "id: t\nrepo: proj\ninstruction: do it\ntest: 'true'\n"))
    assert task.repo == src.resolve()
    repo = task.materialize(tmp_path / "out")
    assert (repo / "m.py").read_text() == "v = 2\n"
    assert git("log", "--format=%s", cwd=repo) == "task start state"


def test_git_repo_is_checked_out_at_its_revision(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    git("init", "-q", "-b", "main", cwd=origin)
    (origin / "f.txt").write_text("first\n")
    git("add", "f.txt", cwd=origin)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "one", cwd=origin)
    first = git("rev-parse", "HEAD", cwd=origin)
    (origin / "f.txt").write_text("second\n")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "two", cwd=origin)
    task = Task.from_dict({"id": "g", "repo": {"git": origin.as_uri(), "rev": first}, "instruction": "i", "test": "t"})
    assert task.repo == GitRepo(origin.as_uri(), first)
    repo = task.materialize(tmp_path / "out")
    assert (repo / "f.txt").read_text() == "first\n"
    assert git("rev-parse", "HEAD", cwd=repo) == first

    bad = Task.from_dict({"id": "g", "repo": {"git": origin.as_uri(), "rev": "no-such-rev"}, "instruction": "i", "test": "t"})
    with pytest.raises(TaskError, match="git checkout failed"):
        bad.materialize(tmp_path / "out2")


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD + "colour: blue\n", "unknown key 'colour'"),
        (GOOD.replace("test: python3 -m pytest -q\n", ""), "missing required field 'test'"),
        (GOOD.replace("id: demo\n", ""), "missing required field 'id'"),
        (GOOD.replace("instruction: Make x equal 2.\n", "instruction: ''\n"), "missing required field 'instruction'"),
        (GOOD + "limits: {steps: 3, speed: 9}\n", "unknown key limits.'speed'"),
        (GOOD + "limits: {steps: 2.5}\n", "limits.steps must be a whole number"),
        (GOOD + "limits: {wall_time: fast}\n", "limits.wall_time must be a number"),
        (GOOD + "limits: {steps: 0}\n", "limits.steps must be positive"),
        (GOOD + "limits: [1, 2]\n", "'limits' must be a mapping"),
        (GOOD + "limits: {disk: lots}\n", "limits.disk must be a size of at least 1m"),
        (GOOD + "limits: {disk: 100}\n", "limits.disk must be a size of at least 1m"),
        (GOOD + "network: maybe\n", "'network' must be true or false"),
        (GOOD + "setup: {a: 1}\n", "'setup' must be a list"),
        (GOOD + "tags: [1, 2]\n", "'tags' must be a list of strings"),
        (GOOD + "test_files: [tests/**, 3]\n", "'test_files' must be a list of globs"),
        (GOOD + "test_files: [../outside.py]\n", "must stay inside the repository"),
        (GOOD.replace("id: demo", "id: has space"), "'id' must have no spaces"),
        (GOOD.replace("test: python3 -m pytest -q", "test: [a, b]"), "'test' must be a non-empty string"),
        ("id: x\nrepo: {git: https://example.org/r.git}\ninstruction: i\ntest: t\n", "missing required field 'repo.rev'"),
        ("id: x\nrepo: {git: u, rev: r, branch: b}\ninstruction: i\ntest: t\n", "unknown key repo.'branch'"),
        ("id: x\nrepo: {svn: u}\ninstruction: i\ntest: t\n", "needs a 'git' or 'files' key"),
        ("id: x\nrepo: {files: {}}\ninstruction: i\ntest: t\n", "non-empty mapping"),
        ("id: x\nrepo: {files: {'../evil.py': x}}\ninstruction: i\ntest: t\n", "must stay inside the repository"),
        ("id: x\nrepo: 5\ninstruction: i\ntest: t\n", "'repo' must be a path"),
        ("- just\n- a list\n", "must be a mapping of keys"),
        ("id: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_task_files_name_the_key_and_the_file(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_missing_task_file_and_missing_repo_folder(tmp_path):
    with pytest.raises(TaskError, match="cannot read task file"):
        load_task(tmp_path / "nope.yaml")
    task = load_task(write(tmp_path, "id: t\nrepo: not-there\ninstruction: i\ntest: t\n"))
    with pytest.raises(TaskError, match="does not exist"):
        task.materialize(tmp_path / "out")


def test_materialize_refuses_a_non_empty_destination(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(TaskError, match="non-empty"):
        load_task(write(tmp_path, GOOD)).materialize(tmp_path / "out")
