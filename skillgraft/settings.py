"""Where skillgraft keeps its state, and the defaults every command shares."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "skillworld"


@dataclass(frozen=True)
class Settings:
    home: Path
    store_url: str

    @property
    def artifacts(self) -> Path:
        return self.home / "artifacts"

    @property
    def trajectories(self) -> Path:
        return self.home / "trajectories"

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def cache(self) -> Path:
        return self.home / "cache"


def load_settings(home: str | Path | None = None, store: str | None = None) -> Settings:
    """--home / --store win over SKILLGRAFT_HOME / SKILLGRAFT_STORE, which win over defaults."""
    root = Path(home or os.environ.get("SKILLGRAFT_HOME") or Path.home() / ".skillgraft").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    url = store or os.environ.get("SKILLGRAFT_STORE") or f"sqlite:///{root / 'store.db'}"
    return Settings(home=root, store_url=url)
