"""`skillgraft hypernet …` and `skillgraft compile`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from skillgraft.commands.common import HomeOption, JsonOption, StoreOption, console, fail, settings_from

app = typer.Typer(help="Train and inspect the hypernetwork that compiles skill text into LoRA adapters.", no_args_is_help=True)


def _default_checkpoint(home: Optional[str], store: Optional[str]) -> Path:
    return settings_from(home, store).models / "hypernet"


def _model_dir(base: str) -> str:
    return base[3:] if base.startswith("hf:") else base


def _files(paths: list[Path], pattern: str) -> list[Path]:
    """Files named directly, or found under folders by `pattern` (SKILL.md, *.json)."""
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(p.rglob(pattern))
        elif p.is_file():
            found.append(p)
        else:
            raise fail(f"no such file or folder: {p}", code=2)
    return found


@app.command()
def train(
    stage: Optional[int] = typer.Option(None, "--stage", min=1, max=2, help="1: skill reconstruction on skill texts; 2: skill exploitation on trajectories."),
    base: Optional[str] = typer.Option(None, "--base", help="Folder of the frozen base model (transformers format; `hf:` prefix allowed)."),
    recipe: Optional[str] = typer.Option(None, "--recipe", help="Train a bundled recipe end to end instead: `skillworld` rebuilds the default model's hypernetwork (both stages, fixed seed) into HOME/models/skillworld-hypernet, or --out."),
    skills: list[Path] = typer.Option([], "--skills", help="SKILL.md files or folders holding them (stage 1)."),
    trajectories: list[Path] = typer.Option([], "--trajectories", help="Trajectory JSON files or folders (stage 2); skill text is read from info.skills[i].text."),
    out: Optional[Path] = typer.Option(None, "--out", help="Checkpoint folder (default: <home>/models/hypernet). Training resumes from it."),
    init_from: Optional[Path] = typer.Option(None, "--init-from", help="Checkpoint to start from (stage 2 usually starts from stage 1)."),
    steps: int = typer.Option(1000, "--steps", min=1, help="Optimizer steps in total (a resumed run continues to this count)."),
    batch_size: int = typer.Option(8, "--batch-size", min=1),
    lr: float = typer.Option(1e-3, "--lr"),
    max_len: int = typer.Option(512, "--max-len", min=16, help="Tokens per example."),
    rank: int = typer.Option(8, "--rank", min=1, help="LoRA rank of generated adapters."),
    targets: str = typer.Option("q_proj,v_proj", "--targets", help="Comma-separated module names to adapt."),
    encoder: str = typer.Option("minilm", "--encoder", help="Skill text encoder: minilm or base-hidden."),
    ratios: str = typer.Option("0.4,0.3,0.3", "--ratios", help="Stage-1 mix of full, prefix and section objectives."),
    heldout: float = typer.Option(0.1, "--heldout", min=0.0, max=0.9, help="Fraction held out for the final evaluation."),
    l2: float = typer.Option(1e-4, "--l2", help="Weight of the L2 penalty on generated ΔW."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore saved training state in --out and start over."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Train the hypernetwork against a frozen base model and report held-out losses."""
    from skillgraft.hypernet.hypernetwork import HypernetConfig
    from skillgraft.hypernet.train import TrainConfig, train_stage1, train_stage2

    if recipe is not None:
        return _train_recipe(recipe, out, home, store)
    if stage is None or base is None:
        raise fail("give --stage and --base (or --recipe skillworld for the default model's hypernetwork)", code=2)
    model_dir = Path(_model_dir(base))
    if not (model_dir / "config.json").is_file():
        raise fail(f"{model_dir} is not a model folder (no config.json)", code=2)
    try:
        mix = tuple(float(x) for x in ratios.split(","))
        assert len(mix) == 3 and min(mix) >= 0 and sum(mix) > 0
    except (ValueError, AssertionError):
        raise fail("--ratios takes three non-negative numbers: full,prefix,section", code=2) from None
    hcfg = HypernetConfig(encoder=encoder, rank=rank, target_modules=tuple(t.strip() for t in targets.split(",") if t.strip()))
    out_dir = out or _default_checkpoint(home, store)
    cfg = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, max_len=max_len, ratios=mix, heldout=heldout, l2=l2,
                      resume=not fresh, init_from=str(init_from) if init_from else None, progress=not as_json, hypernet=hcfg)
    try:
        if stage == 1:
            files = _files(skills, "SKILL.md")
            if not files:
                raise fail("stage 1 needs --skills (SKILL.md files or folders)", code=2)
            result = train_stage1(model_dir, [f.read_text() for f in files], out_dir, cfg)
        else:
            files = _files(trajectories, "*.json")
            if not files:
                raise fail("stage 2 needs --trajectories (JSON files or folders)", code=2)
            result = train_stage2(model_dir, files, out_dir, cfg)
    except (ValueError, FileNotFoundError) as exc:
        raise fail(str(exc), code=2) from exc
    summary = {"checkpoint": str(result.out_dir), "checkpoint_id": result.checkpoint_id, "steps": result.steps,
               "heldout": result.heldout_size, "heldout_loss": result.evaluation,
               "final_train_loss": result.train_loss[-1] if result.train_loss else None}
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    console.print(f"checkpoint [bold]{result.checkpoint_id}[/] in {result.out_dir} after {result.steps} steps")
    if result.evaluation:
        table = Table(title=f"held-out loss ({result.heldout_size} examples)")
        for cond in result.evaluation:
            table.add_column(cond, justify="right")
        table.add_row(*(f"{v:.3f}" for v in result.evaluation.values()))
        console.print(table)


