"""What the default model and its hypernetwork are trained on, and a digest of it.

The digest is computed from content, not kept by hand: the world's generated tasks and the
expert's steps on a sample of seeds of every family, every skill text, the strings the agent
shows a model, and the training configurations. A shipped artifact records the digest it was
trained under; when the code changes what training would see, the digests part and the
artifact is refused with the command that rebuilds it, never used silently.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import lru_cache

from skillgraft.skillworld.policy.lora_policy import LoraPolicyConfig

BASE = "smollm2-135m"


@dataclass(frozen=True)
class EpisodeSet:
    label: str
    group: str  # a family group of skillworld.families.GROUPS, or "fixed-drill" / "literal-drill"
    per_family: int
    first_seed: int = 0
    mistake: str | None = None
    every: int = 1  # only every n-th family of the group


# The mix keeps the families' own fixes (seen episodes without a skill are the largest part),
# teaches reading a skill (seen episodes with their skill, and drills whose fix only the skill
# gives), and recovery (episodes with one wrong step, never trained on, and the steps after it:
# a misspelt search, a misspelt edit, another family's fix).
EPISODE_SETS = (
    EpisodeSet("seen", "seen", 40),
    EpisodeSet("fixed drills", "fixed-drill", 2),
    EpisodeSet("literal drills", "literal-drill", 30),
    EpisodeSet("seen, wrong search", "seen", 6, first_seed=100, mistake="grep-miss"),
    EpisodeSet("seen, edit that misses", "seen", 6, first_seed=200, mistake="edit-miss"),
    EpisodeSet("seen, another family's fix", "seen", 6, first_seed=500, mistake="wrong-fix"),
    EpisodeSet("literal drills, edit that misses", "literal-drill", 6, first_seed=300, mistake="edit-miss"),
    EpisodeSet("fixed drills, wrong search", "fixed-drill", 2, first_seed=400, mistake="grep-miss", every=7),
)
SKILL_SHARE = 0.35  # of the seen families' episodes, also shown with one of their skills in context
POLICY = LoraPolicyConfig(rank=16, steps=260, batch_size=4, lr=1e-3, warmup=20, max_tokens=1536, seed=0, bf16=True)


@dataclass(frozen=True)
class HypernetRecipe:
    """The default hypernetwork: stage 1 on every form of every skill text (shipped, drills',
    induced, paraphrased), stage 2 on the expert's episodes with a form of their skill compiled."""

    rank: int = 8
    targets: tuple[str, ...] = ("q_proj", "v_proj", "o_proj")
    encoder_window: int = 32  # MiniLM tokens per chunk: a skill's edit line gets a vector of its own
    # o_proj writes the residual stream: its B columns are the policy's embeddings of tokens picked
    # from the skill, so a literal of the recipe (`and`, `.lower()`) reaches the adapter as itself.
    lexical_targets: tuple[str, ...] = ("o_proj",)
    lexical_rank: int = 8
    lexical_layer: int = 15  # of 30: the hidden states the token selection reads
    stage1_steps: int = 120
    stage2_steps: int = 240
    batch_size: int = 4
    lr: float = 1e-3
    max_len: int = 1024
    seed: int = 0
    edit_weight: float = 8.0  # stage 2: the edit reply's tokens weigh this much in the loss, the rest 1
    # The command memory (hypernet.memory), written after stage 2: the band of the policy's 30
    # layers that holds a skill's literal edits, the expert conversations its moments are read
    # from, the values' scale and the ridge.
    memory_layers: tuple[int, ...] = tuple(range(23, 28))
    memory_reference: int = 12
    memory_scale: float = 1.0
    memory_ridge: float = 0.3

    def network(self, lexical: bool = True):
        """The hypernetwork's configuration (without the lexical channel when `lexical` is False)."""
        from skillgraft.hypernet.hypernetwork import HypernetConfig

        return HypernetConfig(rank=self.rank, target_modules=self.targets, encoder_window=self.encoder_window,
                              lexical_targets=self.lexical_targets if lexical else (),
                              lexical_rank=self.lexical_rank, lexical_layer=self.lexical_layer)


HYPERNET = HypernetRecipe()


def families_of(episode_set: EpisodeSet) -> list[str]:
    from skillgraft.skillworld.families import DRILL, GROUPS
    from skillgraft.skillworld.families.drills import LITERAL_FAMILIES

    if episode_set.group == "fixed-drill":
        names = [f for f in DRILL if f not in LITERAL_FAMILIES]
    elif episode_set.group == "literal-drill":
        names = list(LITERAL_FAMILIES)
    else:
        names = list(GROUPS[episode_set.group])
    return names[::episode_set.every]


def _digest(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@lru_cache(maxsize=1)
def world_digest() -> str:
    """A digest of everything the expert's episodes show a model, on a sample of each family the
    recipe draws on (learning families, which training never sees, are left out)."""
    from skillgraft.agent.prompts import assistant_reply, instance_prompt, observation, system_prompt
    from skillgraft.skillworld import library
    from skillgraft.skillworld.expert import MISTAKES, can_make, plan
    from skillgraft.skillworld.families import FAMILIES
    from skillgraft.skillworld.families.base import TRAINED_ON
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    tasks = []
    for family in sorted(f for f in FAMILIES if FAMILIES[f].group in TRAINED_ON):
        for seed in (0, 1, HELDOUT_START):
            wt = generate(family, seed)
            plans = [plan(wt), plan(wt, skill_in_context=True)]
            plans += [plan(wt, mistake=m) for m in MISTAKES if can_make(wt, m)]
            tasks.append([wt.id, wt.files, wt.path, plans])
    skills = [[s.name, s.family, s.text] for s in library.every_skill()]
    prompts = [system_prompt(), instance_prompt("TASK", [("NAME", "BODY")]), observation("OUT", 1, True, 3),
               assistant_reply("THOUGHT", "COMMAND")]
    return _digest(tasks, skills, prompts)


def policy_digest() -> str:
    return "policy-" + _digest(world_digest(), BASE, [asdict(s) for s in EPISODE_SETS], SKILL_SHARE, asdict(POLICY))


def hypernet_digest(policy_weights: str) -> str:
    """The hypernetwork's recipe under the policy whose adapter weights have this digest: a new
    policy makes the hypernetwork stale too, since it was trained against the policy's weights, and so
    do new pinned recipes or paraphrases (skill_texts.texts_digest)."""
    from skillgraft.skillworld.skill_texts import texts_digest

    return "hypernet-" + _digest(world_digest(), [asdict(s) for s in EPISODE_SETS], asdict(HYPERNET), policy_weights,
                                 texts_digest(HYPERNET.seed))
