"""SkillWorld's generated tasks: deterministic, well-formed, failing before the expert's fix and
passing after it in the real sandbox image."""
from __future__ import annotations

import pytest
import yaml

from skillgraft.skillworld.episodes import run_episodes
from skillgraft.skillworld import families
from skillgraft.skillworld.families import BENCHMARK, DRILL, FAMILIES, GROUPS as FAMILY_GROUPS, LEARNING, SEEN, SKILL_ONLY, discover, resolve
from skillgraft.skillworld.generate import HELDOUT_START, generate
from skillgraft.skillworld.families.drills import GROUPS, LITERAL_FAMILIES
from skillgraft.skillworld.library import for_family, for_task, skills

SEEDS = [0, HELDOUT_START + 7]


def test_at_least_ten_families_split_into_seen_and_skill_only():
    assert len(BENCHMARK) >= 10
    assert set(SEEN) | set(SKILL_ONLY) | set(DRILL) | set(LEARNING) == set(FAMILIES)
    assert not set(SEEN) & set(SKILL_ONLY) and not set(DRILL) & set(BENCHMARK) and not set(LEARNING) & set(BENCHMARK)
    assert resolve(["skill-only"]) == SKILL_ONLY and resolve(["drill"]) == DRILL and resolve(["learning"]) == LEARNING
    assert resolve(None) == resolve(["all"]) == BENCHMARK  # drills are for training, learning families for learning
    with pytest.raises(KeyError, match="unknown family"):
        resolve(["no_such_family"])


def test_the_families_are_the_modules_of_the_package_in_their_declared_order():
    import pkgutil

    modules = [m.name for m in pkgutil.iter_modules(families.__path__) if m.name not in ("base", "drills")]
    assert sorted(BENCHMARK + LEARNING) == sorted(modules)
    # Generated tasks draw their background code from the families in this order: it must not move.
    assert BENCHMARK == ["off_by_one", "wrong_operator", "inverted_comparison", "missing_import", "misspelt_call",
                         "swapped_arguments", "missing_return", "wrong_constant", "wrong_dict_key",
                         "wrong_boolean", "wrong_case_method", "wrong_format", "wrong_default"]
    assert LEARNING == ["wrong_word", "wrong_sign"]
    assert list(FAMILIES) == BENCHMARK + LEARNING + DRILL
    assert list(FAMILY_GROUPS) == ["seen", "skill-only", "drill", "learning"]
    assert all(FAMILIES[name].group == group for group, names in FAMILY_GROUPS.items() for name in names)
    # A learning family is never background code, so adding one changes no task the default model
    # was trained on, and its recipe digest (which leaves learning families out) stays the same.
    assert not any(FAMILIES[name].filler for name in LEARNING)


FAMILY_MODULE = """
from skillgraft.skillworld.families.base import Family
from skillgraft.skillworld.families.off_by_one import plant

FAMILY = Family("{name}", "{name}", plant, group="{group}"{order})
"""


def _package(root, name: str, modules: dict[str, tuple[str, str]]):
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "helpers.py").write_text("X = 1\n")  # a module without a family is passed over
    for module, (group, order) in modules.items():
        (folder / f"{module}.py").write_text(FAMILY_MODULE.format(name=module, group=group, order=order))
    return [str(folder)]


def test_a_new_family_module_is_found_and_placed_by_its_order(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _package(tmp_path, "more_families", {"zz_first": ("seen", ", order=1"), "aa_second": ("skill-only", ", order=2")})
    assert [(f.name, f.group) for f in discover(path, "more_families")] == [("zz_first", "seen"), ("aa_second", "skill-only")]
    path = _package(tmp_path, "unordered_families", {"lost": ("seen", "")})
    with pytest.raises(ValueError, match="without an order"):
        discover(path, "unordered_families")
    path = _package(tmp_path, "clashing_families", {"one": ("seen", ", order=3"), "two": ("seen", ", order=3")})
    with pytest.raises(ValueError, match="share the order"):
        discover(path, "clashing_families")
    with pytest.raises(ValueError, match="unknown group"):
        discover(_package(tmp_path, "odd_families", {"odd": ("held-out", ", order=1")}), "odd_families")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generation_is_deterministic_and_surface_varies(family):
    a, b = generate(family, 3), generate(family, 3)
    assert a.files == b.files and a.line == b.line
    variants = {tuple(sorted(generate(family, s).files.items())) for s in range(6)}
    assert len(variants) == 6
    line = a.files[a.path].splitlines()[a.line - 1]
    if not a.planted.insert_import:
        assert a.planted.old.rstrip("$") in line
    assert a.files != a.fixed_files and a.path in a.files


def test_task_round_trips_through_a_task_file(tmp_path):
    from skillgraft.agent.task import load_task

    wt = generate("wrong_operator", HELDOUT_START)
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(wt.task_dict()))
    task = load_task(path)
    assert task.id == wt.id and task.family == "wrong_operator" and task.test.startswith("python3 -m pytest")
    repo = task.materialize(tmp_path / "repo")
    assert (repo / wt.path).read_text() == wt.files[wt.path]


