"""Adapters sent to workers by content: put into the cluster's object store once per content
hash by the driver, fetched by a worker only when its own cache lacks that hash."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def folder_files(folder: Path) -> dict[str, bytes]:
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def files_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()


class AdapterShipper:
    """Driver side: one object-store entry per adapter content, however many episodes use it."""

    def __init__(self) -> None:
        self.refs: dict[str, Any] = {}

    def ship(self, folder: Path) -> tuple[str, list[Any]]:
        """(content hash, [object ref]) for a folder; the ref sits in a list so that Ray hands it to
        the worker unresolved and the bytes move only where the hash is not cached yet."""
        import ray

        files = folder_files(folder)
        digest = files_digest(files)
        if digest not in self.refs:
            self.refs[digest] = ray.put(files)
        return digest, [self.refs[digest]]


class AdapterCache:
    """Worker side: adapters by content hash in a folder of this node."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.fetched: list[str] = []  # the hashes that came over the network rather than from the cache

    def folder(self, digest: str, ref: list[Any]) -> Path:
        import ray

        target = self.root / digest
        if target.is_dir():
            return target
        files: dict[str, bytes] = ray.get(ref[0])
        if files_digest(files) != digest:
            raise ValueError(f"adapter {digest[:12]} arrived with other content")
        self.fetched.append(digest)
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}.", dir=self.root))
        try:
            for name, data in files.items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(data)
            os.replace(staging, target)  # whole or not at all: another worker may be writing the same
        except OSError:
            if not target.is_dir():
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target
