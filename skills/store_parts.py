"""What every part of Store works on: one database and one artifact folder."""
from __future__ import annotations

from skillgraft.skills.artifacts import ArtifactStore
from skillgraft.skills.db import Database


class StorePart:
    """Base of Store's parts (versions, adapters, runs, qd, maintenance); Store sets both."""

    db: Database
    artifacts: ArtifactStore
