"""What the learner does around its sessions, each in a real session on a real store with Docker
sandboxes: the validation gate of the global adapter, refinement of a weak skill, and CycleQD
every K sessions."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from skillgraft.agent.loadout import GLOBAL_ALONE
from skillgraft.agent.models.hf_model import HFModel
from skillgraft.evolve.learn.global_adapter import EmaConfig
from skillgraft.evolve.learn.loop import LearnConfig, Learner
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
from skillgraft.hypernet.lora import to_dense
from skillgraft.hypernet.peft_io import load_adapter
from learn_support import PoolExpert, parts  # noqa: F401  (parts is a fixture)
from skillgraft.skills.store import Store
from skillgraft.skillworld.generate import HELDOUT_START, generate

pytestmark = pytest.mark.docker


def distinct_tasks(family: str, count: int, first: int):
    """`count` tasks of a family whose failing tests have different names."""
    out, seed = [], first
    while len(out) < count:
        wt = generate(family, HELDOUT_START + seed)
        if wt.planted.name not in {t.planted.name for t in out}:
            out.append(wt)
        seed += 1
    return out


def test_the_gate_runs_validation_with_candidate_and_current_global(parts, tmp_path):
    base, compiler = parts
    a, v = distinct_tasks("off_by_one", 2, 40)
    (b,) = distinct_tasks("inverted_comparison", 1, 40)  # another skill: another adapter to fold
    model = PoolExpert(HFModel(base, max_new_tokens=8), [a, b, v])
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    config = LearnConfig(skill_mode="parametric", gate=True, ema=EmaConfig(alpha=0.5, rank=8))
    learner = Learner(store, model, compiler, OfflineSummariser(), config, tmp_path / "work", validation=[v.task()])

    learner.run_session([a.task()])
    first = store.latest_global()
    # the summary was validated compiled (no global to join yet) and became v1; the first global
    # was validated against no adapter at all (nothing loaded for that run) before it was kept
    assert first.version == 1 and len(model.loaded) == 2 and model.loaded[0].parent.name == "compiled"
    [(candidate, weight)] = _joined(model.loaded[1])
    assert candidate.parent.name.startswith("skillgraft-global-") and weight == GLOBAL_ALONE
    model.loaded.clear()
    o = learner.run_session([b.task()]).outcomes[0]
    # b, of another family, was solved with global v1 and summarised into a skill of its own; then
    # the validation task ran under what runs now (global v1 alone, as b's run had it), under the
    # new skill compiled beside global v1, and under the candidate global alone; global v1 alone
    # had just been scored, so the global gate did not run it again
    assert o.learned == "inverted-comparison@v1" and not o.note
    assert len(model.loaded) == 4 and model.loaded[0] == model.loaded[1]
    assert [weight for _, weight in _joined(model.loaded[0])] == [GLOBAL_ALONE]
    assert len(_joined(model.loaded[2])) == 2  # global v1 and the compiled skill
    # the candidate as a run gets it alone: at GLOBAL_ALONE
    [(candidate, weight)] = _joined(model.loaded[3])
    assert candidate.parent.name.startswith("skillgraft-global-") and weight == GLOBAL_ALONE
    # the expert solves the validation task either way: no regression, so the candidate is kept
    assert o.success and o.global_after == 2 and store.latest_global().version == 2
    # global v2 is the exact EMA of v1 and the new skill's adapter
    g1, g2 = store.global_history()
    new = g2.provenance["combined"][1]["adapter_id"]
    d1, d2, dn = (to_dense(load_adapter(store.adapter_path(i))[0]) for i in (g1.id, g2.id, new))
    for m in d2:
        torch.testing.assert_close(d2[m], 0.5 * d1[m] + 0.5 * dn[m], rtol=1e-4, atol=1e-6)


def _joined(folder: Path) -> list[tuple[Path | str, float]]:
    """The (adapter folder, weight) parts a composed adapter folder was joined from; a part that
    is no folder keeps its cache key."""
    from skillgraft.hypernet.peft_io import read_info

    parts = read_info(folder).metadata.get("composed_of", [])
    return [(Path(p["part"][7:]).resolve() if p["part"].startswith("folder:") else p["part"], p["weight"])
            for p in parts]


class ShunsInducedRecipes(PoolExpert):
    """The pool's expert, except that it gives up whenever a recipe induced from a run is in context."""

    def query(self, messages):
        from skillgraft.agent import prompts
        from skillgraft.agent.models.base import ModelReply
        from skillgraft.evolve.learn.summarise_offline import SECTION

        if SECTION in messages[1]["content"]:
            return ModelReply(content=prompts.assistant_reply("I follow the recipe and stop.", prompts.SUBMIT_COMMAND))
        return super().query(messages)


