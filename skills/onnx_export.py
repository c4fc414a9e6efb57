"""The text encoder's transformer as an ONNX graph, exported once from the packaged weights.

Export needs torch and transformers; running the graph needs neither. The file is named after a
digest of the weights' folder (config, file sizes) and the exporter's settings, and written to a
temporary name first, so processes racing to export never read half a file.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

OPSET = 17
EXPORT_VERSION = 1  # bump when the export below changes what it writes


def encoder_digest(folder: Path) -> str:
    digest = hashlib.sha256(f"v{EXPORT_VERSION} opset{OPSET}\n".encode())
    digest.update((folder / "config.json").read_bytes())
    for name in sorted(os.listdir(folder)):
        if name.endswith((".safetensors", ".bin")):
            digest.update(f"{name} {(folder / name).stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def exported_encoder(folder: Path, cache: Path) -> Path:
    """The ONNX file for the transformer in `folder` (inputs input_ids and attention_mask, output
    last_hidden_state), exported into `cache` on first use."""
    folder = Path(folder)
    target = Path(cache) / f"{folder.name}-{encoder_digest(folder)}.onnx"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")
    try:
        _export(folder, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _export(folder: Path, dest: Path) -> None:
    import warnings

    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a weights bar on stderr would garble --json output
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):  # noqa: ANN001, ANN202
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    config = json.loads((folder / "config.json").read_text())
    sample = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(LastHidden(model), (sample * min(100, config.get("vocab_size", 100) - 1), sample), str(dest),
                          input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
                          opset_version=OPSET, dynamo=False)
