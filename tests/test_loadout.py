"""One way a skill reaches the model: `skillgraft run`, the learner, refinement, the SkillWorld
evaluation and CycleQD build a run's skills with the same function, so the same inputs give the
same adapter. Real store, real compiler, a real tiny Llama; no sandbox is needed to compose."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from learn_support import parts  # noqa: F401  (a fixture)
from skillgraft.agent.loadout import GivenSkill, LoadoutError, SkillMode, make_loadout
from skillgraft.agent.models.hf_model import HFModel
from skillgraft.agent.task import Task
from skillgraft.hypernet.lora import to_dense
from skillgraft.hypernet.peft_io import load_adapter
from skillgraft.skills.store import Store

BODY = "1. Run the tests.\n2. Find the flipped comparison and flip it back.\n3. Run the tests again.\n"
TEXT = f"---\nname: fix-comparison\ndescription: Fix an inverted comparison operator.\n---\n{BODY}"
TASK = Task.from_dict({"id": "t", "repo": {"files": {"a.py": "x = 1\n"}}, "test": "true",
                       "instruction": "an inverted comparison operator breaks the tests"})


@pytest.fixture
def setup(parts, tmp_path):
    """A store holding one skill and a global adapter; the tiny model; a saved hypernetwork."""
    from skillgraft.evolve.learn.roles import make_compiler
    from skillgraft.hypernet.checkpoint import save_checkpoint
    from skillgraft.settings import load_settings

    base, fresh = parts
    ckpt = tmp_path / "hypernet"
    save_checkpoint(fresh.net, fresh.meta, ckpt)
    model = HFModel(base, max_new_tokens=8)
    compiler = make_compiler(ckpt, model)
    settings = load_settings(tmp_path / "home")
    store = Store(settings.store_url, settings.artifacts)
    folder = tmp_path / "skills" / "fix-comparison"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(TEXT)
    store.import_skill(folder)
    [start] = compiler.compile(["Check every comparison in the failing function."])
    staged = compiler.save(start, tmp_path / "g1")
    store.commit_global(staged, None, {"method": "init"}, base_fingerprint=compiler.meta.fingerprint)
    yield store, model, compiler, ckpt, settings
    store.close()


def _dense(folder: Path) -> dict[str, torch.Tensor]:
    return to_dense(load_adapter(folder)[0])


def _same(a: Path, b: Path) -> None:
    da, db = _dense(a), _dense(b)
    assert da.keys() == db.keys()
    for name in da:
        assert torch.allclose(da[name], db[name], atol=1e-6), name


def test_run_learn_refine_eval_and_cycleqd_compose_the_same_adapter(setup, tmp_path):
    from skillgraft.jobs.run_skills import prepare
    from skillgraft.evolve.cycleqd.candidate import Candidate
    from skillgraft.evolve.cycleqd.evaluators import AgentEvaluator
    from skillgraft.evolve.learn.loop import LearnConfig, Learner
    from skillgraft.evolve.learn.refine import AgentVerifier
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skillworld.evaluate import episode_loadout
    from skillgraft.skillworld.library import WorldSkill

    store, model, compiler, ckpt, settings = setup
    head = store.latest_global()
    run = prepare(store, TASK, model, "hf:tiny", ["fix-comparison"], "parametric", settings, hypernet=ckpt)
    learner = Learner(store, model, compiler, OfflineSummariser(), LearnConfig(skill_mode="parametric"), tmp_path / "learn")
    learn = learner.loadout_for(TASK)

    # run and learn: the same store version and global adapter, joined in the same order, one key
    assert run.refs == learn.refs == ["fix-comparison@v1"]
    assert run.adapter_ids[0] == learn.adapter_ids[0] == head.id  # the global adapter first
    assert run.adapter_ids == learn.adapter_ids and run.key == learn.key
    assert run.context == learn.context == []
    _same(run.adapter_dir, learn.adapter_dir)

    # refinement compiles a candidate text outside the store; the same text gives the same ΔW
    refine = AgentVerifier(store, model, compiler, skill_mode="parametric", workdir=tmp_path / "refine").loadout("fix-comparison", TEXT)
    assert refine.adapter_ids == [head.id] and refine.key != run.key
    _same(refine.adapter_dir, run.adapter_dir)

    # the SkillWorld evaluation has no store and no global adapter: the same as refinement without one
    bare = AgentVerifier(store, model, compiler, skill_mode="parametric", use_global=False,
                         workdir=tmp_path / "refine").loadout("fix-comparison", TEXT)
    world = WorldSkill("fix-comparison", "inverted_comparison", "", TEXT, None)
    evaluated = episode_loadout(model, world, "parametric", compiler, tmp_path / "refine")
    assert evaluated.key == bare.key and evaluated.adapter_dir == bare.adapter_dir
    assert episode_loadout(model, world, "both", compiler, tmp_path / "refine").context == [("fix-comparison", TEXT)]

    # CycleQD activates a candidate merge as it is
    candidate = Candidate.of(load_adapter(run.adapter_dir)[0], folder=run.adapter_dir)
    assert AgentEvaluator.loadout(model, candidate).adapter_dir == run.adapter_dir


def test_a_skill_is_compiled_once_into_the_store_and_a_join_is_written_once(setup, tmp_path):
    store, model, compiler, _ckpt, _settings = setup
    version = store.latest_version("fix-comparison")
    first = make_loadout(store, model, [version], "both", compiler=compiler, use_global=True, cache=tmp_path / "c")
    written = {p: p.stat().st_mtime_ns for p in first.adapter_dir.iterdir()}
    again = make_loadout(store, model, [version], "both", compiler=compiler, use_global=True, cache=tmp_path / "c")
    assert again.adapter_ids == first.adapter_ids and again.adapter_dir == first.adapter_dir
    assert {p: p.stat().st_mtime_ns for p in again.adapter_dir.iterdir()} == written  # reused, not rewritten
    assert len(store.adapters(kind="skill")) == 1
    compiled = store.adapter(first.adapter_ids[1])
    assert compiled.skill_version_id == version.id and compiled.hypernet_ckpt == compiler.checkpoint_id
    assert first.context == [("fix-comparison", BODY)] and first.global_version == 1
    # what the store holds is what the compiler makes of the text
    [delta] = compiler.compile([version.text])
    stored = _dense(store.adapter_path(compiled.id))
    for name, dense in to_dense(delta).items():
        assert torch.allclose(stored[name], dense, atol=1e-6)


def test_a_loadout_that_cannot_reach_the_model_is_refused_before_the_run(setup, tmp_path):
    from skillgraft.agent.models.replay_model import ReplayModel

    store, model, compiler, _ckpt, _settings = setup
    skill = GivenSkill.of_text("fix-comparison", TEXT)
    with pytest.raises(LoadoutError, match="cannot take LoRA adapters"):
        make_loadout(store, ReplayModel([]), [skill], "parametric", compiler=compiler, cache=tmp_path)
    with pytest.raises(LoadoutError, match="needs a hypernetwork"):
        make_loadout(store, model, [skill], SkillMode.both, cache=tmp_path)
    with pytest.raises(LoadoutError, match="skill mode must be one of context, parametric, both"):
        make_loadout(store, model, [skill], "weights", cache=tmp_path)
    # context needs neither: the text goes in the prompt, nothing is compiled or joined
    plain = make_loadout(store, ReplayModel([]), [skill], "context")
    assert plain.context == [("fix-comparison", BODY)] and plain.adapter_dir is None and plain.parts == ()


def test_the_global_adapter_and_compiled_skills_share_one_adapters_weight(setup, tmp_path):
    """Two adapters at full weight push the policy past what it tolerates: the global adapter
    counts GLOBAL_ALONE alone; beside compiled skills the joined ΔW is GLOBAL_BESIDE_SKILLS x the
    global adapter plus the rest of one adapter's weight, shared by the compiled skills."""
    from skillgraft.agent.loadout import GLOBAL_ALONE, GLOBAL_BESIDE_SKILLS

    store, model, compiler, _ckpt, _settings = setup
    version = store.latest_version("fix-comparison")
    other = GivenSkill.of_body("swap-back", "Swap the two arguments of the call back into order.")
    global_ = _dense(store.adapter_path(store.latest_global().id))

    alone = make_loadout(store, model, [], "parametric", compiler=compiler, use_global=True, cache=tmp_path / "c")
    assert alone.weights == (GLOBAL_ALONE,) and GLOBAL_ALONE < 1.0
    got = _dense(alone.adapter_dir)
    assert all(torch.allclose(got[n], GLOBAL_ALONE * global_[n], atol=1e-6) for n in global_)

    one = make_loadout(store, model, [version], "parametric", compiler=compiler, use_global=True, cache=tmp_path / "c")
    two = make_loadout(store, model, [version, other], "parametric", compiler=compiler, use_global=True,
                       cache=tmp_path / "c")
    rest = 1.0 - GLOBAL_BESIDE_SKILLS
    assert one.weights == (GLOBAL_BESIDE_SKILLS, rest) and two.weights == (GLOBAL_BESIDE_SKILLS, rest / 2, rest / 2)
    first, second = (to_dense(d) for d in compiler.compile([version.text, other.text]))
    for loadout, want in ((one, {n: GLOBAL_BESIDE_SKILLS * global_[n] + rest * first[n] for n in first}),
                          (two, {n: GLOBAL_BESIDE_SKILLS * global_[n] + rest / 2 * (first[n] + second[n]) for n in first})):
        got = _dense(loadout.adapter_dir)
        assert got.keys() == want.keys()
        assert all(torch.allclose(got[n], want[n], atol=1e-6) for n in want)
    assert max(float(first[n].abs().max()) for n in first) > 1e-3  # the compiled skills are not zero


