"""`skillgraft ui` in a real headless chromium, over a store filled by the real code paths: an
import, learning sessions on and off (adapters compiled into a real tiny Llama, EMA into the
global adapter), a rollback, a run of the replay model through the CLI, and a CycleQD run."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from learn_support import PoolExpert, parts  # noqa: F401  (parts is a fixture)
from skillgraft.agent.prompts import assistant_reply
from skillgraft.cli import app
from skillgraft.skills.store import Store
from skillgraft.ui.serve import serving
from ui_support import browser, follow

pytestmark = [pytest.mark.docker, pytest.mark.browser]

SKILLS = Path(__file__).resolve().parents[1] / "skillworld" / "skills"
ADDED_LINE = "Check the loop's last index as well."


def _replay_run(root: Path, home: Path) -> None:
    """A run whose first command floods its output, so the page has an elision to show."""
    task = root / "count.yaml"
    task.write_text(yaml.safe_dump({
        "id": "make-three", "repo": {"files": {"calc.py": "def three():\n    return 2\n"}},
        "instruction": "three() must return 3.", "test": "python3 -c 'import calc; assert calc.three() == 3'",
        "test_files": [], "limits": {"steps": 4}}))
    replies = root / "replies.json"
    replies.write_text(json.dumps([
        assistant_reply("See how much there is.", "seq 1 300000"),
        assistant_reply("Fix the value.", "sed -i 's/return 2/return 3/' calc.py"),
        assistant_reply("Done.", "submit")]))
    result = CliRunner().invoke(app, ["run", str(task), "--model", f"replay:{replies}", "--home", str(home)])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def filled(parts, tmp_path_factory):  # noqa: F811
    from cycleqd_support import Rounded, store_with_experts
    from skillgraft.agent.models.hf_model import HFModel
    from skillgraft.evolve.cycleqd import CycleQDConfig, merge_and_promote, run_cycleqd
    from skillgraft.evolve.learn.global_adapter import EmaConfig
    from skillgraft.evolve.learn.loop import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    root = tmp_path_factory.mktemp("ui")
    home = root / "home"
    imported = CliRunner().invoke(app, ["skills", "import", str(SKILLS), "--home", str(home)])
    assert imported.exit_code == 0, imported.output
    store = Store.at(home)
    first = store.latest_version("fix-off-by-one-recipe")
    store.add_version("fix-off-by-one-recipe", first.body + f"\n{ADDED_LINE}\n", parent_id=first.id)

    base, compiler = parts
    worlds = [generate("off_by_one", HELDOUT_START + 31), generate("wrong_operator", HELDOUT_START + 32)]
    tasks = [w.task() for w in worlds]
    model = PoolExpert(HFModel(base, max_new_tokens=8), worlds)
    # every success summarised (the runs follow the imported skills, which would otherwise stand
    # confirmed), so the store holds learned versions for the pages to show
    on = LearnConfig(skill_mode="both", ema=EmaConfig(alpha=0.5, rank=8), keep_confirmed=False)
    for i in (1, 2):
        Learner(store, model, compiler, OfflineSummariser(), on, root / f"on{i}").run_session(tasks)
    Learner(store, model, compiler, OfflineSummariser(), LearnConfig(skill_mode="both", learning=False),
            root / "off").run_session(tasks)
    store.rollback_global(1)
    _replay_run(root, home)

    qd_store, world, ids = store_with_experts(root / "qd")
    qd_store.close()
    scores = Rounded(world.evaluator)  # scores in quarters: elites tie at the top, the soup starts from their mean
    result = run_cycleqd(store, _copy_experts(store, root / "qd", ids), ["alpha", "beta", "gamma"], scores,
                         CycleQDConfig(generations=4, children_per_generation=2, seed=1, merge_scales=(0.2,), soup_size=4))
    merge_and_promote(store, result, scores, scores, global_name="synthetic-global")
    yield store
    store.close()


def _copy_experts(store: Store, qd_root: Path, ids: list[int]) -> list[int]:
    """The synthetic world's expert adapters, added to the ui's store."""
    source = Store(f"sqlite:///{qd_root / 'store.db'}", qd_root / "artifacts")
    copied = []
    for i in ids:
        row = source.adapter(i)
        copied.append(store.add_adapter(source.adapter_path(i), row.kind, row.base_fingerprint, row.rank, row.alpha,
                                        list(row.target_modules), dict(row.provenance), name=row.name).id)
    source.close()
    return copied


@pytest.fixture(scope="module")
def site(filled):
    from skillgraft.ui import build_app

    with serving(build_app(filled)) as address:
        yield address


@pytest.fixture(scope="module")
def driver():
    with browser() as d:
        yield d


SHOTS = Path(os.environ.get("SKILLGRAFT_SCREENSHOTS", "")) if os.environ.get("SKILLGRAFT_SCREENSHOTS") else None


def shoot(driver, name: str, tmp_path: Path) -> None:
    """Every page a test looks at is saved as a picture (beside the test, and where asked)."""
    for folder in filter(None, (tmp_path, SHOTS)):
        folder.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(folder / f"{name}.png"))
        assert (folder / f"{name}.png").stat().st_size > 10_000


def texts(driver, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def test_skills_list_search_lineage_and_diff(filled, site, driver, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get(site + "/skills")
    total, names = filled.skill_names(0, 50)
    assert texts(driver, "a.skill-link") == names
    assert f"{total} in all" in driver.find_element(By.CSS_SELECTOR, ".pager").text
    shoot(driver, "skills", tmp_path)

    query = "the loop stops one element early"
    box = driver.find_element(By.ID, "search")
    box.clear()
    box.send_keys(query)
    follow(driver, driver.find_element(By.ID, "search-go"))
    assert texts(driver, "a.skill-link") == [h.skill_name for h in filled.search(query, k=50)]

    follow(driver, driver.find_element(By.LINK_TEXT, "fix-off-by-one-recipe"))
    versions = filled.versions("fix-off-by-one-recipe")
    assert len(driver.find_elements(By.CSS_SELECTOR, "svg.lineage a.node")) == len(versions) >= 2
    Select(driver.find_element(By.ID, "diff-a")).select_by_visible_text("v1")
    Select(driver.find_element(By.ID, "diff-b")).select_by_visible_text(f"v{versions[-1].number}")
    follow(driver, driver.find_element(By.ID, "diff-go"))
    added = driver.find_elements(By.CSS_SELECTOR, "#diff table.diff .diff_add")
    assert any(ADDED_LINE in e.text for e in added)
    shoot(driver, "skill", tmp_path)

    driver.get(site + "/skills/no-such-skill")
    assert "no skill named 'no-such-skill'" in driver.find_element(By.ID, "missing").text


def test_a_learned_skill_links_to_the_run_that_taught_it_and_its_adapter(filled, site, driver, tmp_path):
    from selenium.webdriver.common.by import By

    learned = [v for s in filled.skills() for v in filled.versions(s.name) if v.origin == "summarised"]
    assert learned, "the learning sessions summarised at least one success"
    version = learned[0]
    driver.get(site + f"/skills/{version.skill_name}")
    article = driver.find_element(By.ID, f"v{version.number}")
    follow(driver, article.find_element(By.CSS_SELECTOR, "a.taught-by"))
    assert driver.current_url.endswith(f"/trajectories/{version.trajectory_id}")
    assert f"{version.skill_name}@v{version.number}" in driver.find_element(By.ID, "had").text

    compiled = filled.adapters(skill_version_ids=[version.id])
    driver.get(site + f"/skills/{version.skill_name}")
    links = driver.find_element(By.ID, f"v{version.number}").find_elements(By.CSS_SELECTOR, "a.compiled")
    assert sorted(int(a.get_attribute("href").rsplit("/", 1)[1]) for a in links) == sorted(a.id for a in compiled)


def test_global_adapter_history_provenance_and_norms(filled, site, driver, tmp_path):
    from selenium.webdriver.common.by import By

    from skillgraft.hypernet.peft_io import load_adapter

    driver.get(site + "/adapters")
    history = filled.global_history()
    rows = driver.find_elements(By.CSS_SELECTOR, "#global-history tbody tr")
    assert len(rows) == len(history) >= 3
    assert "rollback to v1" in rows[0].text and "rollback" in rows[0].get_attribute("class")
    ema = history[0]
    assert ema.provenance["method"] == "ema"
    sv = filled.version(ema.provenance["skill_version_id"])
    assert f"{sv.skill_name}@v{sv.number}" in rows[-1].text and f"{ema.provenance['alpha']:.3f}" in rows[-1].text
    follow(driver, rows[-1].find_element(By.CSS_SELECTOR, "a.adapter-link"))
    assert driver.find_element(By.CSS_SELECTOR, "#norms img.chart").get_attribute("src").startswith("data:image/svg+xml")
    delta, _ = load_adapter(filled.adapter_path(ema.id))
    assert len(driver.find_elements(By.CSS_SELECTOR, "#norms + details tr")) == len(delta)
    assert json.loads(driver.find_element(By.ID, "provenance").text) == ema.provenance
    shoot(driver, "adapter", tmp_path)


def test_runs_listed_and_one_run_step_by_step(filled, site, driver, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get(site + "/trajectories")
    rows = filled.trajectories(limit=50)
    assert texts(driver, "a.run-link") == [str(r.id) for r in rows]
    replay = next(r for r in rows if r.task_id == "make-three")
    follow(driver, driver.find_element(By.LINK_TEXT, str(replay.id)))
    document = json.loads(filled.trajectory_path(replay).read_text())
    replies = [m for m in document["messages"] if m["role"] == "assistant"]
    steps = driver.find_elements(By.CSS_SELECTOR, "#steps li.step")
    assert len(steps) == len(replies) == 3
    assert steps[0].find_element(By.CSS_SELECTOR, "pre.command").text == "$ seq 1 300000"
    assert "elided from the middle" in steps[0].find_element(By.CSS_SELECTOR, ".note.elision").text
    assert "return 3" in " ".join(texts(driver, "#patch span.add"))
    assert driver.find_element(By.ID, "verdict").text.startswith("SOLVED" if replay.reward > 0 else "NOT SOLVED")
    assert "passed" in driver.find_element(By.ID, "test-result").text
    shoot(driver, "run", tmp_path)

    session = filled.sessions(kind="learn")[0]
    driver.get(site + f"/trajectories?session={session.id}")
    assert texts(driver, "a.run-link") == [str(r.id) for r in filled.trajectories(session_id=session.id)]


def test_learning_curves_on_and_off(filled, site, driver, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get(site + "/sessions")
    assert driver.find_element(By.CSS_SELECTOR, "#curve img.chart").get_attribute("src").startswith("data:image/svg+xml")
    shown = {row.find_element(By.TAG_NAME, "td").text: [td.text for td in row.find_elements(By.CSS_SELECTOR, "td.num")]
             for row in driver.find_elements(By.CSS_SELECTOR, "#curve-points tbody tr")}
    expected: dict[str, list[str]] = {}
    for s in filled.sessions(kind="learn"):
        label = "learning " + ("on" if s.config["learning"] else "off")
        expected.setdefault(label, []).append(f"{s.summary['successes']}/{s.summary['episodes']}")
    assert shown == expected and set(shown) == {"learning on", "learning off"}
    assert len(driver.find_elements(By.CSS_SELECTOR, "#sessions a.session-link")) == len(filled.sessions())
    shoot(driver, "sessions", tmp_path)


def test_cycleqd_archives_per_generation_and_the_final_merge(filled, site, driver, tmp_path):
    from selenium.webdriver.common.by import By

    from skillgraft.evolve.cycleqd import archives_at

    run = filled.qd_runs()[-1]
    driver.get(site + "/cycleqd")
    follow(driver, driver.find_element(By.CSS_SELECTOR, f"a.qd-link[href='/cycleqd/{run.id}']"))
    for generation in (run.generation, 0):
        if generation != run.generation:
            follow(driver, driver.find_element(By.CSS_SELECTOR, "#generations").find_element(By.LINK_TEXT, str(generation)))
        assert driver.find_element(By.CSS_SELECTOR, "#generations b.current").text == str(generation)
        archives = archives_at(run.state, generation)
        maps = driver.find_elements(By.CSS_SELECTOR, "#heatmaps figure")
        assert [m.find_element(By.TAG_NAME, "b").text for m in maps] == run.state["tasks"]
        for figure, task in zip(maps, run.state["tasks"]):
            assert f"{len(archives[task])} elites" in figure.text
            cells = figure.find_elements(By.CSS_SELECTOR, "svg.archive a.cell")
            shown = {(c[0], c[1]) for c in archives[task].elites}  # three tasks: two coordinates, nothing hidden
            assert len(cells) == len(shown)
            linked = {c.get_dom_attribute("href").rsplit("/", 1)[1] for c in cells}
            assert linked == {str(e.adapter_id) for e in archives[task].elites.values()}
        if generation == run.generation:
            shoot(driver, "cycleqd", tmp_path)
    merge = run.state["merge"]
    verdict = driver.find_element(By.ID, "merge-verdict").text
    assert verdict.startswith("Promoted" if merge["accepted"] else "Not promoted") and merge["reason"] in verdict
    scores = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
              for r in driver.find_elements(By.CSS_SELECTOR, "#merge-scores tbody tr")}
    assert scores == {t: f"{v:.3f}" for t, v in merge["candidate_scores"].items()}
    scales = driver.find_element(By.ID, "merge-scales").text
    assert f"scaled by {merge['scale']}" in scales
    assert all(f"{s} → {v:.3f}" in scales for s, v in merge["scale_scores"].items())
    made_of = driver.find_element(By.ID, "merge-parts")
    assert [a.text for a in made_of.find_elements(By.TAG_NAME, "a")] == [f"#{p['adapter_id']}" for p in merge["parts"]]
    assert all(f"× {p['weight']:.3f}" in made_of.text for p in merge["parts"])
    start = merge["soup_start"]
    tie = driver.find_element(By.ID, "merge-soup-start")
    assert start["from"] == "tied elites" and f"{len(start['tied'])} elites tied" in tie.text and "started from that mean" in tie.text
    assert [a.text for a in tie.find_elements(By.TAG_NAME, "a")] == [f"#{i}" for i in start["tied"]]
    if merge["soup"]:
        soup = driver.find_element(By.ID, "merge-soup").text
        for step in merge["soup"]:
            assert (f"#{step['adapter_id']} added at {step['kept']}" in soup) == (step["kept"] is not None)


def test_a_token_is_asked_of_every_request_when_given(filled, driver):
    from selenium.webdriver.common.by import By

    from skillgraft.ui import build_app

    with serving(build_app(filled, token="s3cret-token")) as address:
        for path in ("/skills", "/static/style.css", "/adapters/1"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(address + path)
            assert refused.value.code == 401
        bearer = urllib.request.Request(address + "/sessions", headers={"Authorization": "Bearer s3cret-token"})
        assert urllib.request.urlopen(bearer).status == 200
        driver.get(address + "/skills?token=s3cret-token")
        assert driver.current_url == address + "/skills" and driver.find_element(By.TAG_NAME, "h1").text == "Skills"
        driver.get(address + "/sessions")  # the cookie carries it from here on
        assert driver.find_element(By.TAG_NAME, "h1").text == "Sessions"
