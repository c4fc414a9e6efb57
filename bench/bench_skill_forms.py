"""Can the policy use a skill in each form that learning gives it? The edit turn, form by form.

    python -m bench.bench_skill_forms [--policy DIR --hypernet DIR] [--per-family 3] [--families seen]
                                      [--score reply|command] [--show-misses]

Learning online hands the agent skills in forms its training never showed it: recipes the
offline summariser induced from a run, compiled by the hypernetwork, folded into a global adapter.
This measures, on held-out expert conversations, how often the policy makes the expert's edit
(turn 2, everything before the turn given) when the family's skill is

    none                    no skill at all
    shipped, in context     one of the family's hand-written SKILL.md paraphrases in the prompt
                            (a drill whose values are drawn per task: written from the task's own)
    induced, in context     the offline summariser's recipe from one expert run of the family
    shipped, compiled       the shipped text compiled to a LoRA adapter, nothing in the prompt
    induced, compiled       the induced recipe compiled
    global                  the exact low-rank EMA (--alpha, --rank) of every family's compiled
                            induced recipe: one adapter for all tasks, as learning builds it,
                            at the weight a run gives it alone (agent.loadout.join_weights)
    global + induced        the global adapter joined with the family's own compiled recipe
                            at the weights a run gets them (agent.loadout.join_weights)
    global + induced, 1:1   the two at full weight each, as runs were given them before

--score reply (the default) has the policy write the edit turn itself, greedily, its own thought
and then its command, and counts the command; --score command is the faster teacher-forced
check: the expert's command token by token after the expert's thought. Teacher-forced, forms are
not compared alike: without a skill the expert's thought names the fix ("returns nothing; return
acc"), with one it says "make the skill's edit", which the policy, given a recipe it was not
trained on, does not write itself (it writes the fix it knows).

The induced recipes come from expert runs on a block of held-out seeds of their own, so no
conversation is scored against a recipe made from itself. With --show-misses every missed
edit is printed (scoring the reply: the reply as written; the command: each wrong token as
[guess|expert]): where a form goes wrong.
"""
from __future__ import annotations

import argparse
import random
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.bench_policy_turns import held_out_records

FORMS = ("none", "shipped, in context", "induced, in context", "shipped, compiled", "induced, compiled",
         "global", "global + induced", "global + induced, 1:1")


def induced_recipes(families: list[str]) -> dict[str, str]:
    """{family: recipe body} summarised offline from one expert run per family."""
    from skillgraft.skillworld.skill_texts import induced

    return {record["family"]: induced(record) for record in held_out_records(families, 1, offset=900)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", type=Path, default=None, help="policy model folder (default: the bundled skillworld model)")
    ap.add_argument("--hypernet", type=Path, default=None, help="hypernetwork checkpoint (default: the bundled one)")
    ap.add_argument("--models-dir", type=Path, default=None, help="default: HOME/models (SKILLGRAFT_HOME or ~/.skillgraft)")
    ap.add_argument("--per-family", type=int, default=3, help="held-out conversations per family")
    ap.add_argument("--families", nargs="+", default=["seen"], help="families or groups (seen, skill-only, drill, all)")
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--score", choices=("reply", "command"), default="reply",
                    help="reply: the policy writes the edit turn itself, thought and command (default); "
                         "command: the expert's command teacher-forced after the expert's thought")
    ap.add_argument("--show-misses", action="store_true",
                    help="print every missed edit: the reply as written, or each wrong token as [guess|expert]")
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillgraft.agent.loadout import join_weights
    from skillgraft.evolve.learn.global_adapter import EmaConfig, combine
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.lora import concat
    from skillgraft.skillworld import library
    from skillgraft.skillworld.dataset import record_steps
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.edit_replay import edit_command_guess, edit_reply_guess
    from skillgraft.skillworld.expert import messages
    from skillgraft.skillworld.families import resolve

    from skillgraft.settings import load_settings

    models_dir = args.models_dir or load_settings().models
    policy = args.policy or ensure_policy(models_dir)
    hypernet = args.hypernet or ensure_hypernet(models_dir)
    families = resolve(args.families)
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy).eval()
    compiler = Compiler.load(hypernet, policy)

    rng = random.Random(0)
    records = held_out_records(families, args.per_family)
    # One paraphrase per conversation; a drill whose values are drawn per task gets one written for that task.
    shipped = [library.pick(record["family"], rng, record["seed"]) for record in records]
    texts = list(dict.fromkeys(skill.body for skill in shipped))
    compiled_shipped = dict(zip(texts, compiler.compile(texts)))
    induced = induced_recipes(families)
    compiled_induced = dict(zip(families, compiler.compile([induced[f] for f in families])))
    global_ = None
    for f in families:
        global_, _ = combine(global_, compiled_induced[f], EmaConfig(alpha=args.alpha, rank=args.rank))

    guess = edit_reply_guess if args.score == "reply" else edit_command_guess
    hits: dict = defaultdict(lambda: defaultdict(int))
    for record, skill in zip(records, shipped):
        f = record["family"]
        forms = {
            "none": ([], None),
            "shipped, in context": ([(skill.name, skill.body)], None),
            "induced, in context": ([(f.replace("_", "-"), induced[f])], None),
            "shipped, compiled": ([], compiled_shipped[skill.body]),
            "induced, compiled": ([], compiled_induced[f]),
            "global": ([], concat([global_], join_weights(True, 0, 0))),
            "global + induced": ([], concat([global_, compiled_induced[f]], join_weights(True, 0, 1))),
            "global + induced, 1:1": ([], concat([global_, compiled_induced[f]])),
        }
        for form, (in_context, delta) in forms.items():
            # The thoughts are the ones the policy has with the skill text in view, or without it.
            conversation = messages(record_steps(record, bool(in_context)), in_context)
            right, shown = guess(model, tokenizer, conversation, delta)
            hits[form][f] += right
            if args.show_misses and not right:
                print(f"{f}, {form}: {shown!r}" if args.score == "reply" else f"{f}, {form}: {shown}", flush=True)

    per = Counter(record["family"] for record in records)
    how = "the reply written by the policy" if args.score == "reply" else "teacher-forced after the expert's thought"
    table = Table(title=f"edit command right, {how}, {len(records)} held-out expert conversations")
    table.add_column("family")
    for form in FORMS:
        table.add_column(form.replace(", in context", " ctx").replace(", compiled", " LoRA"), justify="right")
    for f in families:
        table.add_row(f, *(f"{hits[form][f]}/{per[f]}" for form in FORMS))
    table.add_row("all", *(f"{sum(hits[form].values())}/{len(records)}" for form in FORMS), style="bold")
    Console(width=220).print(table)  # a row per family, every form beside it, also into a log file

if __name__ == "__main__":
    main()