@pytest.mark.parametrize("model_class", [PoolExpert, ShunsInducedRecipes])
def test_in_context_mode_the_gate_keeps_a_summary_only_if_validation_does_not_drop(model_class, tmp_path):
    a, v = distinct_tasks("off_by_one", 2, 100)
    model = model_class(None, [a, v])  # context mode: no weights take adapters
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    learner = Learner(store, model, None, OfflineSummariser(), LearnConfig(skill_mode="context", gate=True),
                      tmp_path / "work", validation=[v.task()])
    o = learner.run_session([a.task()]).outcomes[0]

    assert o.success
    name = "off-by-one"
    if model_class is PoolExpert:  # solves the validation task with and without the summary: kept
        assert o.learned == f"{name}@v1" and store.latest_version(name) is not None
    else:  # solves it without the summary only: refused, and the store has no version of it
        assert not o.learned and o.note == (f"summary of {name} refused by the validation gate "
                                           "(0% against 100% on 1 validation tasks)")
        assert store.latest_version(name) is None


class HarmedBy(PoolExpert):
    """The pool's expert, except that it gives up while an adapter that `harms` is active."""

    def __init__(self, hf, tasks):
        super().__init__(hf, tasks)
        self.harmed = False

    def harms(self, adapter_dir: Path) -> bool:
        raise NotImplementedError

    def load_adapter(self, adapter_dir):
        super().load_adapter(adapter_dir)
        self.harmed = self.harms(Path(adapter_dir))

    def unload_adapter(self):
        super().unload_adapter()
        self.harmed = False

    def query(self, messages):
        from skillgraft.agent import prompts
        from skillgraft.agent.models.base import ModelReply

        if self.harmed:
            return ModelReply(content=prompts.assistant_reply("Something pulls me off course.", prompts.SUBMIT_COMMAND))
        return super().query(messages)


class HarmedByNewRecipes(HarmedBy):
    """Harmed by an adapter compiled from a text outside the store (a summary not yet kept),
    alone or joined with others."""

    def harms(self, adapter_dir):
        from skillgraft.hypernet.peft_io import read_info

        parts = [p["part"] for p in read_info(adapter_dir).metadata.get("composed_of", [])]
        return adapter_dir.parent.name == "compiled" or any(p.startswith("text:") for p in parts)


class HarmedByGlobals(HarmedBy):
    """Harmed by a candidate global adapter, which the gate joins at the weight a run gives it."""

    def harms(self, adapter_dir):
        return any(isinstance(part, Path) and part.parent.name.startswith("skillgraft-global-")
                   for part, _ in _joined(adapter_dir))


