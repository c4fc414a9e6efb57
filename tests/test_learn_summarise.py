"""Summarisers and generators: the LLM ones through litellm's own mock_response, the offline
ones on real expert trajectories run in the Docker sandbox."""
from __future__ import annotations

import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from skillgraft.agent.models.litellm_model import LitellmModel  # noqa: E402
from skillgraft.evolve.learn.episode import Episode, Step, load_episode  # noqa: E402
from skillgraft.evolve.learn.propose import LLMGenerator, OfflineGenerator  # noqa: E402
from skillgraft.evolve.learn.summarise import SummaryError, check_skill_text  # noqa: E402
from skillgraft.evolve.learn.summarise_llm import LLMSummariser  # noqa: E402
from skillgraft.evolve.learn.summarise_offline import SECTION, OfflineSummariser  # noqa: E402
from skillgraft.skills.skillmd import parse  # noqa: E402
from skillgraft.skills.store import Store  # noqa: E402

BAD_NAME = "```markdown\n---\nname: Off_By_One\ndescription: Fixes bounds.\n---\n# Steps\n1. Run the tests.\n```"
NO_FRONTMATTER = "Here is the skill:\n\n# Steps\n1. Run the tests.\n"
GOOD = (
    "Sure.\n\n```markdown\n---\nname: off-by-one\ndescription: Fix off-by-one range bounds when a test "
    "expects one more item.\n---\n# Fix an off-by-one bound\n\n1. Run `python3 -m pytest -q`.\n"
    "2. `grep -rn \"def <name>(\" .`\n3. Drop the `- 1` from the range bound with sed.\n```\n"
)


def scripted(*replies: str) -> LitellmModel:
    return LitellmModel("gpt-4o-mini", tools=False, wait_min=0, wait_max=0,
                        mock_script=[{"mock_response": r} for r in replies])


def small_episode(success: bool = True) -> Episode:
    steps = [Step("Run the tests.", "python3 -m pytest -q", "FAILED tests/test_a.py::test_total_of - assert 3 == 4", 1),
             Step("Look at it.", 'grep -rn "def total_of(" .', "./pkg/a.py:3:def total_of(xs):", 0),
             Step("Fix it.", "sed -i '4s/ - 1)/)/' ./pkg/a.py", "", 0),
             Step("Check.", "python3 -m pytest -q", "4 passed", 0)]
    return Episode("t-1", "The test suite fails. Fix the code, not the tests.", steps, success, family="off_by_one")


def test_llm_summariser_retries_an_invalid_skill_md_until_valid():
    model = scripted(BAD_NAME, NO_FRONTMATTER, GOOD)
    text = LLMSummariser(model, attempts=3).summarise(small_episode(), "off-by-one")
    doc = parse(text, folder_name="off-by-one")
    assert doc.name == "off-by-one" and "range bound" in doc.body
    assert model._script == []  # exactly three completions were asked for


def test_llm_summariser_gives_up_with_a_clear_error():
    model = scripted(BAD_NAME, BAD_NAME)
    with pytest.raises(SummaryError, match="no valid SKILL.md for 'off-by-one' after 2 attempts"):
        LLMSummariser(model, attempts=2).summarise(small_episode(), "off-by-one")


def test_llm_summariser_refuses_a_failed_run():
    with pytest.raises(SummaryError, match="only successful runs"):
        LLMSummariser(scripted(GOOD)).summarise(small_episode(success=False), "off-by-one")


def test_llm_generator_proposes_a_revision_after_a_retry():
    parent = check_skill_text(GOOD.split("```markdown\n", 1)[1].rsplit("```", 1)[0], "off-by-one")
    revised = GOOD.replace("3. Drop", "3. Read the failing assertion first.\n4. Drop")
    model = scripted(NO_FRONTMATTER, revised)
    text = LLMGenerator(model).propose("off-by-one", parent, [small_episode(False), small_episode(True)], random.Random(0))
    assert text is not None and text != parent and "Read the failing assertion first." in text
    assert model._script == []


def test_offline_generator_edits_are_valid_and_come_from_successful_steps():
    base = OfflineSummariser().summarise(small_episode(), "off-by-one")
    gen = OfflineGenerator()
    seen = set()
    for seed in range(12):
        text = gen.propose("off-by-one", base, [small_episode()], random.Random(seed))
        if text is None:
            continue
        check_skill_text(text, "off-by-one")
        assert SECTION in text
        seen.add(text)
    assert seen and base not in seen
    assert gen.propose("off-by-one", base, [], random.Random(0)) is not None  # a drop needs no runs


@pytest.fixture(scope="module")
def expert_runs(tmp_path_factory):
    """Real expert trajectories on held-out SkillWorld seeds, run in the Docker sandbox."""
    from skillgraft.agent.runner import run_task
    from skillgraft.skillworld.expert import ExpertModel
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    root = tmp_path_factory.mktemp("expert")
    runs = []
    for family, seed in (("off_by_one", HELDOUT_START + 11), ("wrong_dict_key", HELDOUT_START + 12)):
        wt = generate(family, seed)
        result = run_task(wt.task(), ExpertModel(wt), sandbox="docker", trajectory_path=root / f"{wt.id}.json")
        assert result.success, result.test_output
        runs.append((wt, result))
    return runs


@pytest.mark.docker
def test_offline_summariser_turns_an_expert_run_into_a_recipe_the_store_accepts(expert_runs, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    for wt, result in expert_runs:
        episode = load_episode(result.trajectory_path)
        assert episode.success and len(episode.steps) == 5
        name = wt.family.replace("_", "-")
        text = OfflineSummariser(test_command=wt.task().test).summarise(episode, name)
        traj = store.add_trajectory(result.trajectory_path, wt.id, wt.family, result.exit_status, result.reward,
                                    result.cost, result.steps, {}, [], [])
        version = store.add_version(name, text, origin="summarised", trajectory_id=traj.id)
        assert version.origin == "summarised" and version.trajectory_id == traj.id
        recipe = version.body.split(SECTION, 1)[1]
        # the method stays: the commands the expert chose without being told
        assert "pytest" in recipe and "grep -rn" in recipe and "sed -i" in recipe
        # the particulars go: the buggy module and its function are placeholders, also in the
        # sed address that names the function's block
        assert wt.path not in recipe and wt.planted.name not in recipe
        assert "sed -i '/def NAME(/,/^$/s/" in recipe
        assert "FILE" in recipe and "from the output of step" in recipe
        assert version.frontmatter["metadata"]["family"] == wt.family


@pytest.mark.docker
def test_offline_summariser_keeps_a_hand_written_body_and_replaces_only_its_section(expert_runs):
    wt, result = expert_runs[0]
    episode = load_episode(result.trajectory_path)
    hand = "---\nname: off-by-one\ndescription: Fix bounds.\n---\n# Off by one\n\nRead the failing test first.\n"
    once = OfflineSummariser().summarise(episode, "off-by-one", previous=hand)
    twice = OfflineSummariser().summarise(episode, "off-by-one", previous=once)
    assert once.startswith(hand.rstrip("\n")) and once.count(SECTION) == 1
    assert twice == once  # the same run abstracts to the same recipe: no new version
