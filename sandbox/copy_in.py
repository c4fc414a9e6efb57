"""The tar stream that copies a repository into a container, owned by the agent user."""
from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Mapping

SPOOL_BYTES = 64 * 2**20  # small repositories stay in memory; big ones spill to a temporary file


def repo_tarball(repo: Path, arcname: str, uid: int, root_files: Mapping[str, bytes] = {}) -> IO[bytes]:
    """A tar of repo under arcname with every entry owned by uid, rewound and ready to send.

    Ownership is set in the archive itself because the engine extracts as root: files arrive
    belonging to the agent without a chown pass inside the container. root_files (path -> bytes)
    go in the same archive owned by root and read-only to others, so one copy sets up everything.
    """

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
            return None  # sockets and fifos from a developer's checkout mean nothing in the copy
        info.uid = info.gid = uid
        if info.name == arcname:
            # The command server (root without DAC capabilities) must be able to enter it.
            info.mode |= 0o755
        info.uname = info.gname = "agent"
        return info

    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(repo), arcname=arcname, recursive=True, filter=owned)
        for path, data in root_files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    spool.seek(0)
    return spool