@pytest.mark.parametrize("model_class", [PoolExpert, HarmedByNewRecipes, HarmedByGlobals])
def test_in_parametric_mode_the_gate_validates_the_summary_compiled_beside_the_global(model_class, parts, tmp_path):
    base, compiler = parts
    a, v = distinct_tasks("off_by_one", 2, 120)
    model = model_class(HFModel(base, max_new_tokens=8), [a, v])
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    config = LearnConfig(skill_mode="parametric", gate=True, ema=EmaConfig(alpha=0.5, rank=8))
    learner = Learner(store, model, compiler, OfflineSummariser(), config, tmp_path / "work", validation=[v.task()])
    o = learner.run_session([a.task()]).outcomes[0]

    assert o.success
    name = "off-by-one"
    # the validation task ran with nothing (no skill, no global yet), then with the summary compiled
    assert model.loaded[0].parent.name == "compiled"
    if model_class is PoolExpert:  # the compiled summary leaves validation as it was: kept and folded
        assert o.learned == f"{name}@v1" and store.latest_global().version == 1
        assert len(model.loaded) == 2  # and the first global, against no adapter
    elif model_class is HarmedByGlobals:  # the summary is kept, but the global it would start breaks
        # the validation task that no adapter at all solves: there is still no global adapter
        assert o.learned == f"{name}@v1" and o.note == ("new global version refused by the validation gate "
                                                          "(0% against 100% on 1 validation tasks)")
        assert store.latest_global() is None and o.global_after is None
    else:  # compiled, the summary breaks the validation task: no version, nothing folded
        assert not o.learned and o.note == (f"summary of {name} refused by the validation gate "
                                           "(0% against 100% on 1 validation tasks)")
        assert store.latest_version(name) is None and store.latest_global() is None
        assert len(model.loaded) == 1


def test_a_weak_skill_is_refined_after_the_session(tmp_path):
    from skillgraft.evolve.learn.propose import OfflineGenerator
    from skillgraft.evolve.learn.refine import AgentVerifier, Refiner
    from skillgraft.skillworld import library

    known, x1, x2, v = distinct_tasks("off_by_one", 4, 60)
    model = PoolExpert(None, [known, v])  # context mode: no weights take adapters
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    recipe = library.for_family("off_by_one")[0]
    store.add_version(recipe.name, recipe.text, origin="authored")
    config = LearnConfig(skill_mode="context", refine_below=0.5, refine_min_uses=3)
    refiner = Refiner(store, OfflineGenerator(), AgentVerifier(store, model, skill_mode="context"), rounds=1, minibatch=2)
    learner = Learner(store, model, None, OfflineSummariser(), config, tmp_path / "work", validation=[v.task()],
                      refiner=refiner)
    report = learner.run_session([known.task(), x1.task(), x2.task()])

    assert [o.success for o in report.outcomes] == [True, False, False]
    # the first success was given v1 and confirms it: nothing is summarised, the later runs get v1
    assert [o.skills for o in report.outcomes] == [[f"{recipe.name}@v1"]] * 3
    assert report.outcomes[0].note.startswith(f"confirms {recipe.name}@v1") and store.latest_version(recipe.name).number == 1
    # one of three is below 0.5: the refiner ran, scored the skill on the validation task and,
    # since no text can change what this policy does, kept no revision
    notes = [n for n in report.notes if n.startswith(recipe.name)]
    assert len(notes) == 1 and "no revision beat v" in notes[0]
    start = store.latest_version(recipe.name)
    scores = store.scores("skill_version", start.id)
    assert {s.condition for s in scores} >= {"refine-validation", f"refine:{v.id}"}
    assert next(s for s in scores if s.condition == "refine-validation").score == 1.0
    assert store.sessions(kind="learn")[-1].summary["notes"] == report.notes