def _train_recipe(recipe: str, out: Optional[Path], home: Optional[str], store: Optional[str]) -> None:
    if recipe != "skillworld":
        raise fail(f"unknown recipe {recipe!r}; the bundled one is skillworld", code=2)
    from skillgraft.skillworld.default_model import train_hypernet
    from skillgraft.skillworld.skill_texts import UnpinnedRunError

    try:
        done = train_hypernet(settings_from(home, store).models, out)
    except UnpinnedRunError as exc:
        raise fail(str(exc), code=2) from exc
    meta = json.loads((done / "hypernet.json").read_text())
    console.print(f"hypernetwork at {done}; held-out stage-2 loss: "
                  + ", ".join(f"{k} {v:.3f}" for k, v in meta.get("training", {}).get("heldout_eval", {}).items()))


@app.command()
def info(
    checkpoint: Path = typer.Argument(..., help="Hypernetwork checkpoint folder."),
    as_json: bool = JsonOption,
) -> None:
    """Show what a hypernetwork checkpoint was trained for and how it did."""
    from skillgraft.hypernet.checkpoint import checkpoint_id, load_checkpoint

    try:
        net, meta = load_checkpoint(checkpoint)
    except FileNotFoundError as exc:
        raise fail(str(exc), code=2) from exc
    params = sum(p.numel() for p in net.parameters())
    data = {
        "checkpoint_id": checkpoint_id(checkpoint),
        "base_model": meta.base_model_name,
        "base_fingerprint": meta.fingerprint,
        "encoder": meta.config.encoder,
        "rank": meta.config.rank,
        "target_modules": list(meta.config.target_modules),
        "adapted_modules": len(meta.spec.modules),
        "layers": meta.spec.n_layers,
        "parameters": params,
        "stage": meta.training.get("stage"),
        "steps": meta.training.get("steps"),
        "heldout_loss": meta.training.get("heldout_eval"),
    }
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(show_header=False)
    for key, value in data.items():
        table.add_row(key, json.dumps(value) if isinstance(value, (dict, list)) else str(value))
    console.print(table)


def _read_skill_path(path: Path) -> tuple[str, str]:
    file = path / "SKILL.md" if path.is_dir() else path
    if not file.is_file():
        raise fail(f"{path} holds no SKILL.md", code=2)
    name = file.parent.name if file.name == "SKILL.md" else file.stem
    return name, file.read_text()


def compile_skill(
    skill: str = typer.Argument(..., help="A SKILL.md file, a skill folder, or the name of a skill in the store."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder to write the PEFT adapter to (default ./<skill>-adapter for files; the store's cache for store skills)."),
    base: Optional[str] = typer.Option(None, "--base", help="Base model folder (default: the one the checkpoint was trained for)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Hypernetwork checkpoint (default: <home>/models/hypernet)."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Compile a skill's text into a LoRA adapter (PEFT folder) in one hypernetwork pass.

    Store skills are compiled once per (skill version, hypernetwork checkpoint) and cached.
    """
    from skillgraft.hypernet.checkpoint import read_meta
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.peft_io import BaseMismatchError

    ckpt = checkpoint or _default_checkpoint(home, store)
    try:
        meta = read_meta(ckpt)
    except FileNotFoundError:
        raise fail(f"no hypernetwork checkpoint at {ckpt}; train one with `skillgraft hypernet train` or pass --checkpoint", code=2) from None
    base_dir = _model_dir(base) if base else meta.base_model_name
    if not base_dir or not (Path(base_dir) / "config.json").is_file():
        raise fail(f"base model folder {base_dir!r} not found; pass --base", code=2)
    try:
        compiler = Compiler.load(ckpt, base_dir, base_model_name=base_dir)
    except BaseMismatchError as exc:
        raise fail(str(exc), code=3) from exc

    path = Path(skill)
    result: dict = {"checkpoint_id": compiler.checkpoint_id}
    if path.exists():
        name, text = _read_skill_path(path)
        target = out or Path(f"{name}-adapter")
        compiler.compile_to_dir(text, target, metadata={"skill": name, "source": str(path)})
        result |= {"skill": name, "adapter": str(target), "cached": False}
    else:
        from skillgraft.agent.skill_adapters import compiled_adapter
        from skillgraft.commands.store import open_store
        from skillgraft.skills.schema import saved_id

        st = open_store(home, store)
        version = st.latest_version(skill)
        if version is None:
            raise fail(f"{skill!r} is neither a file nor a skill in the store", code=2)
        hit = st.find_compiled(saved_id(version.id), compiler.checkpoint_id)
        cached = hit is not None
        hit = hit or compiled_adapter(st, compiler, version)
        folder = st.adapter_path(hit.id)
        if out:
            shutil.copytree(folder, out, dirs_exist_ok=True)
            folder = out
        result |= {"skill": version.skill_name, "version": version.number, "adapter_id": hit.id, "adapter": str(folder), "cached": cached}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        note = " (cached)" if result["cached"] else ""
        console.print(f"compiled [bold]{result['skill']}[/] → {result['adapter']}{note}")


def register_compile(root: typer.Typer) -> None:
    """Adds `skillgraft compile` to the root app."""
    root.command("compile")(compile_skill)
