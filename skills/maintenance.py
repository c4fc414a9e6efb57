"""`store check` and `store gc`: rows against files, both ways."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import select

from skillgraft.skills.adapter_files import AdapterFormatError, check_adapter_files
from skillgraft.skills.runs import Runs
from skillgraft.skills.schema import Adapter, SkillVersion, Trajectory, saved_id


@dataclass(frozen=True)
class MissingFile:
    table: str
    row_id: int
    content_hash: str
    detail: str


@dataclass
class CheckReport:
    rows: int = 0
    artifacts: int = 0
    missing: list[MissingFile] = field(default_factory=list)  # rows naming files that are not there
    corrupt: list[MissingFile] = field(default_factory=list)  # files whose content no longer matches the hash
    orphans: list[str] = field(default_factory=list)  # artifacts no row names
    leftovers: list[Path] = field(default_factory=list)  # partial writes in tmp/
    interrupted: list[int] = field(default_factory=list)  # sessions whose process died, now closed as interrupted

    @property
    def ok(self) -> bool:
        return not (self.missing or self.corrupt)


@dataclass
class GcReport:
    removed: list[str] = field(default_factory=list)
    leftovers: list[Path] = field(default_factory=list)
    kept_recent: int = 0
    freed_bytes: int = 0


class Maintenance(Runs):
    """Store's consistency check and garbage collection; a check also closes interrupted sessions."""

    def _referenced(self) -> list[tuple[str, int, str, str | None]]:
        """(table, row id, artifact hash, file that must be inside) for every row naming an artifact."""
        with self.db.read() as s:
            refs: list[tuple[str, int, str, str | None]] = [
                ("skillversion", saved_id(i), h, None) for i, h in s.exec(select(SkillVersion.id, SkillVersion.resources_hash)) if h]
            refs += [("adapter", saved_id(i), h, None) for i, h in s.exec(select(Adapter.id, Adapter.artifact_hash))]
            refs += [("trajectory", saved_id(i), h, f)
                     for i, h, f in s.exec(select(Trajectory.id, Trajectory.artifact_hash, Trajectory.file_name))]
        return refs

    def check(self, verify: bool = False) -> CheckReport:
        """Finds rows whose files are missing (or, with verify, altered) and files no row names,
        and closes sessions whose process is gone as interrupted (what they finished is kept)."""
        refs = self._referenced()
        present = self.artifacts.hashes()
        report = CheckReport(rows=len(refs), artifacts=len(present))
        verified: dict[str, bool] = {}
        for table, row_id, h, inner in refs:
            if h not in present:
                report.missing.append(MissingFile(table, row_id, h, "artifact folder missing"))
            elif inner and not (self.artifacts.path(h) / inner).is_file():
                report.missing.append(MissingFile(table, row_id, h, f"{inner} missing from the artifact"))
            elif verify:
                if h not in verified:
                    verified[h] = self.artifacts.verify(h)
                if not verified[h]:
                    report.corrupt.append(MissingFile(table, row_id, h, "content does not match its hash"))
                elif table == "adapter":
                    try:  # whole files, but is it an adapter a model can load?
                        check_adapter_files(self.artifacts.path(h))
                    except AdapterFormatError as exc:
                        report.corrupt.append(MissingFile(table, row_id, h, str(exc)))
        report.orphans = sorted(present - {h for _, _, h, _ in refs})
        report.leftovers = [left.path for left in self.artifacts.leftovers()]
        report.interrupted = [saved_id(row.id) for row in self.interrupted_sessions()]
        for session_id in report.interrupted:
            self.close_interrupted(session_id)
        return report

    def gc(self, grace_s: float = 3600.0, dry_run: bool = False) -> GcReport:
        """Removes artifacts no row names, and partial writes, older than grace_s.

        The grace period protects a writer that has placed its files but not yet committed its row.
        """
        report = GcReport()
        now = time.time()
        referenced = {h for _, _, h, _ in self._referenced()}
        for h in sorted(self.artifacts.hashes() - referenced):
            path = self.artifacts.path(h)
            if now - path.stat().st_mtime < grace_s:
                report.kept_recent += 1
                continue
            report.freed_bytes += self.artifacts.size([path])
            report.removed.append(h)
            if not dry_run:
                self.artifacts.remove(h)
        for left in self.artifacts.leftovers():
            if left.age_s < grace_s:
                report.kept_recent += 1
                continue
            report.freed_bytes += self.artifacts.size([left.path])
            report.leftovers.append(left.path)
            if not dry_run:
                shutil.rmtree(left.path, ignore_errors=True) if left.path.is_dir() else left.path.unlink(missing_ok=True)
        return report
