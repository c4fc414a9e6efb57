"""SKILL.md in and out, by the Agent Skills rules.

A skill is a folder `name/` holding `SKILL.md` (YAML frontmatter between `---` lines, then a
Markdown body) and optionally `scripts/`, `references/`, `assets/`. The text is kept exactly
as written: the body is never re-rendered, so export gives back the same bytes.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skillgraft.skills.errors import Problem, SkillFormatError

SKILL_FILE = "SKILL.md"
# The Agent Skills guidance keeps SKILL.md under 500 lines and puts detail in references/; 64 KiB
# is that at over 130 characters a line, and keeps a runaway file out of every prompt and index.
MAX_SKILL_BYTES = 64 * 1024
RESOURCE_DIRS = ("scripts", "references", "assets")
ALLOWED_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
NAME_MAX, DESCRIPTION_MAX, COMPATIBILITY_MAX = 64, 1024, 500
_NAME_CHARS = re.compile(r"[a-z0-9-]+")
# The C loader parses the same safe subset ~10x faster, which matters for 50k-skill imports.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class SkillDoc:
    name: str
    description: str
    frontmatter: dict[str, Any]
    body: str
    text: str


@dataclass
class SkillFolder:
    """A parsed skill folder: its document plus the resource files that travel with it."""

    path: Path
    doc: SkillDoc
    resources: dict[str, Path] = field(default_factory=dict)  # relative posix path -> file


def split(text: str, path: str) -> tuple[str, str]:
    """Returns (frontmatter YAML, body); the body is everything after the closing line, untouched."""
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip("\r") != "---":
        raise SkillFormatError([Problem(path, "frontmatter", "missing: SKILL.md must begin with a '---' line opening YAML frontmatter")])
    pos = first_end + 1
    while pos <= len(text):
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if line.rstrip("\r") == "---":
            body_start = len(text) if end < 0 else end + 1
            return text[first_end + 1 : pos], text[body_start:]
        if end < 0:
            break
        pos = end + 1
    raise SkillFormatError([Problem(path, "frontmatter", "unterminated: no closing '---' line after the frontmatter")])


def decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise SkillFormatError([Problem(path, "encoding", f"not valid UTF-8: byte 0x{bad} at offset {exc.start}")]) from None


def parse(source: str | bytes, path: str = SKILL_FILE, folder_name: str | None = None) -> SkillDoc:
    """Parses and validates one SKILL.md; raises SkillFormatError listing every broken rule."""
    text = decode(source, path) if isinstance(source, bytes) else source
    raw, body = split(text, path)
    try:
        meta = yaml.load(raw, Loader=_LOADER) if raw.strip() else {}
    except yaml.YAMLError as exc:
        raise SkillFormatError([Problem(path, "frontmatter", f"not valid YAML: {exc}".replace("\n", " "))]) from None
    if not isinstance(meta, dict):
        raise SkillFormatError([Problem(path, "frontmatter", f"must be a YAML mapping, got {type(meta).__name__}")])
    problems = validate(meta, path, folder_name)
    if problems:
        raise SkillFormatError(problems)
    return SkillDoc(name=meta["name"], description=meta["description"], frontmatter=meta, body=body, text=text)


def validate(meta: dict[str, Any], path: str, folder_name: str | None = None) -> list[Problem]:
    problems: list[Problem] = []

    def bad(field_name: str, rule: str) -> None:
        problems.append(Problem(path, field_name, rule))

    for key in meta:
        if key not in ALLOWED_FIELDS:
            bad(str(key), f"unknown field; allowed fields are {', '.join(ALLOWED_FIELDS)}")

    name = meta.get("name")
    if name is None:
        bad("name", "required")
    elif not isinstance(name, str):
        bad("name", f"must be a string, got {type(name).__name__}")
    else:
        if not 1 <= len(name) <= NAME_MAX:
            bad("name", f"length must be 1-{NAME_MAX} characters, got {len(name)}")
        if name and not _NAME_CHARS.fullmatch(name):
            odd = sorted({c for c in name if not _NAME_CHARS.fullmatch(c)})
            bad("name", f"may contain only lowercase letters a-z, digits and hyphens; found {''.join(odd)!r}")
        if name.startswith("-") or name.endswith("-"):
            bad("name", "must not start or end with a hyphen")
        if "--" in name:
            bad("name", "must not contain consecutive hyphens '--'")
        if folder_name is not None and name != folder_name:
            bad("name", f"must equal the folder name {folder_name!r}, got {name!r}")

    description = meta.get("description")
    if description is None:
        bad("description", "required")
    elif not isinstance(description, str):
        bad("description", f"must be a string, got {type(description).__name__}")
    elif not description.strip():
        bad("description", "must not be empty")
    elif len(description) > DESCRIPTION_MAX:
        bad("description", f"length must be 1-{DESCRIPTION_MAX} characters, got {len(description)}")

    if "license" in meta and not isinstance(meta["license"], str):
        bad("license", f"must be a string, got {type(meta['license']).__name__}")
    if "compatibility" in meta:
        compat = meta["compatibility"]
        if not isinstance(compat, str):
            bad("compatibility", f"must be a string, got {type(compat).__name__}")
        elif not 1 <= len(compat) <= COMPATIBILITY_MAX:
            bad("compatibility", f"length must be 1-{COMPATIBILITY_MAX} characters, got {len(compat)}")
    if "metadata" in meta:
        md = meta["metadata"]
        if not isinstance(md, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in md.items()):
            bad("metadata", "must be a mapping of string keys to string values")
    if "allowed-tools" in meta and not isinstance(meta["allowed-tools"], str):
        bad("allowed-tools", "must be a space-separated string of tool names")
    return problems


def render(frontmatter: dict[str, Any], body: str) -> str:
    """Composes SKILL.md text for a skill written by the program (name and description first)."""
    ordered = {k: frontmatter[k] for k in ALLOWED_FIELDS if k in frontmatter}
    ordered.update({k: v for k, v in frontmatter.items() if k not in ordered})
    head = yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True, width=10_000)
    return f"---\n{head}---\n{body}"


def _is_hidden_name(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def read_folder(folder: Path) -> SkillFolder:
    """Reads `folder/SKILL.md` (name must equal the folder) and lists the files that travel with it."""
    folder = Path(folder)
    skill_md = folder / SKILL_FILE
    if not skill_md.is_file():
        raise SkillFormatError([Problem(str(skill_md), "file", f"missing: a skill folder must contain {SKILL_FILE}")])
    links = _links_in(folder)
    if links:
        # A link could carry a file from anywhere on this machine into the store (and back out on
        # export); the skill is refused, the rest of an import goes on.
        raise SkillFormatError([Problem(str(link), "file", f"a symbolic link (to {os.readlink(link)}): links are not imported; "
                                        "put the file itself in the skill folder") for link in links])
    size = skill_md.stat().st_size
    if size > MAX_SKILL_BYTES:
        raise SkillFormatError([Problem(str(skill_md), "file", f"{size:,} bytes, over the limit of {MAX_SKILL_BYTES // 1024} KiB: "
                                        "keep SKILL.md under 500 lines and move detail into references/")])
    doc = parse(skill_md.read_bytes(), str(skill_md), folder_name=os.path.basename(os.path.abspath(folder)))
    resources: dict[str, Path] = {}
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _is_hidden_name(d))
        prefix = os.path.relpath(here, folder).replace(os.sep, "/")
        for name in sorted(files):
            rel = name if prefix == "." else f"{prefix}/{name}"
            if rel != SKILL_FILE and not _is_hidden_name(name):
                resources[rel] = Path(here, name)
    return SkillFolder(path=folder, doc=doc, resources=dict(sorted(resources.items())))


def _links_in(folder: Path) -> list[Path]:
    """Every symbolic link in a skill folder, SKILL.md included, without following any."""
    found = []
    for here, dirs, files in os.walk(folder):
        found += [Path(here, name) for name in sorted(dirs + files) if os.path.islink(os.path.join(here, name))]
    return found


def find_skill_folders(root: Path) -> list[Path]:
    """Every folder under root holding a SKILL.md; a skill's own subfolders are not searched."""
    root = Path(root)
    if (root / SKILL_FILE).is_file():
        return [root]
    found: list[Path] = []
    with os.scandir(root) as entries:
        children = sorted(e.name for e in entries if e.is_dir() and not _is_hidden_name(e.name))
    for name in children:
        child = root / name
        found.extend([child] if os.path.isfile(os.path.join(child, SKILL_FILE)) else find_skill_folders(child))
    return found
