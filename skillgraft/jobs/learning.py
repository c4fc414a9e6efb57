"""Learning across sessions (`skillgraft learn`) and refining one skill (`skillgraft refine`).

    reports = learn(settings, LearnOptions(world="skillworld", sessions=3))
    result = refine_skill(settings, RefineOptions("fix-imports", tasks=[...]))
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.agent.loadout import SkillMode
from skillgraft.agent.models.base import AdapterModel, Model, ModelError, SamplingModel
from skillgraft.agent.task import Task, TaskError, load_task
from skillgraft.jobs.errors import BAD_INPUT, NO_SANDBOX, JobError
from skillgraft.sandbox.base import SandboxKind, SandboxUnavailable
from skillgraft.settings import DEFAULT_MODEL, Settings

if TYPE_CHECKING:
    from skillgraft.agent.cluster.pool import Tally
    from skillgraft.agent.episodes import EpisodeRunner
    from skillgraft.evolve.learn.loop import SessionReport
    from skillgraft.evolve.learn.propose import Generator
    from skillgraft.evolve.learn.refine import RefineResult
    from skillgraft.evolve.learn.summarise import Summariser
    from skillgraft.agent.seams import SkillCompiler
    from skillgraft.hypernet.tune import Tuning

AUTO = "auto"  # a skill mode: parametric when a hypernetwork and an adapter model are there, else context


@dataclass(frozen=True)
class AgentRoles:
    """The model that acts, the compiler of its skills, and who writes and revises skill text."""

    model: Model
    compiler: SkillCompiler | None
    mode: SkillMode
    summariser: Summariser
    generator: Generator


def agent_roles(settings: Settings, model: str, hypernet: Path | None, skill_mode: str, summariser: str,
                generator: str, temperature: float | None = None, tuning: Tuning | None = None) -> AgentRoles:
    """`tuning`: each learned skill's compiled adapter is tuned on the run it was summarised from
    (hypernet.tune)."""
    from skillgraft.evolve.learn.roles import make_compiler, make_generator, make_summariser
    from skillgraft.model_defaults import hypernet_for, load_model

    try:
        agent_model = load_model(settings, model, temperature=temperature)
        adapter_ok = isinstance(agent_model, AdapterModel)
        ckpt = hypernet_for(settings, model, hypernet) if adapter_ok and skill_mode != SkillMode.context.value else None
        compiler = make_compiler(ckpt, agent_model, tuning)
        mode = (SkillMode.parametric if compiler is not None else SkillMode.context) if skill_mode == AUTO else SkillMode(skill_mode)
        if mode.compiled and compiler is None:
            why = "the model takes no adapters" if not adapter_ok else "no hypernetwork (give --hypernet)"
            raise ValueError(f"skill mode {mode.value!r} needs compiled adapters, but {why}; use --skill-mode context")
        if tuning is not None and not mode.compiled:
            raise ValueError("--tune-steps tunes compiled skills: it needs skill mode parametric or both, and a model "
                             "that takes adapters")
        return AgentRoles(agent_model, compiler, mode, make_summariser(summariser), make_generator(generator))
    except (ModelError, ValueError, FileNotFoundError) as exc:
        raise JobError(str(exc), BAD_INPUT) from exc


@dataclass(frozen=True)
class LearnOptions:
    tasks: Sequence[Path] = ()
    world: str | None = None  # "skillworld": held-out world tasks instead of task files
    families: Sequence[str] = ()
    sessions: int = 5
    per_session: int | None = None
    alpha: float = 0.1
    rank: int = 16
    cycleqd_every: int | None = None
    learning: bool = True
    baseline: bool = True  # first the same sessions with learning off
    model: str = DEFAULT_MODEL
    hypernet: Path | None = None
    skill_mode: str = AUTO
    summariser: str = "offline"
    generator: str = "offline"
    refine_below: float | None = None
    validation: Sequence[Path] = ()
    gate: bool = False
    sandbox: SandboxKind = SandboxKind.docker
    image: str | None = None
    seed: int = 0
    ray: str | None = None  # a Ray cluster's address: the sessions' episodes run on its workers
    workers: int = 1  # a session's tasks run this many at a time (threads here, or workers with ray)
    retries: int = 2  # with ray: more tries of an episode whose worker died
    temperature: float | None = None  # the agent model's sampling temperature (None: greedy)
    practice: int = 0  # learning on: more runs of a failed task, sampled, until one succeeds
    practice_temperature: float = 1.0
    keep_confirmed: bool = True  # a success that followed a skill version that holds up keeps it
    unstick: bool = True  # go back and redraw when a command is proposed again on the same files (agent.unstick)
    anchors: Sequence[Path] = ()  # tasks whose runs a tuning with an anchor weight keeps (world: drawn)
    anchor_weight: float = 0.0  # the tuning's anchor weight (its Tuning carries it; here: whether to draw anchors)


def plan_sessions(options: LearnOptions) -> tuple[list[list[Task]], list[Task]]:
    """The tasks of each session, and the held-out validation tasks."""
    from skillgraft.evolve.learn import LearnConfig
    from skillgraft.evolve.learn.schedule import split_sessions, world_sessions, world_validation

    if options.learning and options.alpha <= 0:
        raise JobError("--alpha must be above 0 (0 would learn nothing; use --no-learning)", BAD_INPUT)
    try:  # the learner's own checks of the practice settings, before anything runs
        LearnConfig(practice=options.practice, practice_temperature=options.practice_temperature)
    except ValueError as exc:
        raise JobError(f"--practice: {exc}", BAD_INPUT) from exc
    if options.anchors and not options.anchor_weight:
        raise JobError("--anchor-task gives the tuning anchors: give --tune-anchor-weight too", BAD_INPUT)
    if bool(options.tasks) == (options.world is not None):
        raise JobError("give task files or --world skillworld (one of the two)", BAD_INPUT)
    try:
        if options.world is not None:
            from skillgraft.skillworld.families import SEEN, resolve
            from skillgraft.skillworld.generate import HELDOUT_START, generate

            fams = resolve(list(options.families) or None)

            def make(family: str, seed: int) -> Task:
                return generate(family, seed).task()

            first = HELDOUT_START + 10_000 * options.seed
            plan = world_sessions(fams, options.sessions, options.per_session or 10, first, make, shuffle_seed=options.seed)
            held_out = world_validation(fams, SEEN, first + 5_000, 2, 1, make)
        else:
            plan = split_sessions([load_task(p) for p in options.tasks], options.sessions, options.per_session)
            held_out = []
        anchor_tasks(options)  # a bad anchor file is refused before anything runs
        return plan, [load_task(p) for p in options.validation] or held_out
    except (TaskError, KeyError, ValueError) as exc:
        raise JobError(str(exc), BAD_INPUT) from exc


def anchor_tasks(options: LearnOptions) -> list[Task]:
    """The tasks whose runs learned adapters keep as they are (evolve.learn.anchors): the anchor
    files, or in a world two held-out tasks of each seen family on seeds no session or validation
    task comes from; none without an anchor weight."""
    if not options.anchor_weight:
        return []
    if options.anchors or options.world is None:
        return [load_task(p) for p in options.anchors]
    from skillgraft.skillworld.families import SEEN
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    first = HELDOUT_START + 10_000 * options.seed + 7_000
    return [generate(f, first + i).task() for f in SEEN for i in range(2)]


def run_labels(options: LearnOptions) -> list[str]:
    """"off" (learning off: the baseline, or the only run with --no-learning), then "on", as asked."""
    return (["off"] if (not options.learning or options.baseline) else []) + (["on"] if options.learning else [])


def learn(settings: Settings, options: LearnOptions, roles: AgentRoles, plan: Sequence[Sequence[Task]],
          held_out: Sequence[Task], *, on_session: Callable[[str, int], None] = lambda label, number: None,
          on_outcome: Callable[[], None] = lambda: None,
          on_cluster: Callable[[Tally], None] = lambda tally: None,
          on_search: Callable[[int, int], None] = lambda done, generations: None) -> dict[str, list[SessionReport]]:
    """Runs the sessions with learning off (the baseline) and on, as the options ask; the reports by "off"/"on".
    `on_search(done, generations)` follows a periodic CycleQD search (0: started)."""
    from skillgraft.jobs.cluster import ClusterOptions, cluster_episodes

    if options.learning and options.practice and not isinstance(roles.model, SamplingModel):
        raise JobError(f"--practice samples the model's runs, and {roles.model.name} cannot sample", BAD_INPUT)
    cluster = ClusterOptions(options.ray, options.workers, options.retries, options.sandbox, options.image)
    with cluster_episodes(settings, cluster, options.model, on_cluster, temperature=options.temperature) as remote:
        episodes = remote or (_local_episodes(settings, options) if options.workers > 1 else None)
        try:
            return _sessions(settings, options, roles, plan, held_out, episodes, on_session, on_outcome, on_search)
        finally:
            if episodes is not None and episodes is not remote:
                episodes.close()


def _local_episodes(settings: Settings, options: LearnOptions) -> EpisodeRunner:
    from skillgraft.agent.episodes import LocalEpisodes
    from skillgraft.model_defaults import load_model

    return LocalEpisodes(partial(load_model, settings, options.model, progress=False, temperature=options.temperature),
                         options.workers,
                         sandbox=options.sandbox.value, image=options.image)


def _sessions(settings: Settings, options: LearnOptions, roles: AgentRoles, plan: Sequence[Sequence[Task]],
              held_out: Sequence[Task], episodes: EpisodeRunner | None, on_session: Callable[[str, int], None],
              on_outcome: Callable[[], None], on_search: Callable[[int, int], None]) -> dict[str, list[SessionReport]]:
    from skillgraft.agent.unstick import Unstick
    from skillgraft.evolve.learn import EmaConfig, LearnConfig, Learner, Refiner
    from skillgraft.evolve.learn.periodic import cycleqd_every
    from skillgraft.evolve.learn.refine import AgentVerifier
    from skillgraft.skills.store import Store

    def config_for(learning: bool) -> LearnConfig:
        return LearnConfig(learning=learning, skill_mode=roles.mode.value,
                           ema=EmaConfig(alpha=options.alpha or 1.0, rank=options.rank), sandbox=options.sandbox.value,
                           image=options.image, gate=options.gate, refine_below=options.refine_below,
                           cycleqd_every=options.cycleqd_every, practice=options.practice,
                           practice_temperature=options.practice_temperature,
                           keep_confirmed=options.keep_confirmed, unstick=Unstick() if options.unstick else None)

    runs = [(label, config_for(label == "on")) for label in run_labels(options)]
    anchors = anchor_tasks(options)
    store = Store(settings.store_url, settings.artifacts)
    reports: dict[str, list[SessionReport]] = {}
    try:
        for label, config in runs:
            refiner = None
            if config.learning and config.refine_below is not None:
                verifier = AgentVerifier(store, roles.model, roles.compiler, skill_mode=config.skill_mode,
                                         sandbox=config.sandbox, image=config.image)
                refiner = Refiner(store, roles.generator, verifier)
            periodic = (cycleqd_every(held_out, lambda: roles.model, sandbox=config.sandbox, image=config.image,
                                      on_generation=on_search) if config.cycleqd_every else None)
            learner = Learner(store, roles.model, roles.compiler, roles.summariser, config, settings.cache / "learn",
                              validation=held_out, refiner=refiner, periodic=periodic, episodes=episodes,
                              anchors=anchors)
            reports[label] = []
            for number, tasks in enumerate(plan, 1):
                on_session(label, number)
                reports[label].append(learner.run_session(tasks, on_outcome=lambda _o: on_outcome(), label=f"learning-{label}"))
    except SandboxUnavailable as exc:
        raise JobError(str(exc), NO_SANDBOX) from exc
    except ModelError as exc:
        raise JobError(str(exc), BAD_INPUT) from exc
    return reports


@dataclass(frozen=True)
class RefineOptions:
    skill: str
    tasks: Sequence[Path]
    validation: Sequence[Path] = ()  # default: half of the tasks
    generator: str = "offline"
    rounds: int = 4
    minibatch: int = 3
    model: str = DEFAULT_MODEL
    hypernet: Path | None = None
    skill_mode: str = AUTO
    sandbox: SandboxKind = SandboxKind.docker
    image: str | None = None
    seed: int = 0


def refine_skill(settings: Settings, options: RefineOptions) -> RefineResult:
    from skillgraft.evolve.learn import Refiner
    from skillgraft.evolve.learn.refine import AgentVerifier
    from skillgraft.skills.store import Store

    try:
        train = [load_task(p) for p in options.tasks]
        held = [load_task(p) for p in options.validation]
    except TaskError as exc:
        raise JobError(str(exc), BAD_INPUT) from exc
    if not held:
        if len(train) < 2:
            raise JobError("give --validation tasks, or at least two --tasks to split", BAD_INPUT)
        held, train = train[len(train) // 2:], train[: len(train) // 2]
    store = Store(settings.store_url, settings.artifacts)
    if store.latest_version(options.skill) is None:
        raise JobError(f"no skill named {options.skill!r} in the store (see `skillgraft skills ls`)", BAD_INPUT)
    roles = agent_roles(settings, options.model, options.hypernet, options.skill_mode, "offline", options.generator)
    verifier = AgentVerifier(store, roles.model, roles.compiler, skill_mode=roles.mode.value,
                             sandbox=options.sandbox.value, image=options.image)
    refiner = Refiner(store, roles.generator, verifier, rounds=options.rounds, minibatch=options.minibatch, seed=options.seed)
    try:
        return refiner.refine(options.skill, train, held)
    except SandboxUnavailable as exc:
        raise JobError(str(exc), NO_SANDBOX) from exc