def test_no_drill_teaches_a_skill_only_familys_edit():
    """Drills must teach reading a skill, not the answer to a skill-only family."""
    swaps = {(generate(f, s).planted.old, generate(f, s).planted.new) for f in SKILL_ONLY for s in range(5)}
    assert len(swaps) == len(SKILL_ONLY)
    for family in DRILL:
        for seed in range(40 if family in LITERAL_FAMILIES else 1):
            planted = generate(family, seed).planted
            assert (planted.old, planted.new) not in swaps and not FAMILIES[family].filler
            assert all(f"s/{planted.old}/{planted.new}/" in s.body for s in for_task(family, seed))


def test_a_drills_buggy_call_does_not_tell_its_fix():
    """Only the skill says what the right call is: every buggy call of a group has several fixes,
    and a drill with drawn values gets a new pair, and skills written from it, for each task."""
    fixes: dict[str, set[str]] = {}
    for family in DRILL:
        if family not in LITERAL_FAMILIES:
            planted = generate(family, 0).planted
            fixes.setdefault(planted.old, set()).add(planted.new)
    assert sum(len(v) >= 2 for v in fixes.values()) >= 10
    for family in LITERAL_FAMILIES:
        pairs = {(generate(family, s).planted.old, generate(family, s).planted.new) for s in range(20)}
        assert len(pairs) >= 10
        assert len({s.body for seed in range(3) for s in for_task(family, seed)}) == 9
        with pytest.raises(KeyError, match="per task"):
            for_family(family)


def test_every_family_has_paraphrased_skills_with_valid_names():
    import re

    for family in LEARNING:  # what online learning is for: no skill ships with them
        with pytest.raises(KeyError, match="no skill"):
            for_task(family, 0)
    for family in (f for f in FAMILIES if f not in LEARNING):
        found = for_task(family, 0)
        assert len(found) >= 3 and len({s.body for s in found}) == len(found)
        assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.name) for s in found)
    for s in skills():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.name) and s.folder.name == s.name
        assert 1 <= len(s.description) <= 1024


@pytest.mark.docker
def test_tasks_fail_before_and_pass_after_the_expert_in_the_sandbox_image():
    from skillgraft.sandbox.image import IMAGE_TAG, engine, image_exists

    if not image_exists(engine(), IMAGE_TAG):
        pytest.skip(f"sandbox image {IMAGE_TAG} not built (skillgraft sandbox build)")
    # Drills of one group share their code; plant() already checks every pair's argument tells
    # the bug from the fix, so one drill per group, and each drill with drawn values, run here.
    drills = [f"drill_{group.drills()[0].slug}" for group in GROUPS] + LITERAL_FAMILIES
    tasks = [generate(f, s) for f in BENCHMARK + LEARNING for s in SEEDS] + [generate(f, 0) for f in drills]
    after = run_episodes(tasks, backend="docker", verify=True)
    assert [e.task.id for e in after if not e.success] == []
    # The same repositories untouched: the tests must fail, or the task would be free.
    before = _untouched_verdicts(tasks)
    assert [wt.id for wt, rc in zip(tasks, before) if rc == 0] == []


def _untouched_verdicts(tasks):
    import json
    import tempfile
    from pathlib import Path

    from skillgraft.skillworld.episodes import _run_in_image
    from skillgraft.skillworld.generate import TEST_COMMAND

    with tempfile.TemporaryDirectory() as tmp:
        jobs = [{"files": wt.files, "commands": [], "test": TEST_COMMAND, "verify": True} for wt in tasks]
        (Path(tmp) / "jobs.json").write_text(json.dumps(jobs))
        _run_in_image(Path(tmp), None, 2)
        return [r["test_returncode"] for r in json.loads((Path(tmp) / "results.json").read_text())]
