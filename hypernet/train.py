"""Training the hypernetwork against a frozen base model.

    train_stage1(base, skills, out_dir, cfg)        skill reconstruction on a skill library
    train_stage2(base, trajectories, out_dir, cfg)  skill exploitation on agent trajectories

`base` is a model folder or a (model, tokenizer) pair. The base stays frozen; the generated
adapters are applied through forward hooks, so gradients reach only the hypernetwork. Each run
holds out part of its data, checkpoints into `out_dir` (resuming from there when asked), and
ends with the four-way evaluation of `hypernet.evaluate`.
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from skillgraft.hypernet.checkpoint import CheckpointMeta, TRAIN_STATE, checkpoint_id, load_checkpoint, load_train_state, save_checkpoint
from skillgraft.hypernet.lexicon import encoder_for
from skillgraft.hypernet.evaluate import batch_loss, evaluate
from skillgraft.hypernet.hypernetwork import HypernetConfig, Hypernetwork, delta_sq_norm
from skillgraft.hypernet.objectives import (
    OBJECTIVES,
    Example,
    Trajectory,
    read_trajectory,
    sample_objective,
    stage1_example,
    stage2_example,
)
from skillgraft.hypernet.peft_io import BaseMismatchError, model_fingerprint
from skillgraft.hypernet.precision import bf16_autocast
from skillgraft.hypernet.targets import find_targets


@dataclass
class TrainConfig:
    steps: int = 1000
    batch_size: int = 8
    lr: float = 1e-3
    weight_decay: float = 0.01
    l2: float = 1e-4  # weight of the mean ‖ΔW‖²_F penalty on generated adapters
    grad_clip: float = 1.0
    max_len: int = 512
    ratios: tuple[float, float, float] = (0.4, 0.3, 0.3)  # full, prefix, section (stage 1)
    heldout: float = 0.1
    save_every: int = 100
    eval_examples: int = 64
    seed: int = 0
    resume: bool = True
    init_from: str | None = None  # a checkpoint to start from (stage 2 usually starts from stage 1)
    progress: bool = True
    device: str = "cpu"
    bf16: bool = False  # forward and backward in bfloat16 autocast where native (weights and optimiser stay float32)
    hypernet: HypernetConfig = field(default_factory=HypernetConfig)


@dataclass
class TrainResult:
    out_dir: Path
    checkpoint_id: str
    steps: int
    train_loss: list[float]
    evaluation: dict[str, float]
    heldout_size: int


def load_base(base: Any, device: str = "cpu") -> tuple[torch.nn.Module, Any, str]:
    """(frozen model, tokenizer, name) from a model folder or a (model, tokenizer) pair."""
    if isinstance(base, (str, Path)):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(base))
        name = str(base)
    else:
        model, tokenizer = base
        name = getattr(model.config, "_name_or_path", "") or model.config.model_type
    model = model.to(device).eval()
    model.requires_grad_(False)
    return model, tokenizer, name


def split_heldout(keys: Sequence[str], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices (train, held-out), decided by a hash of each item so a resumed run splits alike."""
    if fraction <= 0 or len(keys) < 2:
        return list(range(len(keys))), []
    ranked = sorted(range(len(keys)), key=lambda i: hashlib.sha256(f"{seed}:{keys[i]}".encode()).hexdigest())
    n_held = min(len(keys) - 1, max(1, round(fraction * len(keys))))
    held = sorted(ranked[:n_held])
    return [i for i in range(len(keys)) if i not in set(held)], held


def _pad_id(tokenizer) -> int:
    for tok in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if tok is not None:
            return tok
    return 0


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(), disable=not enabled,
    )


