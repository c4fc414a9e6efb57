"""The default model, "skillworld": SmolLM2-135M-Instruct with the SkillWorld policy adapter merged
into its weights, and the hypernetwork that compiles skills for it, with its command memory.

Both artifacts ship in the package (skillworld/shipped/), small, with the recipe digest and the
base they were trained for; on first use the base is converted from its GGUF package and the
policy merged into it, which takes seconds. `skillgraft world train-policy` and
`skillgraft hypernet train --recipe skillworld` rebuild them from nothing with a fixed seed;
what they write under the models folder is preferred to the shipped copy. An artifact whose
recipe or base no longer matches is refused with the command that rebuilds it.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from skillgraft.agent.models.base import ModelError
from skillgraft.agent.models.bases import ensure_base, file_digest, read_manifest
from skillgraft.skillworld.recipe import BASE, EPISODE_SETS, POLICY, SKILL_SHARE, EpisodeSet, families_of, policy_digest, world_digest

POLICY_NAME = "skillworld"  # the model name, and its folder under the models folder
SHIPPED = Path(__file__).with_name("shipped")
POLICY_ADAPTER = "skillworld-policy"  # a policy adapter trained here, preferred to the shipped one
REBUILD_POLICY = "skillgraft world train-policy"
REBUILD_HYPERNET = "skillgraft hypernet train --recipe skillworld"
MERGED = "policy.json"  # in the merged model folder: which adapter it holds


class StaleArtifactError(ModelError):
    """A shipped or trained artifact does not match the current recipe or base."""


def weights_digest(folder: Path, filename: str) -> str:
    return file_digest(Path(folder) / filename)[:len("sha256:") + 24]


# ---------------------------------------------------------------- training data


def episode_cache(models_dir: Path, name: str) -> Path:
    """A cache of expert episodes under the models folder, keyed by the world's content."""
    return Path(models_dir) / "skillworld-episodes" / f"{name}-{world_digest()}.jsonl"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def build_set(models_dir: Path, episode_set: EpisodeSet,
              progress: Callable[[int, int], None] | None = None) -> list[dict]:
    from skillgraft.skillworld.dataset import build_episodes

    return build_episodes(families_of(episode_set), episode_set.per_family,
                          episode_cache(models_dir, _slug(episode_set.label)), first_seed=episode_set.first_seed,
                          mistake=episode_set.mistake, progress=progress)


def training_records(models_dir: Path, *, show_progress: bool = True) -> list[dict]:
    """The expert's successful episodes of every set of the recipe (made once, then cached)."""
    from rich.progress import Progress

    records: list[dict] = []
    with Progress(disable=not show_progress) as bar:
        for episode_set in EPISODE_SETS:
            task = bar.add_task(f"expert episodes: {episode_set.label}", total=None)
            records += build_set(models_dir, episode_set,
                                 lambda done, total, task=task: bar.update(task, completed=done, total=total))
    return records


def training_conversations(records: list[dict]) -> list[list[dict]]:
    from skillgraft.skillworld.policy.data import conversations

    return conversations(records, seed=POLICY.seed, skill_share=SKILL_SHARE)


# ---------------------------------------------------------------- the policy


def train_policy(models_dir: Path, out: Path | None = None, *, show_progress: bool = True) -> dict:
    """Trains the policy adapter by the recipe into out (default: the models folder's own
    copy, which is then preferred to the shipped one); returns the training report."""
    from skillgraft.skillworld.policy.lora_policy import train_lora_policy

    base = ensure_base(BASE, models_dir)
    manifest = read_manifest(base) or {}
    records = training_records(models_dir, show_progress=show_progress)
    target = Path(out) if out else Path(models_dir) / POLICY_ADAPTER
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    metadata = {"recipe": policy_digest(), "base": BASE, "base_gguf": manifest.get("gguf_digest"),
                "episodes": len(records), "rebuild": REBUILD_POLICY}
    report = train_lora_policy(base, training_conversations(records), staging, POLICY, base_name=BASE,
                               metadata=metadata, show_progress=show_progress)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return report


