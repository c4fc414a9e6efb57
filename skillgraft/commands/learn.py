"""`skillgraft learn` (the online loop, session after session) and `skillgraft refine SKILL`."""
from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skillgraft.commands.common import (HomeOption, JsonOption, RayOption, RetriesOption, SandboxOption, StoreOption,
                                       TuneFromOption, TuneStart, UnstickOption, console, job_exits, settings_from,
                                       tuning_of)
from skillgraft.sandbox.base import SandboxKind
from skillgraft.settings import DEFAULT_MODEL

EXIT_OK = 0
HELP_MODEL = ("hf:<folder>, a model folder name under HOME/models, replay:<replies.json> (scripted replies, in order), "
              "or a litellm model string (default {}).").format(DEFAULT_MODEL)
HELP_ROLE = "'offline' (no model needed) or a litellm model string for a chat model."


class World(str, Enum):
    skillworld = "skillworld"


class SkillMode(str, Enum):
    auto = "auto"
    context = "context"
    parametric = "parametric"
    both = "both"


def register(app: typer.Typer) -> None:
    """Adds `learn` and `refine` to the root app."""
    app.command("learn", epilog=_LEARN_EPILOG)(learn)
    app.command("refine", epilog="Exit codes: 0 done (improved or not), 2 bad input, 3 sandbox unavailable.")(refine)


_LEARN_EPILOG = (
    "Example: skillgraft learn --world skillworld --sessions 5 --tasks-per-session 10. "
    "Exit codes: 0 done, 2 bad input, 3 sandbox unavailable."
)