def _run(
    stage: int,
    model: torch.nn.Module,
    tokenizer: Any,
    base_name: str,
    texts: list[str],
    make_example: Callable[[int, random.Random], Example],
    train_ids: list[int],
    eval_examples: list[Example],
    out_dir: Path,
    cfg: TrainConfig,
    data_info: dict,
) -> TrainResult:
    device = torch.device(cfg.device)
    fingerprint = model_fingerprint(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = load_train_state(out_dir) if cfg.resume else None

    if state is not None:
        net, meta = load_checkpoint(out_dir, device)
    elif cfg.init_from:
        net, meta = load_checkpoint(cfg.init_from, device)
    else:
        hcfg = cfg.hypernet
        if hcfg.encoder == "base-hidden":
            hcfg = HypernetConfig(**{**asdict(hcfg), "encoder_dim": int(model.config.hidden_size)})
        torch.manual_seed(cfg.seed)
        spec = find_targets(model, hcfg.target_modules)
        meta = CheckpointMeta(hcfg, spec, base_name, fingerprint)
        net = Hypernetwork(hcfg, spec).to(device)
    if meta.fingerprint != fingerprint:
        raise BaseMismatchError(
            f"the hypernetwork was built for base fingerprint {meta.fingerprint}, this base is {fingerprint}"
        )
    encoder = encoder_for(meta.config, model, tokenizer)
    encoded = encoder.encode(texts)  # frozen encoder: every skill is embedded once, up front
    pad_id = _pad_id(tokenizer)

    net.train()
    optim = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step, history = 0, []
    rng = random.Random(cfg.seed)
    if state is not None:
        optim.load_state_dict(state["optimizer"])
        step, history = state["step"], state["history"]
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])

    def save() -> str:
        meta.training = {"stage": stage, "steps": step, "train_config": {**asdict(cfg), "hypernet": None}, **data_info}
        return save_checkpoint(net, meta, out_dir, {
            "optimizer": optim.state_dict(), "step": step, "history": history,
            "rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
        })

    with _progress(cfg.progress) as bar:
        task = bar.add_task(f"stage {stage}", total=cfg.steps, completed=step, loss="-")
        while step < cfg.steps:
            batch = [make_example(rng.choice(train_ids), rng) for _ in range(cfg.batch_size)]
            with bf16_autocast(device, cfg.bf16):
                loss_sum, n, factors = batch_loss(model, net, encoded, batch, pad_id)
            assert factors is not None  # a hypernetwork is given, so the batch made factors
            lm_loss = loss_sum.float() / max(n, 1)
            penalty = delta_sq_norm({k: (A.float(), B.float()) for k, (A, B) in factors.items()}).mean()
            loss = lm_loss + cfg.l2 * penalty
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
            optim.step()
            step += 1
            history.append(float(lm_loss.detach()))
            bar.update(task, advance=1, loss=f"{history[-1]:.3f}")
            if cfg.save_every and step % cfg.save_every == 0 and step < cfg.steps:
                save()

    evaluation = evaluate(model, net, encoded, eval_examples, pad_id) if eval_examples else {}
    data_info["heldout_eval"] = evaluation
    ckpt = save()
    return TrainResult(out_dir, ckpt, step, history, evaluation, len(eval_examples))


def train_stage1(
    base: Any, skills: Sequence[str], out_dir: str | Path, cfg: TrainConfig | None = None
) -> TrainResult:
    """Skill-reconstruction pretraining on skill texts (whole SKILL.md files or bodies).

    Objectives are mixed by `cfg.ratios` (full, prefix, section); the held-out skills are
    evaluated on full reconstruction.
    """
    cfg = cfg or TrainConfig()
    texts = [s for s in skills if s.strip()]
    if len(texts) < 1:
        raise ValueError("stage 1 needs at least one non-empty skill text")
    model, tokenizer, name = load_base(base, cfg.device)
    train_ids, held = split_heldout(texts, cfg.heldout, cfg.seed)

    def make(i: int, rng: random.Random) -> Example:
        return stage1_example(i, texts[i], sample_objective(cfg.ratios, rng), tokenizer, cfg.max_len, rng)

    eval_rng = random.Random(cfg.seed + 1)
    evals = [stage1_example(i, texts[i], "full", tokenizer, cfg.max_len, eval_rng) for i in held[: cfg.eval_examples]]
    info = {"skills": len(texts), "train_skills": len(train_ids), "heldout_skills": len(held), "objectives": dict(zip(OBJECTIVES, cfg.ratios))}
    return _run(1, model, tokenizer, name, texts, make, train_ids, evals, Path(out_dir), cfg, info)


def train_stage2(
    base: Any, trajectories: Sequence[str | Path | dict], out_dir: str | Path, cfg: TrainConfig | None = None
) -> TrainResult:
    """Skill-exploitation fine-tuning on trajectories that used skills.

    Each trajectory is {"messages": [...], "info": {"skills": [{"name", "text"}, ...]}}; the
    adapters of its skills (rank-concatenated when several) are applied and the skill text is
    removed from the context. Trajectories without skills are skipped.
    """
    cfg = cfg or TrainConfig()
    trajs: list[Trajectory] = [t for t in (read_trajectory(s) for s in trajectories) if t.skills]
    if not trajs:
        raise ValueError("none of the trajectories records a skill text in info['skills'][i]['text']")
    model, tokenizer, name = load_base(base, cfg.device)
    texts: list[str] = []
    index: dict[str, int] = {}
    for t in trajs:
        for _, text in t.skills:
            index.setdefault(text, len(texts))
            if index[text] == len(texts):
                texts.append(text)
    examples = [stage2_example([index[text] for _, text in t.skills], t, tokenizer, cfg.max_len) for t in trajs]
    keys = [f"{t.source}:{i}" for i, t in enumerate(trajs)]
    train_ids, held = split_heldout(keys, cfg.heldout, cfg.seed)
    evals = [examples[i] for i in held[: cfg.eval_examples]]
    info = {"trajectories": len(trajs), "train_trajectories": len(train_ids), "heldout_trajectories": len(held), "skills": len(texts)}
    return _run(2, model, tokenizer, name, texts, lambda i, rng: examples[i], train_ids, evals, Path(out_dir), cfg, info)


__all__ = ["TrainConfig", "TrainResult", "train_stage1", "train_stage2", "load_base", "split_heldout", "TRAIN_STATE", "checkpoint_id"]
