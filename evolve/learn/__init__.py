"""Learning across sessions: summarise successes into skills, compile them, EMA them into the
global adapter, and refine weak skills with a generator–verifier loop.

    learner = Learner(store, model, compiler, OfflineSummariser(), LearnConfig(), workdir)
    report = learner.run_session(tasks)            # one session: a row in the store
    fold_into_global(store, adapter_id, EmaConfig(alpha=0.1, rank=16))
    Refiner(store, OfflineGenerator(), AgentVerifier(store, model)).refine("off-by-one", tasks, held_out)
"""
from skillgraft.evolve.learn.global_adapter import EmaConfig, FoldResult, factor_ema, fold_into_global
from skillgraft.evolve.learn.loop import LearnConfig, Learner, SessionReport, TaskOutcome
from skillgraft.evolve.learn.propose import Generator, LLMGenerator, OfflineGenerator
from skillgraft.evolve.learn.refine import AgentVerifier, Refiner, RefineResult, Verifier
from skillgraft.evolve.learn.summarise import Summariser, SummaryError
from skillgraft.evolve.learn.summarise_llm import LLMSummariser
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser

__all__ = [
    "AgentVerifier", "EmaConfig", "FoldResult", "Generator", "LLMGenerator", "LLMSummariser", "LearnConfig", "Learner",
    "OfflineGenerator", "OfflineSummariser", "RefineResult", "Refiner", "SessionReport", "Summariser", "SummaryError",
    "TaskOutcome", "Verifier", "factor_ema", "fold_into_global",
]
