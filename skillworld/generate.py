"""From (family, seed) to a task: a small Python repository with one planted bug and its tests.

The same (family, seed) always gives the same repository. Seeds below HELDOUT_START are for
training; seeds from HELDOUT_START on are held out for evaluation.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from skillgraft.skillworld.families import FAMILIES
from skillgraft.skillworld.families.base import Planted
from skillgraft.skillworld.names import MODULES, PACKAGES, NamePool

HELDOUT_START = 1_000_000
INSTRUCTION = "The test suite fails. Fix the code, not the tests."
TEST_COMMAND = "python3 -m pytest -q"
# What decides the verdict: put back as it was before the test command runs.
TEST_FILES = ["tests/**", "**/conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"]
LIMITS = {"steps": 10, "wall_time": 300.0, "command_timeout": 30.0, "cost": 0.0}


@dataclass
class WorldTask:
    family: str
    seed: int
    files: dict[str, str]  # the buggy repository
    fixed_files: dict[str, str]  # the same repository with the bug fixed, for checking tests
    planted: Planted
    path: str  # the buggy module, relative to the repository root
    line: int  # 1-based line of the bug in that module
    meta: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"skillworld-{self.family.replace('_', '-')}-{self.seed}"

    def task_dict(self) -> dict:
        """The task as a task file holds it: `skillgraft run` accepts it written as YAML."""
        return {
            "id": self.id,
            "repo": {"files": dict(self.files)},
            "instruction": INSTRUCTION,
            "test": TEST_COMMAND,
            "test_files": list(TEST_FILES),
            "family": self.family,
            "tags": ["skillworld"],
            "limits": dict(LIMITS),
        }

    def task(self):
        from skillgraft.agent.task import Task

        return Task.from_dict(self.task_dict(), source=f"<skillworld {self.id}>")


def generate(family: str, seed: int) -> WorldTask:
    if family not in FAMILIES:
        raise KeyError(f"unknown family {family!r}")
    rng = random.Random(f"skillworld:{family}:{seed}")
    pool = NamePool(rng)
    target = FAMILIES[family].plant(rng, pool)
    target.check()
    fillers = [name for name, fam in FAMILIES.items() if fam.filler]

    pkg = pool.pick(PACKAGES)
    packaged = rng.random() < 0.7  # a package folder, or modules at the repository root
    modules = [pool.pick(MODULES) for _ in range(rng.randint(1, 3))]
    home = rng.randrange(len(modules))
    blocks: dict[str, list[Planted]] = {}
    for i, module in enumerate(modules):
        extra = [FAMILIES[rng.choice(fillers)].plant(rng, pool) for _ in range(rng.randint(1, 3))]
        if i == home:
            extra.insert(rng.randrange(len(extra) + 1), target)
        blocks[module] = extra

    files: dict[str, str] = {}
    fixed_files: dict[str, str] = {}
    if packaged:
        init = rng.choice(["", f'"""The {pkg} package."""\n'])
        files[f"{pkg}/__init__.py"] = fixed_files[f"{pkg}/__init__.py"] = init
    path, line = "", 0
    for module, planted in blocks.items():
        rel = f"{pkg}/{module}.py" if packaged else f"{module}.py"
        doc = rng.random() < 0.5
        buggy_text, bug_at = _module(module, pkg, planted, target, doc, buggy=True)
        fixed_text, _ = _module(module, pkg, planted, target, doc, buggy=False)
        files[rel], fixed_files[rel] = buggy_text, fixed_text
        if bug_at:
            path, line = rel, bug_at
        dotted = f"{pkg}.{module}" if packaged else module
        test_text = _tests(dotted, planted)
        # module_test.py, not test_module.py: the failing test's node id then holds "test_" once
        # (tests/prices_test.py::test_scale_prices), so the name after it is unambiguous to copy.
        files[f"tests/{module}_test.py"] = fixed_files[f"tests/{module}_test.py"] = test_text
    return WorldTask(family, seed, files, fixed_files, target, path, line,
                     meta={"package": pkg if packaged else None, "modules": modules})


def _module(module: str, pkg: str, planted: list[Planted], target: Planted, doc: bool, *, buggy: bool):
    """The module's text, and the 1-based line of the target's bug (0 if not in this module)."""
    lines: list[str] = []
    if doc:
        lines += [f'"""{module.capitalize()} helpers for {pkg}."""', ""]
    imports = sorted({m for p in planted for m in p.imports})
    if buggy:
        imports = [m for m in imports if not (target in planted and m == target.insert_import)]
    if imports:
        lines += [f"import {m}" for m in imports] + [""]
    bug_at = 0
    for p in planted:
        if lines and lines[-1] != "":
            lines.append("")
        if lines:
            lines.append("")
        body = p.buggy if (buggy and p is target) else p.fixed
        if p is target:
            bug_at = len(lines) + p.bug_line + 1
        lines += body
    while lines and lines[0] == "":
        lines.pop(0)
        bug_at -= 1 if bug_at else 0
    return "\n".join(lines).rstrip("\n") + "\n", bug_at


def _tests(dotted: str, planted: list[Planted]) -> str:
    names = ", ".join(p.name for p in planted)
    lines = [f"from {dotted} import {names}", ""]
    for p in planted:
        lines += ["", *p.test]
    return "\n".join(lines) + "\n"