def test_beside_its_text_a_compiled_skill_joins_at_a_reduced_weight(setup, tmp_path):
    """Skill mode both shows the text and activates the compiled skills at COMPILED_BESIDE_TEXT
    of their parametric share; the global adapter's weight is the same in both modes."""
    from skillgraft.agent.loadout import COMPILED_BESIDE_TEXT, GLOBAL_BESIDE_SKILLS

    store, model, compiler, _ckpt, _settings = setup
    version = store.latest_version("fix-comparison")
    global_ = _dense(store.adapter_path(store.latest_global().id))
    [compiled] = [to_dense(d) for d in compiler.beside_text().compile([version.text])]

    alone = make_loadout(None, model, [version], "both", compiler=compiler, cache=tmp_path / "c")
    joined = make_loadout(store, model, [version], "both", compiler=compiler, use_global=True, cache=tmp_path / "c")
    beside = COMPILED_BESIDE_TEXT * (1.0 - GLOBAL_BESIDE_SKILLS)
    assert alone.weights == (COMPILED_BESIDE_TEXT,) and joined.weights == (GLOBAL_BESIDE_SKILLS, beside)
    assert alone.context == joined.context == [("fix-comparison", BODY)]
    for loadout, want in ((alone, {n: COMPILED_BESIDE_TEXT * compiled[n] for n in compiled}),
                          (joined, {n: GLOBAL_BESIDE_SKILLS * global_[n] + beside * compiled[n]
                                    for n in compiled})):
        got = _dense(loadout.adapter_dir)
        assert got.keys() == want.keys()
        assert all(torch.allclose(got[n], want[n], atol=1e-6) for n in want)
