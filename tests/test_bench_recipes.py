"""bench_recipes: each skill's stored text beside the one the summariser writes now from the same run."""
from __future__ import annotations

import json

from bench.bench_recipes import plot_forms, recipes
from skillgraft.agent import prompts
from skillgraft.evolve.learn.episode import load_episode
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
from skillgraft.skills.store import Store

STEPS = [
    ("Run the tests.", "COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2",
     "FAILED tests/test_a.py::test_LIMIT - AssertionError: assert 'south' == 'weekly'\n1 failed in 0.01s"),
    ("Find LIMIT.", 'grep -rn "LIMIT =" .', './a.py:4:LIMIT = "south"'),
    ('The constant LIMIT is "south".', "sed -i '/LIMIT =/,/^$/s/south/weekly/' ./a.py", ""),
    ("Check.", "python3 -m pytest -q", "1 passed"),
    ("Done.", "submit", None),
]


def test_a_summarised_skill_is_written_again_from_the_run_it_came_from(tmp_path):
    messages = [{"role": "system", "content": prompts.system_prompt()},
                {"role": "user", "content": prompts.instance_prompt("The test suite fails. Fix the code.")}]
    for thought, command, output in STEPS:
        messages.append({"role": "assistant", "content": prompts.assistant_reply(thought, command)})
        if output is not None:
            messages.append({"role": "user", "content": prompts.observation(output, 0)})
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"format": "skillgraft-trajectory-1", "messages": messages,
                               "info": {"task": {"id": "w1", "family": "wrong_word"}, "success": True}}))
    fresh = OfflineSummariser(test_command="python3 -m pytest -q").summarise(load_episode(run), "wrong-word")
    # the text an earlier summariser wrote from that run: the edit step without its reason
    older = fresh.replace('3. The constant NAME is "OTHER_NAME": `sed', "3. Run: `sed")
    assert older != fresh
    with Store.at(tmp_path / "store", embedder=lambda: None) as store:
        trajectory = store.add_trajectory(run, "w1", "wrong_word", "Submitted", 1.0, 0.0, 5, {}, [], [])
        store.add_version("wrong-word", older, "summarised", trajectory_id=trajectory.id)
        store.add_version("by-hand", "---\nname: by-hand\ndescription: Written by a person.\n---\nSteps.\n")
        found = recipes(store)
    # the skill written by hand came from no run and is left out
    assert [(family, version.skill_name) for family, version, _ in found] == [("wrong_word", "wrong-word")]
    _, version, rewritten = found[0]
    assert version.text == older and version.trajectory_id == trajectory.id and rewritten == fresh


def test_the_bars_are_drawn_for_families_that_lack_a_form(tmp_path):
    # the second family has no stored recipe: it gets no bar for it, and the plot is drawn all the same
    cells = {"wrong_word": {"none": (2, 10), "stored": (7, 10)}, "wrong_sign": {"none": (1, 10)}}
    png = plot_forms(cells, tmp_path / "bars" / "recipes.png", "two families")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
