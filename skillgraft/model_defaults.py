"""The bundled defaults: the model a command runs when none is named, and its hypernetwork.

The default model ("skillworld") is SmolLM2-135M-Instruct, converted from its package on first
use, with the shipped SkillWorld policy adapter merged in; its hypernetwork ships beside it.
Nothing is downloaded and nothing is trained on first use.
"""
from __future__ import annotations

from pathlib import Path

from skillgraft.settings import DEFAULT_MODEL, Settings


def load_model(settings: Settings, spec: str | None, *, progress: bool = True, temperature: float | None = None):
    """The model a spec names (default: the bundled SkillWorld model, assembled on first use);
    temperature > 0 samples its replies (None: greedy, or a hosted model's own default)."""
    from skillgraft.agent.models.factory import make_model

    spec = spec or DEFAULT_MODEL
    if spec == DEFAULT_MODEL:
        from skillgraft.skillworld.default_model import ensure_policy

        ensure_policy(settings.models, show_progress=progress)
    return make_model(spec, models_dir=settings.models, temperature=temperature)


def hypernet_for(settings: Settings, spec: str | None, given: Path | None = None, *, progress: bool = True) -> Path | None:
    """The hypernetwork checkpoint that compiles skills for this model, or None when there is none.

    An explicit checkpoint wins; the bundled model gets its own (shipped); any other model gets
    HOME/models/hypernet when `skillgraft hypernet train` has written one there.
    """
    if given is not None:
        if not Path(given).exists():
            raise FileNotFoundError(f"hypernetwork checkpoint {given} does not exist")
        return Path(given)
    if (spec or DEFAULT_MODEL) == DEFAULT_MODEL:
        from skillgraft.skillworld.default_model import ensure_hypernet

        return ensure_hypernet(settings.models, show_progress=progress)
    path = settings.models / "hypernet"
    return path if (path / "hypernet.json").is_file() else None