def check_artifact(folder: Path, recipe: str, base_manifest: dict, rebuild: str, what: str,
                   meta_name: str = "skillgraft.json") -> dict:
    """The artifact's metadata, or StaleArtifactError when it was made under another recipe or base."""
    meta_file = folder / meta_name
    if not meta_file.is_file():
        raise StaleArtifactError(f"the {what} at {folder} is missing or incomplete; rebuild it with `{rebuild}`")
    meta = json.loads(meta_file.read_text())
    meta = meta.get("metadata", meta)
    if meta.get("recipe") != recipe:
        raise StaleArtifactError(
            f"the {what} at {folder} was trained under recipe {meta.get('recipe')}, but the current code's recipe is "
            f"{recipe}: what its training would see has changed (the world's tasks, the expert's steps, the skills, "
            f"the training configuration, the policy it builds on; a hypernetwork's pinned recipes and paraphrases). Rebuild it with `{rebuild}`.")
    if meta.get("base_gguf") != base_manifest.get("gguf_digest"):
        raise StaleArtifactError(
            f"the {what} at {folder} was trained on base weights {meta.get('base_gguf')}, but {BASE} here is "
            f"{base_manifest.get('gguf_digest')}. Rebuild it with `{rebuild}`.")
    return meta


def policy_adapter(models_dir: Path) -> Path:
    """The policy adapter to use: one trained under the models folder, else the shipped one;
    StaleArtifactError when it does not match the current recipe and base."""
    base = ensure_base(BASE, models_dir)
    own = Path(models_dir) / POLICY_ADAPTER
    folder = own if (own / "skillgraft.json").is_file() else SHIPPED / "policy"
    check_artifact(folder, policy_digest(), read_manifest(base) or {}, REBUILD_POLICY, "SkillWorld policy adapter")
    return folder


def ensure_policy(models_dir: Path, *, show_progress: bool = True) -> Path:
    """The folder of the default model: the base with the policy adapter merged into its weights
    (made in seconds on first use, and again whenever the adapter changes)."""
    adapter = policy_adapter(models_dir)
    digest = weights_digest(adapter, "adapter_model.safetensors")
    out = Path(models_dir) / POLICY_NAME
    marker = out / MERGED
    if marker.is_file() and json.loads(marker.read_text()).get("adapter") == digest and (out / "config.json").is_file():
        return out
    if show_progress:
        from rich.console import Console

        Console(stderr=True).print(f"[bold]{POLICY_NAME}[/]: merging the policy adapter into {BASE} (once)")
    staging = Path(tempfile.mkdtemp(prefix=f".{POLICY_NAME}.", dir=Path(models_dir)))
    try:
        merge_adapter(ensure_base(BASE, models_dir), adapter, staging)
        (staging / MERGED).write_text(json.dumps({"adapter": digest, "from": str(adapter), "base": BASE}, indent=1))
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)  # a half-written model must never pass for a finished one
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def merge_adapter(base_dir: Path, adapter_dir: Path, out: Path) -> Path:
    """Saves base + adapter as one plain model folder (PEFT's merge)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out)
    return out


# ---------------------------------------------------------------- the hypernetwork


HYPERNET_DIR = "skillworld-hypernet"  # a hypernetwork trained here, preferred to the shipped one
HYPERNET_RECIPE = "recipe.json"  # beside hypernet.json: the recipe digest and the policy it was trained for


def hypernet_texts(records: list[dict], seed: int = 0) -> list[str]:
    """Stage 1's texts: every skill the world has, a paraphrase of each shipped one, and the pinned
    recipe induced from one run of every family in the records."""
    from skillgraft.skillworld import library
    from skillgraft.skillworld.skill_texts import first_clean_runs, made_texts, pinned_recipes

    texts = [s.body for s in library.every_skill()] + made_texts(first_clean_runs(records), pinned_recipes(), seed)
    return list(dict.fromkeys(texts))


def hypernet_trajectories(records: list[dict], seed: int = 0, edit_weight: float = 1.0) -> list[dict]:
    """Stage 2's trajectories: each of the expert's clean runs with one form of its family's skill
    (shipped, paraphrased or induced, in turn) to compile, and the replies the policy gives with
    no skill in context as the target: a seen family's own fix (the adapter must not disturb
    it), a drill's edit (the adapter must carry it, as a skill-only family's will have to)."""
    import random

    from skillgraft.skillworld.dataset import record_steps
    from skillgraft.skillworld.expert import messages
    from skillgraft.skillworld.skill_texts import forms_for, pinned_recipes

    recipes = pinned_recipes()
    rng = random.Random(seed)
    clean = [r for r in records if not r.get("mistake")]
    donors: dict[str, list[dict]] = {}
    for r in clean:
        donors.setdefault(r["family"], []).append(r)
    out = []
    for i, record in enumerate(clean):
        form, text = forms_for(record, rng, donors, recipes)[i % 3]
        conversation = messages(record_steps(record))
        for m in conversation:  # the edit is what a skill changes: it weighs most in the loss
            if m["role"] == "assistant" and "sed -i" in m["content"]:
                m["weight"] = edit_weight
        out.append({"messages": conversation,
                    "info": {"skills": [{"name": f"{record['family']}-{form}", "text": text}], "task": record["id"]}})
    return out


def write_memory(folder: Path, policy: Path) -> Path:
    """Gives the hypernetwork in `folder` its command memory (hypernet.memory) as the recipe sets
    it, with moments read off the expert's runs of the seen families on training seeds 0 and 1."""
    from transformers import AutoTokenizer

    from skillgraft.hypernet.memory import save_memory_spec
    from skillgraft.skillworld.dataset import episode_record, record_steps
    from skillgraft.skillworld.episodes import run_episodes
    from skillgraft.skillworld.expert import messages
    from skillgraft.skillworld.families import resolve
    from skillgraft.skillworld.generate import generate
    from skillgraft.skillworld.policy.lora_policy import encode
    from skillgraft.skillworld.recipe import HYPERNET

    tasks = [generate(f, seed) for seed in range(2) for f in resolve(["seen"])][:HYPERNET.memory_reference]
    records = [episode_record(ep) for ep in run_episodes(tasks)]
    tokenizer = AutoTokenizer.from_pretrained(policy)
    reference = [encode(tokenizer, messages(record_steps(r, False), []), 2048)[0] for r in records]
    return save_memory_spec(folder, HYPERNET.memory_layers, reference, scale=HYPERNET.memory_scale,
                            ridge=HYPERNET.memory_ridge)