@pytest.mark.parametrize("keep_confirmed", [True, False])
def test_a_success_with_the_latest_version_confirms_it_while_it_solves_half_its_runs(keep_confirmed, tmp_path):
    from skillgraft.skillworld import library

    k1, k2, x1, x2, x3 = distinct_tasks("off_by_one", 5, 140)
    model = PoolExpert(None, [k1, k2])  # solves k1 and k2 only; x1, x2, x3 fail
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    recipe = library.for_family("off_by_one")[0]
    store.add_version(recipe.name, recipe.text, origin="authored")
    learner = Learner(store, model, None, OfflineSummariser(), LearnConfig(skill_mode="context", keep_confirmed=keep_confirmed),
                      tmp_path / "work")

    first = learner.run_session([x1.task(), k1.task()]).outcomes
    assert [o.success for o in first] == [False, True] and first[1].skills == [f"{recipe.name}@v1"]
    if not keep_confirmed:  # every success is summarised
        assert first[1].learned == f"{recipe.name}@v2"
        return
    # v1 solved one of the two runs given it: kept as it is
    assert first[1].note == f"confirms {recipe.name}@v1 (1 of 2 runs given it solved)" and first[1].learned is None
    assert store.latest_version(recipe.name).number == 1

    second = learner.run_session([x2.task(), x3.task(), k2.task()]).outcomes
    # now 2 of 5: the success is summarised, its recipe written into the skill as v2
    assert [o.skills for o in second] == [[f"{recipe.name}@v1"]] * 3
    assert second[2].learned == f"{recipe.name}@v2" and not second[2].note
    assert "## Recipe induced from a successful run" in store.latest_version(recipe.name).text


def test_cycleqd_runs_every_k_sessions_over_the_global_history(parts, tmp_path):
    from skillgraft.evolve.learn.periodic import cycleqd_every

    base, compiler = parts
    (a,) = distinct_tasks("off_by_one", 1, 80)
    b, c = distinct_tasks("inverted_comparison", 2, 80)  # b: a second skill, so a second global version
    model = PoolExpert(HFModel(base, max_new_tokens=8), [a, b, c])
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    validation = [a.task(), c.task()]  # two families: two CycleQD tasks
    config = LearnConfig(skill_mode="parametric", cycleqd_every=2, ema=EmaConfig(alpha=0.5, rank=8))
    told = []
    hook = cycleqd_every(validation, lambda: model, generations=1, on_generation=lambda done, of: told.append((done, of)))
    learner = Learner(store, model, compiler, OfflineSummariser(), config, tmp_path / "work", validation=validation,
                      periodic=hook)

    first = learner.run_session([a.task()])
    assert not any("CycleQD" in n for n in first.notes) and store.qd_runs() == [] and told == []
    second = learner.run_session([b.task()])
    notes = [n for n in second.notes if n.startswith("CycleQD after session 2")]
    assert len(notes) == 1, second.notes
    assert told == [(0, 1), (1, 1)]  # the starting population, then the one generation
    (run,) = store.qd_runs()
    # the population was the two global versions; each family is an archive holding elites
    first_two = [g.id for g in store.global_history()[:2]]
    assert len(first_two) == 2 and sorted(run.config["checkpoints"]) == sorted(first_two)
    assert sorted(run.config["tasks"]) == ["inverted_comparison", "off_by_one"]
    for task in ("inverted_comparison", "off_by_one"):
        entries = store.archive(run.id, task)
        assert entries and all(e.quality == 1.0 for e in entries)


def test_the_gate_scores_its_validation_on_the_learners_episode_runner(parts, tmp_path):
    """With an episode runner (threads here, Ray workers elsewhere) the validation runs go to its
    models, two at a time; scores come back per task, in task order."""
    from skillgraft.agent.episodes import LocalEpisodes
    from skillgraft.evolve.learn.evaluate import AgentScorer

    base, _ = parts
    a, b, c = distinct_tasks("off_by_one", 3, 160)
    made = []

    def factory():  # each worker's model knows a and b but not c, which it gives up on
        made.append(PoolExpert(HFModel(base, max_new_tokens=8), [a, b]))
        return made[-1]

    runner = LocalEpisodes(factory, workers=2)
    try:
        scorer = AgentScorer(PoolExpert(None, [a, b, c]), episodes=runner)  # its own model would solve all three
        scores = scorer.scores([c.task(), a.task(), b.task()])
    finally:
        runner.close()
    assert list(scores.items()) == [(c.task().id, 0.0), (a.task().id, 1.0), (b.task().id, 1.0)]
    assert len(made) == 2
