"""One string names a model: `hf:<folder>`, `replay:<file.json>`, a bundled pretrained base by its
short name (converted on first use, see bases.py), a folder name under the models directory (the
default SkillWorld model is found this way), or else a litellm model string."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from skillgraft.agent.models.base import Model, ModelError


def make_model(spec: str, *, models_dir: Path | None = None, temperature: float | None = None, **kwargs: Any) -> Model:
    """Builds the model a spec names; keyword arguments go to the backend's constructor.
    temperature (None: the backend's default) samples replies, of a local or a hosted model."""
    spec = spec.strip()
    if not spec:
        raise ModelError("empty model name")
    if temperature is not None and temperature < 0:
        raise ModelError(f"temperature must be 0 (greedy) or more, not {temperature}")
    local = kwargs if temperature is None else {**kwargs, "temperature": temperature}
    if spec.startswith("hf:"):
        from skillgraft.agent.models.hf_model import HFModel

        return HFModel(spec[3:], **local)
    if spec.startswith("replay:"):
        if temperature is not None:
            raise ModelError(f"{spec}: replayed replies are scripted; a temperature does not apply")
        from skillgraft.agent.models.replay_model import ReplayModel

        return ReplayModel.from_file(spec[len("replay:"):])
    from skillgraft.agent.models.bases import BASES, ensure_base

    if spec in BASES:
        if models_dir is None:
            raise ModelError(f"{spec} is converted into a models folder on first use; none was given")
        from skillgraft.agent.models.hf_model import HFModel

        return HFModel(ensure_base(spec, Path(models_dir)), **local)
    if models_dir is not None and "/" not in spec and (Path(models_dir) / spec / "config.json").is_file():
        from skillgraft.agent.models.hf_model import HFModel

        return HFModel(Path(models_dir) / spec, **local)
    if temperature is not None:
        kwargs["model_kwargs"] = {**kwargs.get("model_kwargs", {}), "temperature": temperature}
    from skillgraft.agent.models.litellm_model import LitellmModel

    try:
        return LitellmModel(spec, **kwargs)
    except ModelError as exc:
        where = f", no model folder {Path(models_dir) / spec}" if models_dir is not None else ""
        raise ModelError(f"unknown model {spec!r}: not hf:<folder> or replay:<file>{where}, and {exc}") from exc