def learn(
    tasks: Optional[list[Path]] = typer.Argument(None, help="Task YAML files; each session runs them (or --tasks-per-session of them)."),
    world: Optional[World] = typer.Option(None, "--world", help="Draw tasks from a built-in world instead of files (held-out seeds)."),
    family: list[str] = typer.Option([], "--family", help="World families or groups to draw from (learning, seen, skill-only; default: all, the seen and skill-only families). Repeatable."),
    sessions: int = typer.Option(5, "--sessions", min=1, help="How many sessions to run."),
    per_session: Optional[int] = typer.Option(None, "--tasks-per-session", min=1, help="Tasks per session (world default 10)."),
    alpha: float = typer.Option(0.1, "--alpha", min=0.0, max=1.0, help="EMA rate: how far one success moves the global adapter."),
    rank: int = typer.Option(16, "--rank", min=1, help="Rank the global adapter is kept at."),
    cycleqd_every: Optional[int] = typer.Option(None, "--cycleqd-every", min=1, help="Run CycleQD over the global adapter's history every K sessions."),
    no_learning: bool = typer.Option(False, "--no-learning", help="Only run and record: nothing is summarised or merged."),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="First run the same sessions with learning off, to draw both curves."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help=HELP_MODEL),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, help="Sample the agent's replies at this temperature (both runs, learning off and on); a success that greedy decoding never finds is then found now and then, and learned from. Default: greedy (a hosted model: its own default). Each reply's draws are seeded by the conversation, so a run replays."),
    practice: int = typer.Option(0, "--practice", min=0, help="Learning on: run a task the session failed up to N more times, sampled at --practice-temperature, each from other draws, until one run succeeds, and learn from that success. The session's score stays that of its own runs."),
    practice_temperature: float = typer.Option(1.0, "--practice-temperature", min=0.0, help="The temperature practice runs sample at (above 0)."),
    keep_confirmed: bool = typer.Option(True, "--keep-confirmed/--rewrite-confirmed", help="A success whose run followed its skill's latest version, while that version has solved at least half the session runs given it, keeps the version as it is (the default); --rewrite-confirmed summarises every success anew."),
    unstick: bool = UnstickOption,
    hypernet: Optional[Path] = typer.Option(None, "--hypernet", help="Hypernetwork checkpoint that compiles skills into adapters (default: the bundled policy's, if made)."),
    skill_mode: SkillMode = typer.Option(SkillMode.auto, "--skill-mode", help="How skills reach the model; auto: parametric when a hypernetwork and an adapter model are there, else context."),
    tune_steps: int = typer.Option(0, "--tune-steps", min=0, help="Compiled skills: tune each learned skill's adapter N gradient steps on the run it was summarised from, with its text out of the prompt, so that the adapter carries what the run did (about 20 s a skill on 2 cores at N=10). Folded into the global adapter, such adapters made runs of other families apply the learned fix (seen families 5/18 against 18/18): use it with --gate, which refuses those updates (each learned skill's adapter then reaches its own family's runs only), and --tune-anchor-weight, whose adapters for the global adapter the gate accepted (seen families 18/18, as with no adapter; the learning families gained nothing from it). 0: the hypernetwork's adapter as it is."),
    tune_from: TuneStart = TuneFromOption,
    tune_anchor_weight: float = typer.Option(0.0, "--tune-anchor-weight", min=0.0, help="With --tune-steps: the adapter a learned skill adds to the global adapter, which every run gets, is tuned keeping the model's replies on its own solved runs of the anchor tasks (--anchor-task; world: two of each seen family), each step this weight times the KL divergence it causes there. The skill's own runs still get its adapter tuned without them. 0: off."),
    anchor_tasks: list[Path] = typer.Option([], "--anchor-task", help="With --tune-anchor-weight: a task file the model already solves, whose run learned adapters must leave as it is. Repeatable."),
    summariser: str = typer.Option("offline", "--summariser", help=f"Who writes skills from successes: {HELP_ROLE}"),
    generator: str = typer.Option("offline", "--generator", help=f"Who revises weak skills: {HELP_ROLE}"),
    refine_below: Optional[float] = typer.Option(None, "--refine-below", min=0.0, max=1.0, help="Refine a skill whose success rate in a session is below this (needs validation tasks)."),
    validation: list[Path] = typer.Option([], "--validation", help="Held-out task files for the gate, refinement and CycleQD (world: drawn automatically, two per learned family and one per seen family)."),
    gate: bool = typer.Option(False, "--gate", help="Keep a new skill version (in the form runs get it: in context or compiled beside the global adapter) and commit a new global version (the first one too, against no adapter) only if each does not score below what runs now on validation."),
    sandbox: SandboxKind = SandboxOption,
    image: Optional[str] = typer.Option(None, "--image", help="Sandbox image tag (Docker only)."),
    seed: int = typer.Option(0, "--seed", help="Which held-out world tasks: the same seed gives the same tasks."),
    workers: int = typer.Option(1, "--workers", min=1, help="A session's tasks run this many at a time, each wave with what the ones before it taught (with --ray: workers on the cluster)."),
    ray: Optional[str] = RayOption,
    retries: int = RetriesOption,
    curve: Optional[Path] = typer.Option(None, "--curve", help="Where to write the learning-curve PNG (default HOME/learning-curve-<time>.png)."),
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
    json_out: bool = JsonOption,
) -> None:
    """Let the agent learn across sessions: run tasks with what it has learned, and learn from every success.

    Per task: retrieve skills, compile them (cached), join them with the global adapter, run the
    agent in a sandbox, record the run. Per verified success: summarise the run into a new skill
    version (unless the run followed the skill's latest version and that version has solved at
    least half the session runs given it: then the version stands), compile it and fold it into
    the global adapter by an exact low-rank EMA. Everything
    is kept in the store, so the next `learn` carries on where this one stopped. Ends with a
    table per session and a learning-curve picture (learning on against off).
    """
    from skillgraft.evolve.learn.curve import SessionPoint, plot_curves
    from skillgraft.jobs.cluster import ClusterOptions, join_cluster
    from skillgraft.jobs.learning import LearnOptions, agent_roles, plan_sessions, run_labels
    from skillgraft.jobs.learning import learn as learn_job

    settings = settings_from(home, store)
    options = LearnOptions(tasks or [], world.value if world else None, family, sessions, per_session, alpha, rank,
                           cycleqd_every, not no_learning, baseline, model or DEFAULT_MODEL, hypernet, skill_mode.value,
                           summariser, generator, refine_below, validation, gate, sandbox, image, seed,
                           ray=ray, workers=workers, retries=retries, temperature=temperature, practice=practice,
                           practice_temperature=practice_temperature, keep_confirmed=keep_confirmed,
                           unstick=unstick, anchors=anchor_tasks, anchor_weight=tune_anchor_weight)
    with job_exits():
        plan, held_out = plan_sessions(options)
        join_cluster(settings, ClusterOptions(options.ray))  # before the model is built here
        roles = agent_roles(settings, options.model, options.hypernet, options.skill_mode, options.summariser, options.generator,
                            options.temperature, tuning_of(tune_steps, tune_from, tune_anchor_weight))
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, disable=json_out, transient=True) as progress:
            bar = progress.add_task("learning", total=sum(len(s) for s in plan) * len(run_labels(options)))
            where = {"session": "learning", "search": "", "cluster": ""}

            def show(**part: str) -> None:
                where.update(part)
                progress.update(bar, description=where["session"] + where["search"] + where["cluster"])

            reports = learn_job(
                settings, options, roles, plan, held_out,
                on_session=lambda label, i: show(session=f"learning {label} · session {i}/{len(plan)}", search=""),
                on_outcome=lambda: progress.advance(bar),
                on_cluster=lambda tally: show(cluster=f" · {tally.describe()}"),
                on_search=lambda done, of: show(search=f" · CycleQD {done}/{of} generations"))

    points = {label: [SessionPoint(i + 1, r.successes, len(r.outcomes)) for i, r in enumerate(rs)] for label, rs in reports.items()}
    out = curve or settings.home / f"learning-curve-{datetime.now():%Y%m%d-%H%M%S}.png"
    plot_curves({f"learning {k}": v for k, v in points.items()}, out, title=f"{roles.model.name}: success per session")
    if json_out:
        console.print_json(json.dumps({"curve": str(out), "sessions": {k: [r.summary() | {"session_id": r.session_id} for r in rs]
                                                                     for k, rs in reports.items()}}))
    else:
        console.print(_table(points, reports))
        for notes in (n for rs in reports.values() for r in rs for n in r.notes):
            console.print(f"[dim]•[/] {notes}")
        console.print(f"learning curve: [bold]{out}[/]")
    raise typer.Exit(EXIT_OK)


