"""Adapters: compiled skills, versions of the global adapter, CycleQD checkpoints.

Rows are append-only and numbered within a name. The global adapter moves forward by
optimistic concurrency: a writer says which version it started from, and loses with
StaleVersion if someone else committed in between. Rollback is a new version that names
an old artifact, so history is never rewritten.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, func, select

from skillgraft.skills.db import retrying
from skillgraft.skills.errors import NotFound, StaleVersion, StoreError
from skillgraft.skills.adapter_files import check_adapter_files
from skillgraft.skills.schema import Adapter, AdapterKind, SkillVersion
from skillgraft.skills.versions import SkillVersions

AdapterRecord = Adapter
GLOBAL = "global"


def _peft_config(folder: Path) -> dict[str, Any]:
    config = Path(folder) / "adapter_config.json"
    return json.loads(config.read_text()) if config.is_file() else {}


class Adapters(SkillVersions):
    """Store's adapters; a compiled skill's adapter is named after its skill version."""

    def add_adapter(
        self,
        folder: Path | Mapping[str, bytes],
        kind: str | AdapterKind,
        base_fingerprint: str,
        rank: int,
        alpha: float,
        target_modules: list[str],
        provenance: dict,
        skill_version_id: Optional[int] = None,
        hypernet_ckpt: Optional[str] = None,
        name: Optional[str] = None,
        parent_id: Optional[int] = None,
    ) -> Adapter:
        """Writes the adapter into the artifact store, then records it as the next version of `name`.

        `folder` is a PEFT folder to copy, or its files by name as bytes (written once, straight
        into the store). `name` defaults to the skill's name for a compiled skill, else to the kind.
        """
        kind = AdapterKind(kind).value
        check_adapter_files(folder if isinstance(folder, Mapping) else Path(folder))
        if name is None:
            name = self.version(skill_version_id).skill_name if skill_version_id is not None else kind
        artifact = self.artifacts.put_files(folder) if isinstance(folder, Mapping) else self.artifacts.put_dir(Path(folder))

        def insert() -> Adapter:
            with self.db.write() as s:
                if skill_version_id is not None and s.get(SkillVersion, skill_version_id) is None:
                    raise NotFound(f"no skill version with id {skill_version_id}")
                number = s.exec(select(func.max(Adapter.version)).where(Adapter.name == name)).one() or 0
                row = Adapter(
                    name=name, version=number + 1, kind=kind, base_fingerprint=base_fingerprint, rank=int(rank),
                    alpha=float(alpha), target_modules=list(target_modules), provenance=dict(provenance),
                    skill_version_id=skill_version_id, hypernet_ckpt=hypernet_ckpt, artifact_hash=artifact,
                    parent_id=parent_id,
                )
                s.add(row)
            return row

        return retrying(insert)

    def adapter(self, adapter_id: int) -> Adapter:
        with self.db.read() as s:
            row = s.get(Adapter, adapter_id)
        if row is None:
            raise NotFound(f"no adapter with id {adapter_id}")
        return row

    def adapters(self, kind: Optional[str] = None, name: Optional[str] = None,
                 skill_version_ids: Optional[list[int]] = None) -> list[Adapter]:
        """By name and version; `skill_version_ids` keeps those compiled from these skill versions."""
        q = select(Adapter).order_by(col(Adapter.name), col(Adapter.version))
        if kind is not None:
            q = q.where(Adapter.kind == AdapterKind(kind).value)
        if name is not None:
            q = q.where(Adapter.name == name)
        if skill_version_ids is not None:
            q = q.where(col(Adapter.skill_version_id).in_(skill_version_ids))
        with self.db.read() as s:
            return list(s.exec(q).all())

    def adapter_path(self, adapter_id: int) -> Path:
        """The adapter's PEFT folder inside the artifact store (read it, never write it)."""
        path = self.artifacts.path(self.adapter(adapter_id).artifact_hash)
        if not path.is_dir():
            raise StoreError(f"adapter {adapter_id}'s files are missing from {path}; run `skillgraft store check`")
        return path

    def find_compiled(self, skill_version_id: int, hypernet_ckpt: Optional[str]) -> Optional[Adapter]:
        """The adapter this hypernetwork checkpoint already compiled from this skill version, if any."""
        q = (
            select(Adapter)
            .where(Adapter.kind == AdapterKind.skill.value, Adapter.skill_version_id == skill_version_id,
                   Adapter.hypernet_ckpt == hypernet_ckpt)
            .order_by(col(Adapter.id).desc())
        )
        with self.db.read() as s:
            return s.exec(q).first()

    # ---- the global adapter ----------------------------------------------------------------
    def latest_global(self, name: str = GLOBAL) -> Optional[Adapter]:
        with self.db.read() as s:
            return _latest(s, name)

    def global_history(self, name: str = GLOBAL) -> list[Adapter]:
        return self.adapters(kind=AdapterKind.global_.value, name=name)

    def commit_global(
        self,
        folder: Path,
        expected_parent_id: Optional[int],
        provenance: dict,
        *,
        base_fingerprint: Optional[str] = None,
        rank: Optional[int] = None,
        alpha: Optional[float] = None,
        target_modules: Optional[list[str]] = None,
        name: str = GLOBAL,
    ) -> Adapter:
        """Records a new global version following `expected_parent_id` (None: the first one).

        Rank, alpha and target modules default to the folder's adapter_config.json, the base
        fingerprint to the parent's. Raises StaleVersion if another writer committed first.
        """
        check_adapter_files(Path(folder))
        config = _peft_config(Path(folder))
        artifact = self.artifacts.put_dir(Path(folder))
        with self.db.write() as s:
            parent = _latest(s, name)
            if (parent.id if parent else None) != expected_parent_id:
                raise StaleVersion(name, expected_parent_id, parent.id if parent else None)
            fingerprint = base_fingerprint or (parent.base_fingerprint if parent else None)
            if fingerprint is None:
                raise StoreError("the first global adapter needs base_fingerprint")
            row = Adapter(
                name=name, version=(parent.version + 1) if parent else 1, kind=AdapterKind.global_.value,
                base_fingerprint=fingerprint,
                rank=int(rank if rank is not None else config.get("r", parent.rank if parent else 0)),
                alpha=float(alpha if alpha is not None else config.get("lora_alpha", parent.alpha if parent else 0)),
                target_modules=list(target_modules or config.get("target_modules") or (parent.target_modules if parent else [])),
                provenance=dict(provenance), artifact_hash=artifact, parent_id=parent.id if parent else None,
            )
            s.add(row)
            try:
                s.flush()
            except IntegrityError:
                # Another process inserted the same version number between our read and write.
                raise StaleVersion(name, expected_parent_id, None) from None
        return row

    def rollback_global(self, to_version: int, name: str = GLOBAL) -> Adapter:
        """Makes version `to_version`'s weights current again, as a new version on top of history."""

        def commit() -> Adapter:
            with self.db.write() as s:
                target = s.exec(select(Adapter).where(Adapter.name == name, Adapter.version == to_version,
                                                      Adapter.kind == AdapterKind.global_.value)).first()
                if target is None:
                    raise NotFound(f"no version {to_version} of global adapter {name!r}")
                head = _latest(s, name)
                assert head is not None, "the target is a version of this global adapter"
                row = Adapter(
                    name=name, version=head.version + 1, kind=target.kind, base_fingerprint=target.base_fingerprint,
                    rank=target.rank, alpha=target.alpha, target_modules=list(target.target_modules),
                    provenance={"method": "rollback", "to_version": to_version, "adapter_id": target.id},
                    artifact_hash=target.artifact_hash, parent_id=head.id,
                )
                s.add(row)
            return row

        return retrying(commit)


def _latest(s, name: str) -> Optional[Adapter]:  # noqa: ANN001
    q = select(Adapter).where(Adapter.name == name, Adapter.kind == AdapterKind.global_.value).order_by(col(Adapter.version).desc())
    return s.exec(q).first()