def train_hypernet(models_dir: Path, out: Path | None = None, *, show_progress: bool = True) -> Path:
    """Trains the default hypernetwork (both stages) against the default model into out (default:
    the models folder's own copy, then preferred to the shipped one); returns the stage-2 folder."""
    from dataclasses import replace

    from skillgraft.hypernet.train import TrainConfig, train_stage1, train_stage2
    from skillgraft.skillworld.recipe import HYPERNET

    policy = ensure_policy(models_dir, show_progress=show_progress)
    adapter = policy_adapter(models_dir)
    records = training_records(models_dir, show_progress=show_progress)
    target = Path(out) if out else Path(models_dir) / HYPERNET_DIR
    shutil.rmtree(target, ignore_errors=True)
    config = TrainConfig(steps=HYPERNET.stage1_steps, batch_size=HYPERNET.batch_size, lr=HYPERNET.lr,
                         seed=HYPERNET.seed, max_len=HYPERNET.max_len, progress=show_progress, bf16=True,
                         hypernet=HYPERNET.network())
    stage1 = train_stage1(str(policy), hypernet_texts(records, HYPERNET.seed), target / "stage1", config)
    stage2 = replace(config, steps=HYPERNET.stage2_steps, init_from=str(stage1.out_dir))
    done = target / "stage2"
    train_stage2(str(policy), hypernet_trajectories(records, HYPERNET.seed, HYPERNET.edit_weight), done, stage2)
    write_memory(done, policy)
    record_recipe(done, models_dir, adapter)
    return done


def record_recipe(folder: Path, models_dir: Path, adapter: Path) -> None:
    """Writes beside a trained hypernetwork what it was trained under: the recipe, the policy
    adapter and the base."""
    from skillgraft.skillworld.recipe import hypernet_digest

    weights = weights_digest(adapter, "adapter_model.safetensors")
    base = read_manifest(ensure_base(BASE, models_dir)) or {}
    (folder / HYPERNET_RECIPE).write_text(json.dumps({
        "recipe": hypernet_digest(weights), "policy_adapter": weights, "base": BASE,
        "base_gguf": base.get("gguf_digest"), "rebuild": REBUILD_HYPERNET}, indent=1))


def ensure_hypernet(models_dir: Path, *, show_progress: bool = True) -> Path:
    """The default model's hypernetwork: one trained under the models folder, else the shipped
    one; StaleArtifactError when it was trained for another recipe (its texts included), policy or base."""
    from skillgraft.skillworld.recipe import hypernet_digest

    adapter = policy_adapter(models_dir)
    own = Path(models_dir) / HYPERNET_DIR / "stage2"
    folder = own if (own / HYPERNET_RECIPE).is_file() else SHIPPED / "hypernet"
    recipe = hypernet_digest(weights_digest(adapter, "adapter_model.safetensors"))
    base = read_manifest(ensure_base(BASE, models_dir)) or {}
    check_artifact(folder, recipe, base, REBUILD_HYPERNET, "SkillWorld hypernetwork", HYPERNET_RECIPE)
    return folder
