"""Fixtures shared by the store tests: a store on SQLite and, where a server can run, on PostgreSQL."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from pg_server import pg_url, postgres_server  # noqa: F401  (fixtures, re-exported)
from skillgraft.skills import Store

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_url(request, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Iterator[Store]:
    st = Store(store_url, tmp_path / "artifacts")
    yield st
    st.close()


def write_skill(root: Path, name: str, description: str, body: str, files: dict[str, str] | None = None,
                extra: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_bytes(f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}".encode())
    for rel, content in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(content)
    return folder


def lora_folder(folder: Path, seed: int, rank: int = 4, width: int = 16, modules: tuple[str, ...] = ("q_proj", "v_proj"),
                **config: object) -> Path:
    """A whole PEFT LoRA folder with random factors: what the store accepts as an adapter."""
    import json

    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for module in modules:
        stem = f"base_model.model.model.layers.0.self_attn.{module}"
        tensors[f"{stem}.lora_A.weight"] = torch.randn(rank, width, generator=g)
        tensors[f"{stem}.lora_B.weight"] = torch.randn(width, rank, generator=g)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "lora_alpha": 2 * rank, "target_modules": list(modules),
                                                            "peft_type": "LORA", **config}))
    return folder
