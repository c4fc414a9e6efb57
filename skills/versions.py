"""Skills and their immutable versions: add, import SKILL.md folders, look up, export.

Every version's resources are written to the artifact folder before the transaction that
inserts its row, and a skill row never commits without its first version, so an import
killed at any point leaves whole skills or none.
"""
from __future__ import annotations

import hashlib
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, cast

from sqlalchemy import Table, and_, func, insert, inspect as sa_inspect, text as sql
from sqlmodel import SQLModel, col, select

from skillgraft.skills import skillmd
from skillgraft.skills.db import retrying
from skillgraft.skills.errors import NotFound, Problem, SkillFormatError, StoreError
from skillgraft.skills.schema import Origin, Skill, SkillVersion, utcnow
from skillgraft.skills.store_parts import StorePart

_INHERIT = "inherit"  # resources: keep the parent version's files


@dataclass(frozen=True)
class Draft:
    """A version ready to insert: validated text, resources already in the artifact folder."""

    name: str
    doc: skillmd.SkillDoc
    content_hash: str
    resources_hash: Optional[str]
    origin: str
    parent_id: Optional[int] = None
    trajectory_id: Optional[int] = None
    run_id: Optional[int] = None
    session_id: Optional[int] = None


@dataclass(frozen=True)
class ImportReport:
    path: str
    name: Optional[str]
    status: str  # created | updated | unchanged | error
    version: Optional[SkillVersion] = None
    error: Optional[str] = None


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SkillVersions(StorePart):
    """Store's skills and their versions."""

    # ---- writing -------------------------------------------------------------------------
    def add_version(
        self,
        name: str,
        text: str,
        origin: str | Origin = Origin.authored,
        parent_id: Optional[int] = None,
        trajectory_id: Optional[int] = None,
        files: Path | Mapping[str, bytes | str | Path] | None = None,
        *,
        description: Optional[str] = None,
        run_id: Optional[int] = None,
        session_id: Optional[int] = None,
    ) -> SkillVersion:
        """Adds a version of skill `name` (created if new); unchanged text returns the latest version.

        `text` is a whole SKILL.md, or just a Markdown body: then the frontmatter is made from
        `name` and `description` (default: the parent's description). `files` (a folder or a
        {relative path: content} map) replaces the resources; None keeps the parent's.
        """
        origin = Origin(origin).value
        doc = self._doc_for(name, text, description, parent_id)
        resources = _INHERIT if files is None else self._put_resources(files)
        draft = Draft(name, doc, text_hash(doc.text), resources, origin, parent_id, trajectory_id, run_id, session_id)
        return self._commit_drafts([draft])[0][0]

    def _doc_for(self, name: str, text: str, description: Optional[str], parent_id: Optional[int]) -> skillmd.SkillDoc:
        where = f"<skill {name}>/SKILL.md"
        if text.startswith("---"):
            return skillmd.parse(text, where, folder_name=name)
        if description is None:
            parent = self.version(parent_id) if parent_id else self.latest_version(name)
            if parent is None:
                raise SkillFormatError([Problem(where, "description", "required: pass description= for a new skill given only a body")])
            description = parent.description
            meta = {**parent.frontmatter, "name": name, "description": description}
        else:
            meta = {"name": name, "description": description}
        return skillmd.parse(skillmd.render(meta, text), where, folder_name=name)

    def _put_resources(self, files: Path | Mapping[str, bytes | str | Path]) -> Optional[str]:
        if isinstance(files, (str, Path)):
            files = {p.relative_to(files).as_posix(): p for p in sorted(Path(files).rglob("*")) if p.is_file()}
        return self.artifacts.put_files(files) if files else None

    def _commit_drafts(self, drafts: list[Draft]) -> list[tuple[SkillVersion, str]]:
        return retrying(lambda: self._insert(drafts))

    def _insert(self, drafts: list[Draft]) -> list[tuple[SkillVersion, str]]:
        """One transaction for all drafts; returns (version, created|updated|unchanged) per draft.

        Rows go in as multi-row Core INSERTs (tens of thousands per import); drafts naming the
        same skill twice are split into rounds so each sees the version before it.
        """
        results: list[Optional[tuple[SkillVersion, str]]] = [None] * len(drafts)
        pending = list(enumerate(drafts))
        with self.db.write() as s:
            while pending:
                names: set[str] = set()
                now: list[tuple[int, Draft]] = []
                later: list[tuple[int, Draft]] = []
                for item in pending:
                    (later if item[1].name in names else now).append(item)
                    names.add(item[1].name)
                self._insert_round(s, now, results)
                pending = later
        return results  # type: ignore[return-value]

    def _insert_round(self, s, items: list[tuple[int, Draft]], results: list) -> None:  # noqa: ANN001
        conn = s.connection()
        names = [d.name for _, d in items]
        latest = _latest_by_name(s, names)
        skill_ids = {v.skill_name: v.skill_id for v in latest.values()}
        missing = [n for n in names if n not in skill_ids]
        for chunk in (missing[i : i + 500] for i in range(0, len(missing), 500)):
            skill_ids.update(conn.execute(select(Skill.name, Skill.id).where(col(Skill.name).in_(chunk))).all())
        explicit = [d.parent_id for _, d in items if d.parent_id is not None]
        parents = dict(conn.execute(select(SkillVersion.id, SkillVersion.skill_id).where(col(SkillVersion.id).in_(explicit))).all()) if explicit else {}
        stamp = utcnow()
        new_skills = [{"name": n, "created_at": stamp} for n in dict.fromkeys(names) if n not in skill_ids]
        if new_skills:
            table = _table(Skill)
            skill_ids.update((name, sid) for sid, name in conn.execute(insert(table).returning(table.c.id, table.c.name), new_skills))
        rows: list[dict[str, Any]] = []
        slots: list[tuple[int, str]] = []
        for i, d in items:
            prev = latest.get(d.name)
            resources = (prev.resources_hash if prev else None) if d.resources_hash == _INHERIT else d.resources_hash
            if prev and prev.content_hash == d.content_hash and prev.resources_hash == resources:
                results[i] = (prev, "unchanged")
                continue
            if d.parent_id is not None and parents.get(d.parent_id) != skill_ids[d.name]:
                raise NotFound(f"parent version {d.parent_id} is not a version of {d.name!r}")
            rows.append({
                "skill_id": skill_ids[d.name], "skill_name": d.name, "number": (prev.number + 1) if prev else 1,
                "text": d.doc.text, "body": d.doc.body, "description": d.doc.description, "frontmatter": d.doc.frontmatter,
                "content_hash": d.content_hash, "resources_hash": resources,
                "parent_id": d.parent_id if d.parent_id is not None else (prev.id if prev else None), "origin": d.origin,
                "trajectory_id": d.trajectory_id, "run_id": d.run_id, "session_id": d.session_id, "created_at": stamp,
            })
            slots.append((i, "updated" if prev else "created"))
        if not rows:
            return
        table = _table(SkillVersion)
        ids = [r[0] for r in conn.execute(insert(table).returning(table.c.id, sort_by_parameter_order=True), rows)]
        loaded: dict[int, SkillVersion] = {}
        for chunk in (ids[i : i + 500] for i in range(0, len(ids), 500)):
            loaded.update((v.id, v) for v in s.exec(select(SkillVersion).where(col(SkillVersion.id).in_(chunk))))
        for (i, status), vid in zip(slots, ids):
            results[i] = (loaded[vid], status)
        if self.db.has_fts:
            fts = [{"sid": r["skill_id"], "name": r["skill_name"].replace("-", " "), "d": r["description"], "b": r["body"], "v": vid}
                   for r, vid in zip(rows, ids)]
            conn.execute(sql("DELETE FROM skill_fts WHERE rowid = :sid"), fts)
            conn.execute(sql("INSERT INTO skill_fts(rowid, name, description, body, version_id) VALUES (:sid, :name, :d, :b, :v)"), fts)

    # ---- import / export -----------------------------------------------------------------
    def import_skill(self, folder: Path) -> SkillVersion:
        """Imports one skill folder; raises SkillFormatError naming the file, field and rule."""
        return self._import_batch([skillmd.read_folder(Path(folder))])[0][0]

    def import_tree(
        self, root: Path, batch: int = 1, on_result: Optional[Callable[[ImportReport], None]] = None
    ) -> list[ImportReport]:
        """Imports every skill folder under root and reports each one; a bad skill does not stop the rest.

        `batch` skills share one transaction (and one artifact durability barrier); a skill is
        never split across transactions, so an interrupted import leaves whole skills only.
        """
        reports: list[ImportReport] = []

        def report(r: ImportReport) -> None:
            reports.append(r)
            if on_result:
                on_result(r)

        def read(folder: Path) -> skillmd.SkillFolder | ImportReport:
            try:
                return skillmd.read_folder(folder)
            except SkillFormatError as exc:
                return ImportReport(str(folder), folder.name, "error", error=str(exc))
            except OSError as exc:  # unreadable, or gone while read: this skill only, the rest go in
                return ImportReport(str(folder), folder.name, "error", error=f"{folder}: cannot read ({exc.strerror or exc})")

        folders = skillmd.find_skill_folders(Path(root))
        with ThreadPoolExecutor(max_workers=4 if batch > 1 else 1) as pool:
            for start in range(0, len(folders), batch):
                pending = []
                for item in pool.map(read, folders[start : start + batch]):
                    if isinstance(item, ImportReport):
                        report(item)
                    else:
                        pending.append(item)
                if pending:
                    self._import_reporting(pending, report)
        return reports

    def _import_reporting(self, folders: list[skillmd.SkillFolder], report: Callable[[ImportReport], None]) -> None:
        try:
            results = self._import_batch(folders)
        except StoreError as exc:
            if len(folders) == 1:
                report(ImportReport(str(folders[0].path), folders[0].doc.name, "error", error=str(exc)))
                return
            for one in folders:  # find which skill the batch tripped on; the others still go in
                self._import_reporting([one], report)
            return
        for folder, (version, status) in zip(folders, results):
            report(ImportReport(str(folder.path), folder.doc.name, status, version))

    def _import_batch(self, folders: list[skillmd.SkillFolder]) -> list[tuple[SkillVersion, str]]:
        with_files = [f for f in folders if f.resources]
        hashes = dict(zip((id(f) for f in with_files), self.artifacts.put_many([f.resources for f in with_files])))
        drafts = [
            Draft(f.doc.name, f.doc, text_hash(f.doc.text), hashes.get(id(f)), Origin.imported.value) for f in folders
        ]
        return self._commit_drafts(drafts)

    def export_skill(self, name: str, dest: Path, version: Optional[int] = None, overwrite: bool = False) -> Path:
        """Writes dest/name/ (SKILL.md byte for byte as stored, plus its resources); returns the folder."""
        v = self.skill_version(name, version)
        target = Path(dest) / name
        if target.exists():
            if not overwrite:
                raise StoreError(f"{target} already exists; choose another folder or overwrite")
            shutil.rmtree(target)
        staging = Path(dest) / f".{name}.exporting"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        if v.resources_hash:
            shutil.copytree(self.artifacts.path(v.resources_hash), staging, dirs_exist_ok=True)
        (staging / skillmd.SKILL_FILE).write_bytes(v.text.encode("utf-8"))
        staging.rename(target)
        return target

    def resources_path(self, version: SkillVersion) -> Optional[Path]:
        return self.artifacts.path(version.resources_hash) if version.resources_hash else None

    # ---- reading -------------------------------------------------------------------------
    def latest_version(self, name: str) -> Optional[SkillVersion]:
        """The newest version of a skill, or None when no skill has that name."""
        with self.db.read() as s:
            return _latest_by_name(s, [name]).get(name)

    def version(self, version_id: int) -> SkillVersion:
        with self.db.read() as s:
            v = s.get(SkillVersion, version_id)
        if v is None:
            raise NotFound(f"no skill version with id {version_id}")
        return v

    def skill_version(self, name: str, number: Optional[int] = None) -> SkillVersion:
        """Version `number` of a skill (the latest when None); raises NotFound."""
        if number is None:
            v = self.latest_version(name)
        else:
            with self.db.read() as s:
                v = s.exec(select(SkillVersion).where(SkillVersion.skill_name == name, SkillVersion.number == number)).first()
        if v is None:
            raise NotFound(f"no skill {name!r}" + (f" version {number}" if number is not None else ""))
        return v

    def versions_from_trajectory(self, trajectory_id: int) -> list[SkillVersion]:
        """The versions summarised from one run."""
        with self.db.read() as s:
            return list(s.exec(select(SkillVersion).where(SkillVersion.trajectory_id == trajectory_id).order_by(col(SkillVersion.id))).all())

    def versions(self, name: str) -> list[SkillVersion]:
        with self.db.read() as s:
            return list(s.exec(select(SkillVersion).where(SkillVersion.skill_name == name).order_by(col(SkillVersion.number))).all())

    def skills(self) -> list[Skill]:
        with self.db.read() as s:
            return list(s.exec(select(Skill).order_by(Skill.name)).all())

    def latest_versions(self, names: Optional[Iterable[str]] = None) -> list[SkillVersion]:
        """The newest version of every skill (or of the named ones)."""
        with self.db.read() as s:
            return sorted(_latest_by_name(s, None if names is None else list(names)).values(), key=lambda v: v.skill_name)


def _table(model: type[SQLModel]) -> Table:
    """The Core table of a table model (sqlmodel's stubs leave `__table__` undeclared)."""
    return cast(Table, sa_inspect(model).local_table)


def _latest_by_name(s, names: Optional[list[str]]) -> dict[str, SkillVersion]:  # noqa: ANN001
    newest = select(SkillVersion.skill_id, func.max(SkillVersion.number).label("n")).group_by(col(SkillVersion.skill_id))
    found: dict[str, SkillVersion] = {}
    chunks = [None] if names is None else [names[i : i + 500] for i in range(0, len(names), 500)]
    for chunk in chunks:
        sub = (newest if chunk is None else newest.where(col(SkillVersion.skill_name).in_(chunk))).subquery()
        q = select(SkillVersion).join(sub, and_(col(SkillVersion.skill_id) == sub.c.skill_id, col(SkillVersion.number) == sub.c.n))
        found.update((v.skill_name, v) for v in s.exec(q).all())
    return found


