"""SKILL.md rules, import and export."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from skillgraft.skills import SkillFormatError, Store, skillmd
from store_fixtures import write_skill

GOOD = "---\nname: fix-imports\ndescription: Fix ImportError\n---\nBody.\n"


def refusal(text: str | bytes, folder: str = "fix-imports") -> str:
    with pytest.raises(SkillFormatError) as info:
        skillmd.parse(text, f"{folder}/SKILL.md", folder_name=folder)
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "folder", "rule"),
    [
        ("Fix-Imports", "Fix-Imports", "name: may contain only lowercase letters a-z, digits and hyphens; found 'FI'"),
        ("fix_imports", "fix_imports", "name: may contain only lowercase letters a-z, digits and hyphens; found '_'"),
        ("a" * 65, "a" * 65, "name: length must be 1-64 characters, got 65"),
        ("-fix", "-fix", "name: must not start or end with a hyphen"),
        ("fix-", "fix-", "name: must not start or end with a hyphen"),
        ("fix--imports", "fix--imports", "name: must not contain consecutive hyphens '--'"),
        ("fix-imports", "other-folder", "name: must equal the folder name 'other-folder', got 'fix-imports'"),
        ('""', "x", "name: length must be 1-64 characters, got 0"),
    ],
)
def test_name_rules(name: str, folder: str, rule: str) -> None:
    message = refusal(f"---\nname: {name}\ndescription: d\n---\nbody\n", folder)
    assert f"{folder}/SKILL.md: {rule}" in message


def test_name_of_64_characters_is_accepted() -> None:
    name = "a" * 64
    assert skillmd.parse(f"---\nname: {name}\ndescription: d\n---\n", "SKILL.md", name).name == name


@pytest.mark.parametrize(
    ("frontmatter", "rule"),
    [
        ("name: fix-imports\n", "description: required"),
        ("name: fix-imports\ndescription: '   '\n", "description: must not be empty"),
        (f"name: fix-imports\ndescription: {'d' * 1025}\n", "description: length must be 1-1024 characters, got 1025"),
        ("description: d\n", "name: required"),
        ("name: 12\ndescription: d\n", "name: must be a string, got int"),
        ("name: fix-imports\ndescription: d\nversion: 2\n", "version: unknown field; allowed fields are name, description, license"),
        (f"name: fix-imports\ndescription: d\ncompatibility: {'c' * 501}\n", "compatibility: length must be 1-500 characters, got 501"),
        ("name: fix-imports\ndescription: d\nmetadata:\n  level: 3\n", "metadata: must be a mapping of string keys to string values"),
        ("name: fix-imports\ndescription: d\nallowed-tools: [bash]\n", "allowed-tools: must be a space-separated string"),
        ("name: fix-imports\ndescription: d\nlicense: [MIT]\n", "license: must be a string, got list"),
        ("- a\n- b\n", "frontmatter: must be a YAML mapping, got list"),
        ("name: [unclosed\n", "frontmatter: not valid YAML"),
    ],
)
def test_frontmatter_rules(frontmatter: str, rule: str) -> None:
    assert f"fix-imports/SKILL.md: {rule}" in refusal(f"---\n{frontmatter}---\nbody\n")


def test_missing_and_unterminated_frontmatter() -> None:
    assert "SKILL.md: frontmatter: missing: SKILL.md must begin with a '---' line" in refusal("# Just markdown\n")
    assert "SKILL.md: frontmatter: missing" in refusal("\n---\nname: fix-imports\ndescription: d\n---\n")
    assert "SKILL.md: frontmatter: unterminated: no closing '---' line" in refusal("---\nname: fix-imports\ndescription: d\n")


def test_non_utf8_is_refused_with_offset() -> None:
    prefix = "---\nname: fix-imports\ndescription: caf".encode()
    data = prefix + b"\xe9\n---\nbody\n"  # Latin-1 é
    assert f"fix-imports/SKILL.md: encoding: not valid UTF-8: byte 0xe9 at offset {len(prefix)}" in refusal(data)


def test_every_broken_rule_is_listed() -> None:
    with pytest.raises(SkillFormatError) as info:
        skillmd.parse("---\nname: Bad--\nextra: 1\n---\n", "x/SKILL.md", "x")
    fields = [p.field for p in info.value.problems]
    assert fields.count("name") >= 3 and "extra" in fields and "description" in fields


def test_optional_fields_are_accepted() -> None:
    doc = skillmd.parse(
        "---\nname: fix-imports\ndescription: d\nlicense: MIT\ncompatibility: python>=3.10\n"
        "metadata:\n  author: team\nallowed-tools: Bash Read\n---\nbody\n", "SKILL.md", "fix-imports")
    assert doc.frontmatter["metadata"] == {"author": "team"} and doc.body == "body\n"


@pytest.mark.parametrize(
    "body",
    [
        "# Title\n\nSteps:\n1. run `pytest -x`\n",
        "CRLF lines\r\nstay\r\n",
        "no trailing newline",
        "unicode ✓ — ümlaut\n\n\n   trailing spaces   \n",
        "---\nhorizontal rules in the body\n---\n",
        "",
    ],
)
def test_import_export_round_trip_is_byte_identical(body: str, tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "artifacts")
    extra = "license: Apache-2.0\nmetadata:\n  owner: \"qa\"\n"
    src = write_skill(tmp_path / "src", "fix-imports", "'Fix ImportError: run it'", body,
                      {"scripts/check.sh": "#!/bin/sh\necho ok\n", "references/notes.md": "notes\n", "assets/logo.bin": "\x00\x01"},
                      extra=extra)
    (src / "scripts" / "check.sh").chmod(0o755)
    v = store.import_skill(src)
    assert v.body == body and v.origin == "imported"
    out = store.export_skill("fix-imports", tmp_path / "out")
    original, exported = (src / "SKILL.md").read_bytes(), (out / "SKILL.md").read_bytes()
    assert exported == original
    head = lambda data: yaml.safe_load(data.decode().split("---", 2)[1])  # noqa: E731
    assert head(exported) == head(original)
    assert exported.decode().endswith(body)
    for rel in ("scripts/check.sh", "references/notes.md", "assets/logo.bin"):
        assert (out / rel).read_bytes() == (src / rel).read_bytes()
        assert os.access(out / rel, os.X_OK) == (rel == "scripts/check.sh")  # the executable bit comes back
    assert store.import_skill(out).id == v.id  # and the exported folder is the same content
    with pytest.raises(Exception, match="already exists"):
        store.export_skill("fix-imports", tmp_path / "out")
    store.close()


def test_reimport_unchanged_is_a_no_op_and_changed_makes_a_child(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "artifacts")
    src = write_skill(tmp_path / "src", "fix-imports", "Fix ImportError", "Version one.\n", {"scripts/a.sh": "one\n"})
    v1 = store.import_skill(src)
    assert store.import_skill(src).id == v1.id
    (src / "SKILL.md").write_text(GOOD.replace("Body.", "Version two."))
    v2 = store.import_skill(src)
    assert (v2.number, v2.parent_id, v2.origin) == (2, v1.id, "imported")
    (src / "scripts" / "a.sh").write_text("two\n")  # same text, new files: still a new version
    v3 = store.import_skill(src)
    assert (v3.number, v3.parent_id) == (3, v2.id) and v3.resources_hash != v2.resources_hash
    (src / "scripts" / "a.sh").chmod(0o755)  # same bytes, now executable: that is a change too
    v4 = store.import_skill(src)
    assert v4.number == 4 and v4.resources_hash != v3.resources_hash and store.import_skill(src).id == v4.id
    assert store.check(verify=True).ok
    assert len(store.versions("fix-imports")) == 4
    store.close()


def test_tree_import_reports_each_skill_and_keeps_going(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "artifacts")
    root = tmp_path / "tree"
    write_skill(root / "python", "fix-imports", "Fix ImportError", "a\n")
    write_skill(root / "python", "pin-deps", "Pin dependencies", "b\n")
    write_skill(root, "wrong-name", "d", "c\n").joinpath("SKILL.md").write_text("---\nname: other\ndescription: d\n---\n")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_bytes(b"\xff\xfe")
    reports = {r.name: r for r in store.import_tree(root, batch=2)}
    assert {n: r.status for n, r in reports.items()} == {
        "fix-imports": "created", "pin-deps": "created", "wrong-name": "error", "broken": "error"}
    assert "must equal the folder name 'wrong-name'" in reports["wrong-name"].error
    assert "encoding: not valid UTF-8" in reports["broken"].error
    assert {s.name for s in store.skills()} == {"fix-imports", "pin-deps"}
    again = store.import_tree(root)
    assert sorted(r.status for r in again) == ["error", "error", "unchanged", "unchanged"]
    store.close()


def test_render_then_parse_round_trips_program_written_skills() -> None:
    text = skillmd.render({"description": "Fix: ImportError # not a comment", "name": "fix-imports"}, "Body\n")
    doc = skillmd.parse(text, "SKILL.md", "fix-imports")
    assert doc.description == "Fix: ImportError # not a comment" and doc.body == "Body\n"
    assert text.startswith("---\nname: fix-imports\n")
