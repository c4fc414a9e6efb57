"""Refinement: Pareto parent selection, and a candidate kept only when strictly better on validation."""
from __future__ import annotations

import os
import random
from collections import Counter

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from skillgraft.agent.models.litellm_model import LitellmModel  # noqa: E402
from skillgraft.agent.task import Task  # noqa: E402
from skillgraft.evolve.learn.episode import Episode, Step  # noqa: E402
from skillgraft.evolve.learn.pareto import CandidatePool, dominates  # noqa: E402
from skillgraft.evolve.learn.propose import LLMGenerator, OfflineGenerator  # noqa: E402
from skillgraft.evolve.learn.refine import AgentVerifier, Refiner  # noqa: E402
from skillgraft.skills.skillmd import parse  # noqa: E402
from skillgraft.skills.store import Store  # noqa: E402


def skill(tips: int, extra: str = "") -> str:
    lines = "".join(f"- tip {i}\n" for i in range(tips))
    return f"---\nname: demo\ndescription: A demo skill.\n---\n# Demo\n\n{lines}{extra}"


def task(tid: str, family: str = "demo") -> Task:
    return Task.from_dict({"id": tid, "repo": {"files": {"a.py": "def f():\n    return 1\n"}}, "instruction": "Make f return 2.",
                           "test": "python3 -c 'import a; assert a.f() == 2'", "family": family})


class TipVerifier:
    """A known scoring rule over the text (like CycleQD's synthetic evaluator): a task is solved when
    the skill has at least as many tips as the task's threshold. Tests the search, not the agent."""

    def __init__(self, thresholds: dict[str, int]):
        self.thresholds = thresholds
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def run(self, skill_name, text, tasks, keep=False):
        tips = parse(text, folder_name=skill_name).body.count("- tip")
        self.calls.append((text, tuple(t.id for t in tasks)))
        scores = {t.id: float(tips >= self.thresholds[t.id]) for t in tasks}
        runs = [Episode(t.id, t.instruction, [Step("Look.", "cat a.py", "def f(): ...", 0)], scores[t.id] == 1.0)
                for t in tasks] if keep else []
        return scores, runs


def test_dominance_and_front():
    assert dominates({"a": 1, "b": 1}, {"a": 1, "b": 0}) and not dominates({"a": 1, "b": 0}, {"a": 0, "b": 1})
    pool = CandidatePool()
    pool.add("s", {"a": 0.0, "b": 0.0})
    pool.add("x", {"a": 1.0, "b": 0.0})
    pool.add("y", {"a": 0.0, "b": 1.0})
    pool.add("z", {"a": 0.5, "b": 0.5})
    pool.add("x2", {"a": 1.0, "b": 0.0})
    assert [c.text for c in pool.front()] == ["x", "y", "z"]  # s dominated; x2 duplicates x
    assert pool.leaders() == {"a": {1, 4}, "b": {2}}
    picks = Counter(pool.select_parent(random.Random(i)).text for i in range(3000))
    assert set(picks) == {"x", "y", "z"}
    # weight 1 + tasks led: x 2, y 2, z 1
    assert abs(picks["x"] / 3000 - 0.4) < 0.04 and abs(picks["z"] / 3000 - 0.2) < 0.04
    assert pool.best().text == "x"  # ties on mean go to the oldest


def test_refinement_keeps_a_candidate_only_on_strict_improvement(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    start = store.add_version("demo", skill(0), origin="authored")
    train = [task(f"t{i}") for i in (1, 2, 3)]
    val = [task(f"v{i}") for i in (1, 2, 3)]
    verifier = TipVerifier({"t1": 1, "t2": 2, "t3": 3, "v1": 3, "v2": 3, "v3": 3})
    wrap = lambda text: f"```markdown\n{text}```"  # noqa: E731
    # A: better on the minibatch, equal on validation. C: no better on the minibatch. B: better on both.
    a, c, b = skill(2), skill(0, "Be careful.\n"), skill(3)
    model = LitellmModel("gpt-4o-mini", tools=False, mock_script=[{"mock_response": wrap(x)} for x in (a, c, b)])
    refiner = Refiner(store, LLMGenerator(model), verifier, rounds=3, minibatch=3, seed=1)

    result = refiner.refine("demo", train, val)

    reasons = [(att.text, att.kept, att.reason) for att in result.attempts]
    assert reasons[0][:2] == (a, False) and "validation 0.000 not above" in reasons[0][2]
    assert reasons[1][:2] == (c, False) and "minibatch" in reasons[1][2]
    assert reasons[2][:2] == (b, True)
    assert not any(text == c and ids == ("v1", "v2", "v3") for text, ids in verifier.calls)  # C never validated
    assert result.improved and result.best.text == b
    versions = store.versions("demo")
    assert [(v.number, v.origin) for v in versions] == [(1, "authored"), (2, "refined")]
    assert versions[1].parent_id == start.id and versions[1].text == b
    per_task = {s.condition: s.score for s in store.scores("skill_version", versions[1].id)}
    assert per_task == {"refine:v1": 1.0, "refine:v2": 1.0, "refine:v3": 1.0, "refine-validation": 1.0}
    assert {s.condition: s.score for s in store.scores("skill_version", start.id)}["refine-validation"] == 0.0


def test_refinement_writes_nothing_when_no_candidate_is_strictly_better(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    store.add_version("demo", skill(1), origin="authored")
    verifier = TipVerifier({"t1": 1, "t2": 5, "v1": 1, "v2": 5})
    same_score = skill(1, "Another wording.\n")
    model = LitellmModel("gpt-4o-mini", tools=False, mock_script=[{"mock_response": f"```markdown\n{same_score}```"}])
    result = Refiner(store, LLMGenerator(model), verifier, rounds=1, minibatch=2).refine("demo", [task("t1"), task("t2")],
                                                                                        [task("v1"), task("v2")])
    assert not result.improved and len(store.versions("demo")) == 1
    assert "no revision beat v1" in result.describe()


@pytest.mark.docker
def test_agent_verifier_runs_real_episodes_and_a_tie_is_not_kept(tmp_path):
    from skillgraft.agent.models.replay_model import ReplayModel
    from skillgraft.agent.prompts import assistant_reply

    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    body = ("## Recipe induced from a successful run\n\n1. Look.\n   ```bash\n   cat a.py\n   ```\n"
            "2. Test.\n   ```bash\n   python3 -c 'import a'\n   ```\n3. When that passes (exit status 0), run `submit`.\n")
    store.add_version("demo", f"---\nname: demo\ndescription: A demo skill.\n---\n{body}", origin="authored")
    # The same two replies for every run: the skill text cannot change what this policy does.
    model = ReplayModel([assistant_reply("Look.", "cat a.py"), assistant_reply("Done.", "submit")] * 3)
    verifier = AgentVerifier(store, model, skill_mode="context", sandbox="docker")
    result = Refiner(store, OfflineGenerator(), verifier, rounds=1, minibatch=1).refine("demo", [task("t1")], [task("v1")])
    assert result.start_score == 0.0
    assert len(result.attempts) == 1 and not result.attempts[0].kept and "minibatch 0 not above" in result.attempts[0].reason
    assert not result.improved and len(store.versions("demo")) == 1
    assert "demo" in model.calls[0][1]["content"]  # the skill really was in the agent's context