def _table(points, reports) -> Table:
    from skillgraft.evolve.intervals import rate_text

    table = Table(title="Success per session (95% Wilson interval)")
    table.add_column("session", justify="right")
    for label in points:
        table.add_column(f"learning {label}", justify="right")
    practised = "on" in reports and any(o.practice for r in reports["on"] for o in r.outcomes)
    if "on" in reports:
        table.add_column("skills learned", justify="right")
        table.add_column("global version", justify="right")
    if practised:
        table.add_column("solved in practice", justify="right")
    for i in range(max(len(v) for v in points.values())):
        row = [str(i + 1)]
        for label, pts in points.items():
            row.append(rate_text(pts[i].successes, pts[i].episodes))
        if "on" in reports:
            r = reports["on"][i]
            row.append(str(sum(1 for o in r.outcomes if o.learned)))
            last = [o.global_after or o.global_version for o in r.outcomes if (o.global_after or o.global_version)]
            row.append(str(last[-1]) if last else "-")
        if practised:
            row.append(str(r.solved_in_practice))
        table.add_row(*row)
    return table


def refine(
    skill: str = typer.Argument(..., help="Name of the skill in the store to refine."),
    tasks: list[Path] = typer.Option(..., "--tasks", help="Task files for minibatches (the skill should apply to them). Repeatable."),
    validation: list[Path] = typer.Option([], "--validation", help="Held-out task files that judge candidates (default: half of --tasks)."),
    generator: str = typer.Option("offline", "--generator", help=f"Who proposes revisions: {HELP_ROLE}"),
    rounds: int = typer.Option(4, "--rounds", min=1, help="Proposals to try."),
    minibatch: int = typer.Option(3, "--minibatch", min=1, help="Training tasks per proposal."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help=HELP_MODEL),
    hypernet: Optional[Path] = typer.Option(None, "--hypernet", help="Hypernetwork checkpoint (parametric and both modes)."),
    skill_mode: SkillMode = typer.Option(SkillMode.auto, "--skill-mode", help="How the candidate skill reaches the model."),
    sandbox: SandboxKind = SandboxOption,
    image: Optional[str] = typer.Option(None, "--image", help="Sandbox image tag (Docker only)."),
    seed: int = typer.Option(0, "--seed", help="Seeds parent and minibatch draws."),
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
    json_out: bool = JsonOption,
) -> None:
    """Improve a skill's text with a generator–verifier loop; keep a revision only if it is strictly better.

    Each round draws a parent from the Pareto front of the candidates' per-task scores, runs it on
    a minibatch, lets the generator revise it from those runs, and scores the revision on the
    minibatch and then on the validation tasks. Kept revisions become new versions (origin
    "refined") with their scores; `skillgraft skills history SKILL` shows them.
    """
    from skillgraft.jobs.learning import RefineOptions, refine_skill

    settings = settings_from(home, store)
    options = RefineOptions(skill, tasks, validation, generator, rounds, minibatch, model or DEFAULT_MODEL, hypernet,
                            skill_mode.value, sandbox, image, seed)
    with job_exits(), console.status(f"refining {skill}…", spinner="dots") if not json_out else _nothing():
        result = refine_skill(settings, options)
    if json_out:
        console.print_json(json.dumps({
            "skill": skill, "improved": result.improved, "start_score": result.start_score, "best_score": result.best.mean,
            "written_version_ids": result.written,
            "attempts": [{"parent": a.parent, "kept": a.kept, "reason": a.reason, "minibatch": a.minibatch,
                          "validation": a.validation} for a in result.attempts],
        }))
    else:
        table = Table(title=f"Refining {skill}")
        for col in ("#", "parent", "minibatch", "validation", "kept", "why"):
            table.add_column(col)
        for i, a in enumerate(result.attempts, 1):
            val = f"{sum(a.validation.values()) / len(a.validation):.2f}" if a.validation else "-"
            table.add_row(str(i), str(a.parent), f"{sum(a.minibatch.values()):g}/{len(a.minibatch)}", val,
                          "[green]yes[/]" if a.kept else "no", a.reason)
        console.print(table)
        console.print(result.describe())
    raise typer.Exit(EXIT_OK)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
