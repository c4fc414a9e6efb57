"""Skill text in the forms the hypernetwork must compile: shipped, induced from a run by the
offline summariser (pinned in a file, below), and paraphrased.

A hypernetwork trained only on the shipped texts compiles a text it has never seen (a recipe
the learner induced, a skill someone rewrote) into an adapter that can break the policy. So the
default hypernetwork is trained on all three forms, and every form of a family's skill is
paired with that family's episodes.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

from skillgraft.skillworld import library

# Phrase swaps a person rewriting a skill might make; commands in backticks are never touched.
_SWAPS = [
    ("Run the tests", ["Run the test suite", "Start with the tests", "First run the tests"]),
    ("Show the code with line numbers", ["Print the code with its line numbers", "List the code, numbered"]),
    ("Check:", ["Verify:", "Confirm:", "Then check:"]),
    ("When all tests pass, run `submit`.", ["Once everything passes, run `submit`.", "All green? Run `submit`."]),
    ("Use when", ["Apply this when", "This fits when"]),
    ("The failing test", ["The test that fails"]),
    ("must say passed; then `submit`.", ["should report passed; after that, `submit`."]),
    ("Cause:", ["Why:", "Root cause:"]),
    ("Symptom:", ["What you see:", "Sign:"]),
    ("Fix:", ["Repair:", "Remedy:"]),
    ("Verify with", ["Confirm with", "Check with"]),
    ("## Steps", ["## Procedure", "## How"]),
    ("## When", ["## Applies to", "## Trigger"]),
]
_CODE = re.compile(r"`[^`]*`")


def paraphrase(body: str, rng: random.Random) -> str:
    """The body reworded (headings, connecting phrases, list markers); commands kept verbatim."""
    parts = _CODE.split(body)
    codes = _CODE.findall(body)
    for old, news in _SWAPS:
        if rng.random() < 0.7:
            new = rng.choice(news)
            parts = [p.replace(old, new) for p in parts]
    text = "".join(p + (codes[i] if i < len(codes) else "") for i, p in enumerate(parts))
    lines = text.splitlines()
    if rng.random() < 0.5:  # numbered steps become bullets, or the other way round
        counter = iter(range(1, 100))
        lines = [re.sub(r"^\d+\. ", "- ", ln) if re.match(r"^\d+\. ", ln) else
                 (re.sub(r"^- ", f"{next(counter)}. ", ln) if ln.startswith("- ") else ln) for ln in lines]
    if lines and lines[0].startswith("# ") and rng.random() < 0.5:
        lines[0] = rng.choice(["# Skill: ", "# How to fix: ", "# "]) + lines[0][2:]
    return "\n".join(lines)


def induced(record: dict) -> str:
    """The recipe the offline summariser induces from one of the expert's successful runs (its body)."""
    from skillgraft.evolve.learn.episode import Episode, Step
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.skillmd import parse
    from skillgraft.skillworld.generate import generate

    task = generate(record["family"], record["seed"]).task()
    episode = Episode(record["id"], task.instruction, [Step(*s) for s in record["steps"]], True, family=record["family"])
    name = record["family"].replace("_", "-")
    return parse(OfflineSummariser(test_command=task.test).summarise(episode, name), folder_name=name).body


def forms_for(record: dict, rng: random.Random, donors: dict[str, list[dict]],
              recipes: dict[str, str]) -> list[tuple[str, str]]:
    """(form, text) of the skill texts that fit the record's task: a shipped (or drill) skill, its
    paraphrase, and the pinned recipe induced from another run of the same family where one fits
    (for a drill whose values are drawn per task, only this task's own run has the right values)."""
    from skillgraft.skillworld.families.drills import BY_FAMILY

    shipped = library.pick(record["family"], rng, record["seed"])
    out = [("shipped", shipped.body), ("paraphrase", paraphrase(shipped.body, rng))]
    drawn = record["family"] in BY_FAMILY and BY_FAMILY[record["family"]].draw is not None
    others = [r for r in donors.get(record["family"], []) if r["id"] != record["id"]]
    donor = record if drawn or not others else rng.choice(others)
    out.append(("induced", pinned_recipe(recipes, donor)))
    return out


def first_clean_runs(records: list[dict]) -> list[dict]:
    """Each family's first clean run among `records`: the runs stage 1 takes its induced recipes from."""
    first: dict[str, dict] = {}
    for record in records:
        if not record.get("mistake"):
            first.setdefault(record["family"], record)
    return list(first.values())


# ---------------------------------------------------------------- the pinned recipes
# The recipes the hypernetwork trains on are data, not code: the offline summariser's wording
# changes as learning improves it, and a hypernetwork trained on yesterday's recipes must still be
# rebuilt from the same texts. `pin_recipes` rewrites the file from today's summariser; its digest
# is part of the hypernetwork's recipe, so the shipped hypernetwork is then refused until rebuilt.

PINNED = Path(__file__).with_name("hypernet_recipes.json")
REPIN = "skillgraft world pin-recipes"


class UnpinnedRunError(RuntimeError):
    """A training run has no pinned recipe: the expert's runs changed since the file was written."""


def pin_recipes(records: list[dict], path: Path | None = None) -> dict[str, str]:
    """Writes the recipe the offline summariser induces from every clean run in `records`."""
    recipes = {r["id"]: induced(r) for r in records if not r.get("mistake")}
    Path(path or PINNED).write_text(json.dumps({"written_by": REPIN, "recipes": recipes}, indent=1, sort_keys=True) + "\n")
    return recipes


def pinned_recipes(path: Path | None = None) -> dict[str, str]:
    path = Path(path or PINNED)
    return json.loads(path.read_text())["recipes"] if path.is_file() else {}


def pinned_recipe(recipes: dict[str, str], record: dict) -> str:
    try:
        return recipes[record["id"]]
    except KeyError:
        raise UnpinnedRunError(f"no pinned recipe for the expert's run {record['id']}: the runs changed since "
                               f"the recipes were pinned; pin them again with `{REPIN}`") from None


def paraphrases(seed: int) -> list[str]:
    """The paraphrase of every shipped skill, seeded."""
    rng = random.Random(seed)
    return [paraphrase(s.body, rng) for s in library.skills()]


def made_texts(runs: list[dict], recipes: dict[str, str], seed: int) -> list[str]:
    """The texts stage 1 makes rather than reads: the paraphrases and the pinned recipes of `runs`."""
    return paraphrases(seed) + [pinned_recipe(recipes, r) for r in runs]


def texts_digest(seed: int, path: Path | None = None) -> str:
    """A digest of what training makes from skill text: the pinned recipes and the paraphrases
    (code that the world's digest does not see)."""
    blob = json.dumps([pinned_recipes(path), paraphrases(seed)], sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:24]
