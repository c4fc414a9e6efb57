"""Which stored adapters start a search: named by id, by the global adapter's history, by name or kind."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from skillgraft.skills.schema import Adapter, saved_id

if TYPE_CHECKING:
    from skillgraft.skills.store import Store


def select_checkpoints(store: Store, specs: Sequence[str] = ("global",)) -> list[int]:
    """Adapter ids for specs: an id, `global` (every global version), `global:NAME`, `name:NAME`, `kind:KIND`.

    Order follows the specs, then the store's version order; an adapter named twice counts once.
    """
    ids: list[int] = []
    for spec in specs or ("global",):
        spec = str(spec).strip()
        if spec.isdigit():
            store.adapter(int(spec))  # raises NotFound naming the id
            found = [int(spec)]
        elif spec == "global" or spec.startswith("global:"):
            found = [saved_id(a.id) for a in store.global_history(spec.partition(":")[2] or "global")]
        elif spec.startswith("name:"):
            found = [saved_id(a.id) for a in store.adapters(name=spec[5:])]
        elif spec.startswith("kind:"):
            found = [saved_id(a.id) for a in store.adapters(kind=spec[5:])]
        else:
            raise ValueError(f"population {spec!r}: use an adapter id, global, global:NAME, name:NAME or kind:KIND")
        if not found:
            raise ValueError(f"population {spec!r} matches no stored adapter")
        ids.extend(i for i in found if i not in ids)
    return ids


def add_checkpoint(store: Store, folder: Path, provenance: Mapping[str, Any], name: str) -> Adapter:
    """Registers an adapter folder (PEFT format) as a checkpoint CycleQD can start from."""
    from skillgraft.hypernet.peft_io import read_info

    info = read_info(folder)
    rank = info.rank or 1
    return store.add_adapter(Path(folder), "checkpoint", info.fingerprint or "unknown", rank, float(rank),
                             list(info.target_modules), dict(provenance), name=name)
