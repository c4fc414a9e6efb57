"""Content-addressed artifact folder beside the database.

Every artifact is a small folder of files (an adapter, a skill's resources, a trajectory file),
named by the hash of its manifest: objects/ab/abcdef…/. A write goes to tmp/ first, every file
and folder is fsynced, then the folder is renamed into place and its parent fsynced. Rows that
name an artifact commit only after this returns, so a crash can leave an orphan (which `gc`
removes) but never a row pointing at a partial file. A partial write is named after the host
and process writing it; the next writer on that host removes those whose process is gone.

A file's executable bit is part of the content: it is kept in the artifact and enters the
manifest hash (files without it hash as they always did).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterable, Mapping

from skillgraft.skills.errors import ArtifactError
from skillgraft.skills.owner import pid_gone, this_process

CHUNK = 1 << 20
FileSource = Path | bytes | str


def _copy_file(src: BinaryIO, dst: BinaryIO, digest: "hashlib._Hash") -> None:
    while chunk := src.read(CHUNK):
        digest.update(chunk)
        dst.write(chunk)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_syncfs():
    """Linux's syncfs(2): flushes one filesystem; None where the C library lacks it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None

    def syncfs(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            if fn(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), str(path))
        finally:
            os.close(fd)

    return syncfs


_syncfs = _load_syncfs()


_EXECUTABLE = ":x"  # appended to an executable file's sha256 in the manifest


def _file_key(digest: str, executable: bool) -> str:
    return digest + _EXECUTABLE if executable else digest


def _is_executable(path: Path) -> bool:
    return bool(os.stat(path).st_mode & stat.S_IXUSR)


def _host_tag() -> str:
    return this_process()["host"].replace(".", "_")  # no dots: they separate the name's parts


def manifest_hash(file_hashes: Mapping[str, str]) -> str:
    """Hash of a folder: its sorted (relative path, file sha256) pairs."""
    digest = hashlib.sha256()
    for rel in sorted(file_hashes):
        digest.update(f"{rel}\0{file_hashes[rel]}\n".encode())
    return digest.hexdigest()


def _safe_rel(rel: str) -> str:
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ArtifactError(f"artifact file name {rel!r} must be a relative path inside the artifact")
    return pure.as_posix()


@dataclass(frozen=True)
class Leftover:
    path: Path
    age_s: float


class ArtifactStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.objects = self.root / "objects"
        self.tmp = self.root / "tmp"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self._swept = False

    def path(self, content_hash: str) -> Path:
        return self.objects / content_hash[:2] / content_hash

    def exists(self, content_hash: str) -> bool:
        return self.path(content_hash).is_dir()

    def put_dir(self, folder: Path) -> str:
        folder = Path(folder)
        if not folder.is_dir():
            raise ArtifactError(f"{folder} is not a folder")
        files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
        if not files:
            raise ArtifactError(f"{folder} holds no files")
        return self.put_files(files)

    def put_files(self, files: Mapping[str, FileSource]) -> str:
        """Writes the files as one artifact and returns its hash; an existing identical one is reused."""
        return self.put_many([files])[0]

    def put_many(self, items: list[Mapping[str, FileSource]]) -> list[str]:
        """Writes several artifacts behind one durability barrier.

        One artifact fsyncs each file and folder. Many at once stage everything, flush the whole
        filesystem with a single syncfs, then rename: thousands of fsyncs become one.
        """
        if not self._swept:
            self.sweep_dead_partials()
        batch_sync = len(items) > 1 and _syncfs is not None
        tag = f"{_host_tag()}.{os.getpid()}"
        stagings = [self.tmp / f"{tag}.{uuid.uuid4().hex}.partial" for _ in items]
        try:
            def stage(pair: tuple[Path, Mapping[str, FileSource]]) -> str:
                pair[0].mkdir()
                return self._stage(pair[0], pair[1], fsync=not batch_sync)

            if len(items) >= 32:
                # Mostly file-system calls, which release the GIL: threads overlap their waits.
                with ThreadPoolExecutor(max_workers=4) as pool:
                    hashes = list(pool.map(stage, zip(stagings, items)))
            else:
                hashes = [stage(pair) for pair in zip(stagings, items)]
            if batch_sync:
                _syncfs(self.tmp)
            shards: set[Path] = set()
            new_shard = False
            for staging, content_hash in zip(stagings, hashes):
                final = self.path(content_hash)
                if final.is_dir():
                    # Fresh mtime: gc's grace period must not reap an old orphan we are about to reference.
                    os.utime(final)
                    continue
                if not final.parent.is_dir():
                    final.parent.mkdir(exist_ok=True)
                    new_shard = True
                try:
                    os.rename(staging, final)
                except OSError:
                    if not final.is_dir():  # else another writer placed the same content first
                        raise
                shards.add(final.parent)
            if batch_sync:
                _syncfs(self.objects)  # the renames, in one flush rather than one per shard folder
            else:
                for shard in shards:
                    _fsync_dir(shard)
                if new_shard:
                    _fsync_dir(self.objects)
            return hashes
        finally:
            for staging in stagings:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)

    def sweep_dead_partials(self) -> list[Path]:
        """Removes partial writes left in tmp/ by processes of this host that are gone."""
        self._swept = True
        host = _host_tag()
        removed = []
        for path in self.tmp.glob(f"{host}.*.partial"):
            pid = path.name[len(host) + 1:].split(".", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and pid_gone(int(pid)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        return removed

    def _stage(self, staging: Path, files: Mapping[str, FileSource], fsync: bool) -> str:
        hashes: dict[str, str] = {}
        folders = {staging}
        for rel, source in files.items():
            rel = _safe_rel(rel)
            dest = staging / rel
            parts = rel.split("/")[:-1]
            if parts:
                dest.parent.mkdir(parents=True, exist_ok=True)
                folders.update(staging.joinpath(*parts[:k]) for k in range(1, len(parts) + 1))
            digest = hashlib.sha256()
            executable = isinstance(source, Path) and _is_executable(source)
            with open(dest, "wb") as out:
                if executable:
                    os.fchmod(out.fileno(), 0o755)
                if isinstance(source, Path):
                    with open(source, "rb") as src:
                        _copy_file(src, out, digest)
                else:
                    data = source.encode() if isinstance(source, str) else source
                    digest.update(data)
                    out.write(data)
                if fsync:
                    out.flush()
                    os.fsync(out.fileno())
            hashes[rel] = _file_key(digest.hexdigest(), executable)
        if fsync:
            for folder in sorted(folders, key=lambda p: -len(p.parts)):
                _fsync_dir(folder)
        return manifest_hash(hashes)

    def verify(self, content_hash: str) -> bool:
        """Re-hashes an artifact's files; False when any is missing or changed."""
        folder = self.path(content_hash)
        if not folder.is_dir():
            return False
        hashes = {}
        for p in folder.rglob("*"):
            if p.is_file():
                digest = hashlib.sha256()
                with open(p, "rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                hashes[p.relative_to(folder).as_posix()] = _file_key(digest.hexdigest(), _is_executable(p))
        return manifest_hash(hashes) == content_hash

    def hashes(self) -> set[str]:
        return {p.name for shard in self.objects.iterdir() if shard.is_dir() for p in shard.iterdir() if p.is_dir()}

    def leftovers(self) -> list[Leftover]:
        now = time.time()
        return [Leftover(p, now - p.stat().st_mtime) for p in sorted(self.tmp.iterdir())]

    def remove(self, content_hash: str) -> None:
        shutil.rmtree(self.path(content_hash), ignore_errors=True)

    def size(self, paths: Iterable[Path]) -> int:
        return sum(f.stat().st_size for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
