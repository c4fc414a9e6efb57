"""The online loop: run tasks with what has been learned, and learn from every verified success.

    learner = Learner(store, model, compiler, OfflineSummariser(), LearnConfig(), workdir)
    report = learner.run_session(tasks)

Per task: retrieve skills → compile each (cached by skill version and hypernetwork checkpoint)
→ rank-concatenate with the current global adapter → run the agent in a sandbox → store the
trajectory. Per success: summarise the run into a new skill version → compile it → EMA it into
the global adapter. Everything lives in the store, so a new process (or a second one at the
same time) carries on from the latest global adapter and skill versions. A success whose run
followed its skill's latest version, while that version has solved at least half the session
runs given it, confirms the version instead (`LearnConfig.keep_confirmed`): a recipe that holds
is not traded for the summary of one run that followed it.

Practice (`LearnConfig.practice`): a task the session's run failed is run again, sampled, each
time from another stream of draws, until a run succeeds; that success is learned from like any
other, so a success the model finds once in twenty runs is found within the session instead of
sessions later. A practice run of a family with no skill yet borrows the closest skill of
another family. The session's score stays that of its own runs; practice runs are recorded
outside the session (their trajectories name it and the practice run's number).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from skillgraft.agent.episodes import EpisodeJob, EpisodeRunner
from skillgraft.agent.loadout import SKILL_MODES, GivenSkill, Loadout, SkillMode, make_loadout
from skillgraft.agent.models.base import AdapterModel, Model, Sampling
from skillgraft.agent.seams import SkillCompiler
from skillgraft.agent.runner import RunResult, run_task
from skillgraft.agent.skill_adapters import compiled_adapter
from skillgraft.agent.task import Task
from skillgraft.agent.unstick import Unstick
from skillgraft.evolve.learn.anchors import fold_compiler
from skillgraft.evolve.learn.choose import retrieve, target_skill
from skillgraft.evolve.learn.episode import episode_from_run
from skillgraft.evolve.learn.evaluate import AgentScorer
from skillgraft.evolve.learn.gate import ValidationGate
from skillgraft.evolve.learn.global_adapter import EmaConfig, FoldResult, fold_into_global
from skillgraft.evolve.learn.summarise import Summariser, SummaryError
from skillgraft.evolve.learn.refine import Refiner
from skillgraft.skills.schema import SkillVersion, saved_id
from skillgraft.skills.store import Store


@dataclass
class LearnConfig:
    learning: bool = True  # off: run and record only, nothing is summarised or merged
    skill_mode: str = "parametric"  # how retrieved skills reach the model
    use_global: bool = True  # activate the global adapter in runs
    k_skills: int = 1
    min_retrieval_score: float = 0.0
    ema: EmaConfig = field(default_factory=EmaConfig)
    sandbox: str = "docker"
    image: str | None = None
    # Validate before committing: a new skill version, in the form runs get it (in context, or
    # compiled beside the global adapter), on the validation tasks of the task's family if any,
    # and a new global version on all of them; each against what runs now.
    gate: bool = False
    practice: int = 0  # learning on: more runs of a failed task, sampled, until one succeeds
    practice_temperature: float = 1.0
    # A success that followed the skill's latest version, which has solved at least as many of
    # the session runs given it as it has failed, confirms it: no new version is summarised.
    keep_confirmed: bool = True
    # Every run goes back when it repeats a command on the same files (agent.unstick); None: off.
    unstick: Unstick | None = None
    refine_below: float | None = None  # refine a skill whose success rate in a session is below this
    refine_min_uses: int = 3
    cycleqd_every: int | None = None

    def __post_init__(self) -> None:
        if self.skill_mode not in SKILL_MODES:
            raise ValueError(f"skill mode must be one of {', '.join(SKILL_MODES)}, got {self.skill_mode!r}")
        if self.practice < 0:
            raise ValueError(f"practice is a number of runs, 0 or more, not {self.practice}")
        if self.practice:
            Sampling(self.practice_temperature)  # refuses a temperature that would not sample

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TaskOutcome:
    task_id: str
    family: str | None
    success: bool
    steps: int
    exit_status: str
    trajectory_id: int | None
    skills: list[str]  # "name@vN" of the skill versions used
    global_version: int | None
    learned: str | None = None  # "name@vN" of the version written from this success
    global_after: int | None = None  # global version after the EMA step
    note: str = ""
    practice: int | None = None  # the practice run that succeeded where the session's run failed


@dataclass
class SessionReport:
    session_id: int
    number: int  # 1 + how many sessions of the same kind (learning on / off) the store had before
    outcomes: list[TaskOutcome]
    notes: list[str] = field(default_factory=list)

    @property
    def successes(self) -> int:
        return sum(o.success for o in self.outcomes)

    @property
    def solved_in_practice(self) -> int:
        return sum(o.practice is not None for o in self.outcomes)

    @property
    def rate(self) -> float:
        return self.successes / len(self.outcomes) if self.outcomes else 0.0

    def summary(self) -> dict:
        return {"episodes": len(self.outcomes), "successes": self.successes, "rate": self.rate,
                "learned": [o.learned for o in self.outcomes if o.learned],
                "solved_in_practice": self.solved_in_practice, "notes": self.notes}


class Learner:
    def __init__(self, store: Store, model: Model, compiler: SkillCompiler | None, summariser: Summariser,
                 config: LearnConfig, workdir: Path, *, validation: Sequence[Task] = (), refiner: Refiner | None = None,
                 periodic: Callable[["Learner", int], str | None] | None = None,
                 episodes: EpisodeRunner | None = None, anchors: Sequence[Task] = ()):
        """`compiler` may be None (a model without adapters: skills in context only); `refiner` is
        a refine.Refiner used on weak skills; `periodic(learner, session_number)` runs after a
        session (CycleQD) and returns a note. `episodes` runs a session's tasks `episodes.workers`
        at a time (on a Ray cluster, say): each wave gets what was learned before it, and its
        results are recorded and learned from in task order; without it, one task after another.
        `anchors`: tasks the model solves now (other families than the ones it learns), whose runs
        a compiler that tunes with an anchor weight keeps as they are in the adapter it makes for
        the global adapter, which every run gets (evolve.learn.anchors); a skill's own runs get
        its adapter tuned without them."""
        self.store, self.model, self.compiler = store, model, compiler
        self.summariser, self.config = summariser, config
        self.workdir = Path(workdir)
        self.refiner = refiner
        self.periodic = periodic
        self.episodes = episodes
        self.anchors = list(anchors)
        self._fold_compiler: SkillCompiler | None = None  # the compiler of what the global adapter folds, once chosen
        # Validation runs as the session's own: on its episode runner where it has one.
        self.gate = ValidationGate(validation, AgentScorer(model, config.sandbox, config.image, episodes=episodes))
        self.parametric = compiler is not None and isinstance(model, AdapterModel)
        if config.skill_mode != "context" and not self.parametric:
            raise ValueError("parametric skills need an adapter-capable model (hf:…) and a compiler; use skill mode 'context'")

    # ---------------------------------------------------------------- a session
    def run_session(self, tasks: Sequence[Task], on_outcome: Callable[[TaskOutcome], None] | None = None,
                    label: str | None = None) -> SessionReport:
        """Runs the tasks in order, learning from each success. A session of the same config whose
        process was killed is carried on: the tasks it had finished are not run again."""
        config = {**self.config.to_dict(), "label": label, "tasks": [t.id for t in tasks],
                  "model": self.model.name, "summariser": self.summariser.name}
        session = self.store.resumable_session("learn", config) or self.store.start_session("learn", config)
        session_id = saved_id(session.id)
        # Counted among sessions of the same kind (learning on, or off), so a baseline run in the
        # same store does not shift when the periodic search falls due.
        number = 1 + sum(1 for s in self.store.sessions(kind="learn")
                         if saved_id(s.id) < session_id and (s.config or {}).get("learning") == self.config.learning)
        report = SessionReport(session_id, number, self._finished(session_id, tasks))
        if self.config.learning:
            report.notes += self._anchor_tuning()
        left = list(tasks[len(report.outcomes):])
        wave = self.episodes.workers if self.episodes is not None else 1
        while left:
            batch, left = left[:wave], left[wave:]
            for outcome in self._run_wave(batch, session_id):
                report.outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
        if self.config.learning:
            report.notes += self._refine_weak(report, tasks, session_id)
            if self.periodic is not None and self.config.cycleqd_every and number % self.config.cycleqd_every == 0:
                note = self.periodic(self, number)
                if note:
                    report.notes.append(note)
        self.store.end_session(session_id, report.summary())
        return report

    def _anchor_tuning(self) -> list[str]:
        """The compiler of what the global adapter folds (evolve.learn.anchors), chosen once."""
        if self._fold_compiler is not None:
            return []
        self._fold_compiler, note = fold_compiler(self.compiler, self.anchors, self._results, self.workdir / "anchors")
        return [note] if note else []

    def _finished(self, session_id: int, tasks: Sequence[Task]) -> list[TaskOutcome]:
        """The outcomes of the tasks a resumed session had already run (its first tasks, in order)."""
        done = sorted(self.store.trajectories(session_id=session_id), key=lambda t: saved_id(t.id))
        if [t.task_id for t in done] != [t.id for t in tasks[:len(done)]]:
            raise ValueError(f"session {session_id} holds runs of other tasks than the ones it was started with")
        outcomes = []
        for row in done:
            used = [self.store.version(i) for i in row.skill_version_ids]
            learned = self.store.versions_from_trajectory(saved_id(row.id))
            outcomes.append(TaskOutcome(row.task_id, row.family, row.reward > 0, row.steps, row.outcome, saved_id(row.id),
                                        [f"{v.skill_name}@v{v.number}" for v in used], None,
                                        learned=f"{learned[0].skill_name}@v{learned[0].number}" if learned else None,
                                        note="run before the session was interrupted"))
        return outcomes

    # ---------------------------------------------------------------- one task
    def loadout_for(self, task: Task, *, borrow: bool = False) -> Loadout:
        """The skills and adapter a run of `task` gets right now (`borrow`: see choose.retrieve)."""
        versions = retrieve(self.store, task, self.config.k_skills, self.config.min_retrieval_score, borrow=borrow)
        return make_loadout(self.store, self.model, versions, self.config.skill_mode,
                            compiler=self.compiler, use_global=self.parametric and self.config.use_global,
                            global_name=self.config.ema.name, cache=self.workdir)

    def job_for(self, task: Task, session_id: int, *, borrow: bool = False) -> EpisodeJob:
        """A run of `task` with what has been learned so far, its trajectory in the session's folder."""
        loadout = self.loadout_for(task, borrow=borrow)
        path = self.workdir / "trajectories" / f"session-{session_id}" / f"{task.id}.json"
        return EpisodeJob(task, loadout, path, {"session_id": session_id, "skill_versions": loadout.version_ids,
                                                "adapter_ids": loadout.adapter_ids}, unstick=self.config.unstick)

    def _results(self, jobs: Sequence[EpisodeJob]) -> dict[int, RunResult]:
        """Each job's result, by the job's id(): on the episode runner, or here one after another."""
        if self.episodes is not None:
            return {id(job): result for job, result in self.episodes.run_all(jobs)}
        return {id(job): run_task(job.task, self.model, sandbox=self.config.sandbox, loadout=job.loadout,
                                  trajectory_path=job.trajectory_path, image=self.config.image, info=job.info,
                                  sampling=job.sampling, unstick=job.unstick)
                for job in jobs}

    def _run_wave(self, tasks: Sequence[Task], session_id: int) -> list[TaskOutcome]:
        jobs: list[EpisodeJob] = []
        for i, task in enumerate(tasks):
            job = self.job_for(task, session_id)
            if job.trajectory_path is not None and any(j.trajectory_path == job.trajectory_path for j in jobs):
                job = replace(job, trajectory_path=job.trajectory_path.with_suffix(f".{i}.json"))  # a task twice in a wave
            jobs.append(job)
        results = self._results(jobs)
        # Recorded in task order, so a session cut short keeps a prefix of its tasks and resumes after it.
        outcomes = [self.record(job, results[id(job)], session_id) for job in jobs]
        if self.config.learning and self.config.practice:
            self._practise([(job, o) for job, o in zip(jobs, outcomes) if not o.success], session_id)
        return outcomes

    def _practise(self, failed: list[tuple[EpisodeJob, TaskOutcome]], session_id: int) -> None:
        """Runs failed tasks again, sampled from stream 1, 2, … until each succeeds or the practice
        runs are spent; each run gets what has been learned by then, and a task whose family has
        no skill yet borrows the closest skill of another family. A success is written into the
        task's own family's skill (choose.target_skill), never into the borrowed one."""
        for attempt in range(1, self.config.practice + 1):
            if not failed:
                return
            sampling = Sampling(self.config.practice_temperature, stream=attempt)
            jobs = []
            for first, _ in failed:
                job = self.job_for(first.task, session_id, borrow=True)
                assert first.trajectory_path is not None  # job_for always names one
                jobs.append(replace(job, trajectory_path=first.trajectory_path.with_suffix(f".practice-{attempt}.json"),
                                    info={**(job.info or {}), "practice": attempt}, sampling=sampling))
            results = self._results(jobs)
            left = []
            for job, (first, outcome) in zip(jobs, failed):
                result = results[id(job)]
                trajectory_id = self._store_run(job, result, session_id=None)
                if result.success:
                    outcome.practice = attempt
                    self.learn_from(job.task, result, trajectory_id, job.loadout.versions, session_id, outcome)
                else:
                    left.append((first, outcome))
            failed = left

    def _store_run(self, job: EpisodeJob, result: RunResult, session_id: int | None) -> int:
        task, loadout, path = job.task, job.loadout, job.trajectory_path
        assert path is not None  # job_for always names one
        trajectory = self.store.add_trajectory(
            path, task.id, task.family, result.exit_status, result.reward, result.cost, result.steps,
            result.timings, loadout.version_ids, loadout.adapter_ids, session_id=session_id, model=self.model.name,
        )
        return saved_id(trajectory.id)

    def record(self, job: EpisodeJob, result: RunResult, session_id: int) -> TaskOutcome:
        """Stores the run, and learns from it when it succeeded."""
        trajectory_id = self._store_run(job, result, session_id)
        outcome = TaskOutcome(job.task.id, job.task.family, result.success, result.steps, result.exit_status, trajectory_id,
                              job.loadout.refs, job.loadout.global_version)
        if result.success and self.config.learning:
            self.learn_from(job.task, result, trajectory_id, job.loadout.versions, session_id, outcome)
        return outcome

    # ---------------------------------------------------------------- learning from a success
    def learn_from(self, task: Task, result: RunResult, trajectory_id: int, used: list[SkillVersion],
                   session_id: int, outcome: TaskOutcome) -> FoldResult | None:
        """Summarise → new skill version (or confirm the one the run followed) → compile → EMA
        into the global adapter."""
        name = target_skill(self.store, task, used)
        previous = self.store.latest_version(name)
        confirmed = self._confirmed(previous, used, trajectory_id)
        if confirmed is not None:
            outcome.note, version = confirmed, previous
        else:
            version = self._summarised(task, result, name, previous, trajectory_id, session_id, outcome)
        if version is None:
            return None
        if self.compiler is None or not self.parametric:
            return None
        adapter = compiled_adapter(self.store, self._fold_compiler or self.compiler, version)
        fold = fold_into_global(
            self.store, saved_id(adapter.id), self.config.ema,
            provenance={"skill_version_id": version.id, "trajectory_id": trajectory_id, "session_id": session_id},
            gate=partial(self.gate.keeps_global, loadout=self._global_alone) if self._gates else None,
        )
        outcome.global_after = fold.record.version if fold.record is not None else None
        if fold.unchanged:
            outcome.note = "; ".join(filter(None, [outcome.note, "the global adapter already holds its adapter"]))
        elif not fold.committed:
            outcome.note = f"new global version refused by the validation gate ({self.gate.verdict})"
        return fold

    def _confirmed(self, previous: SkillVersion | None, used: list[SkillVersion], trajectory_id: int) -> str | None:
        """A note when this success confirms the skill's latest version (LearnConfig.keep_confirmed):
        the run was given it, and it has solved at least as many of the session runs given it as
        it has failed, this one included. Rewriting it from a run that followed it would trade a
        recipe with a record for one without, and a run's own slips would come along."""
        if not self.config.keep_confirmed or previous is None or all(v.id != previous.id for v in used):
            return None
        solved, runs = self.store.version_record(saved_id(previous.id), also=trajectory_id)
        if solved < runs - solved:
            return None
        return f"confirms {previous.skill_name}@v{previous.number} ({solved} of {runs} runs given it solved)"

    def _summarised(self, task: Task, result: RunResult, name: str, previous: SkillVersion | None,
                    trajectory_id: int, session_id: int, outcome: TaskOutcome) -> SkillVersion | None:
        """The skill version a summary of the run makes (or the text it already has), None when
        the summariser gives none or the gate refuses it."""
        try:
            text = self.summariser.summarise(episode_from_run(task, result), name, previous.text if previous else None)
        except SummaryError as exc:
            outcome.note = f"not summarised: {exc}"
            return None
        if self._gates and (previous is None or text != previous.text) and not self._gate_text(
                task, name, text, previous, self.store.trajectory_path(trajectory_id)):
            outcome.note = f"summary of {name} refused by the validation gate ({self.gate.verdict})"
            return None
        version = self.store.add_version(name, text, origin="summarised", parent_id=previous.id if previous else None,
                                         trajectory_id=trajectory_id, session_id=session_id)
        if previous is not None and version.id == previous.id:
            # The summary is the text the skill already has: no new version, but the success
            # still counts for the global adapter below.
            outcome.note = f"summary unchanged: {version.skill_name}@v{version.number}"
        else:
            outcome.learned = f"{version.skill_name}@v{version.number}"
        return version

    def _skill_loadout(self, skills: Sequence[GivenSkill | SkillVersion]) -> Loadout:
        """A run's loadout with these skills, in the form the agent gets them: in context, or
        compiled and joined with the current global adapter."""
        return make_loadout(self.store, self.model, skills, self.config.skill_mode, compiler=self.compiler,
                            use_global=self.parametric and self.config.use_global, global_name=self.config.ema.name,
                            cache=self.workdir)

    @property
    def _gates(self) -> bool:
        return self.config.gate and bool(self.gate.tasks)

    def _gate_text(self, task: Task, name: str, text: str, previous: SkillVersion | None, run: Path) -> bool:
        """A summary must not score below the skill's current text (or no skill, for a new one),
        each given as runs get it: in context, or compiled beside the global adapter (tuned on
        `run`, the run it was summarised from, where the compiler tunes). The current text's score
        is kept until the skill gets a new version or the global adapter moves."""
        current = self._skill_loadout([previous] if previous else [])
        return self.gate.keeps_text(task.family, (name, previous.id if previous else None, current.key), current,
                                    self._skill_loadout([GivenSkill.of_text(name, text, run)]))

    def _global_alone(self, folder: Path | None) -> Loadout:
        """A run's loadout with this global adapter alone (None: nothing), as the gate weighs it."""
        return make_loadout(None, self.model, mode=SkillMode.parametric, global_folder=folder, cache=self.workdir)

    # ---------------------------------------------------------------- refinement of weak skills
    def _refine_weak(self, report: SessionReport, tasks: Sequence[Task], session_id: int) -> list[str]:
        if self.refiner is None or self.config.refine_below is None:
            return []
        by_skill: dict[str, list[tuple[Task, TaskOutcome]]] = {}
        for task, o in zip(tasks, report.outcomes):
            for ref in o.skills:
                by_skill.setdefault(ref.split("@")[0], []).append((task, o))
        notes = []
        for name, runs in sorted(by_skill.items()):
            rate = sum(o.success for _, o in runs) / len(runs)
            if len(runs) < self.config.refine_min_uses or rate >= self.config.refine_below:
                continue
            family = runs[0][0].family
            held_out = self.gate.of_family(family)
            if not held_out:
                notes.append(f"{name}: success {rate:.0%} is low, but there are no validation tasks to refine it on")
                continue
            result = self.refiner.refine(name, [t for t, _ in runs], held_out, session_id=session_id)
            notes.append(result.describe())
        return notes
