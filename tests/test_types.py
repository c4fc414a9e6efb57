"""The seams between the parts are typed, and the type checker holds the code to them.

mypy reads source folders, not the installer's import hook that maps `skillgraft.agent` to the
folder agent/, so it checks a tree of links laid out as the install lays the packages out."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["skillgraft.agent", "skillgraft.skills", "skillgraft.hypernet", "skillgraft.sandbox", "skillgraft.evolve",
           "skillgraft.jobs", "skillgraft.ui"]


def installed_layout(into: Path) -> Path:
    """Links that put each folder where pyproject's package-dir mapping installs it."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = into / "skillgraft"
    top.mkdir(parents=True)
    for entry in (ROOT / mapping["skillgraft"]).iterdir():
        (top / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        if package != "skillgraft":
            (into / package.replace(".", "/")).symlink_to(ROOT / folder)
    return into


@pytest.mark.slow
def test_the_public_seams_type_check_clean(tmp_path):
    tree = installed_layout(tmp_path / "tree")
    packages = [arg for name in CHECKED for arg in ("-p", name)]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--python-executable", sys.executable,
         "--cache-dir", str(tmp_path / "cache"), *packages],
        cwd=tree, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_install_claims_one_import_name():
    """Every package the folders hold is installed under skillgraft, and none is left out."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, mapping = set(config["packages"]), config["package-dir"]
    assert {name.split(".")[0] for name in listed} == {"skillgraft"}
    found = set()
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    assert found == listed
