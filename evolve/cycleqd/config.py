"""The knobs of a CycleQD search, with the paper's defaults."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal, Optional

from skillgraft.evolve.cycleqd.mutations import mutation_choices, mutation_names
from skillgraft.evolve.cycleqd.sampling import SAMPLERS

Sampling = str  # a key of cycleqd.sampling.SAMPLERS
Mutation = str  # a name registered in cycleqd.mutations
Granularity = Literal["model", "module"]


@dataclass
class CycleQDConfig:
    """Everything that decides what a run does; stored with the run so a resume repeats it exactly.

    Defaults follow the CycleQD paper (elite sampling, SVD mutation with w_max = 0.1, crossover
    weights N(1, 0.01²), 15 bins from 85% of the weakest to 115% of the strongest starting score).
    """

    generations: int = 20
    children_per_generation: int = 2
    seed: int = 0
    bins: int = 15
    range_low: float = 0.85  # lower bin edge = range_low * weakest starting score
    range_high: float = 1.15  # upper bin edge = range_high * strongest starting score
    ranges: Optional[dict[str, tuple[float, float]]] = None  # explicit (lo, hi) per task, wins over the factors
    sampling: Sampling = "elite"
    crossover_mu: float = 1.0
    crossover_sigma: float = 0.01
    crossover_granularity: Granularity = "model"
    mutation: Mutation = "svd"
    mutation_w_max: float = 0.1
    noise_std: float = 0.05  # Gaussian ablation: noise std relative to each module's RMS of ΔW
    rank: Optional[int] = None  # children are recompressed to this rank; None = largest starting rank
    fixed_quality: Optional[str] = None  # ablation: MAP-Elites with one quality task instead of the cycle
    merge_temperature: float = 1.0  # final merge weights are softmax(quality / temperature)
    # The final merge's weights are scaled by each of these and the scale scoring best on the search's
    # tasks is kept (ties: the smaller). 1.0 is the paper's weighted average; above it, experts that
    # touch different behaviours are not each diluted to 1/n of their strength.
    merge_scales: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0)
    # Then the merge grows as a greedy soup (final_merge.grow_soup): up to soup_size elites, best
    # first, each added at each soup weight and kept when the sum scores higher on the search's
    # tasks. 0: the scaled merge alone.
    soup_size: int = 8
    soup_weights: tuple[float, ...] = (0.5, 1.0)

    def __post_init__(self) -> None:
        if self.generations < 0:
            raise ValueError("generations must be >= 0")
        if self.children_per_generation < 1:
            raise ValueError("children_per_generation must be >= 1")
        if self.bins < 1:
            raise ValueError("bins must be >= 1")
        if self.sampling not in SAMPLERS:
            raise ValueError(f"unknown sampling {self.sampling!r}: use {' or '.join(map(repr, SAMPLERS))}")
        if self.mutation not in mutation_names():
            raise ValueError(f"unknown mutation {self.mutation!r}: use {mutation_choices()}")
        if self.crossover_granularity not in ("model", "module"):
            raise ValueError("crossover_granularity must be 'model' or 'module'")
        if self.rank is not None and self.rank < 1:
            raise ValueError("rank must be >= 1")
        if self.merge_temperature <= 0:
            raise ValueError("merge_temperature must be > 0")
        self.merge_scales = tuple(sorted(float(v) for v in self.merge_scales))
        if not self.merge_scales or self.merge_scales[0] <= 0:
            raise ValueError("merge_scales must hold at least one scale, each > 0")
        if self.soup_size < 0:
            raise ValueError("soup_size must be >= 0")
        self.soup_weights = tuple(sorted(float(v) for v in self.soup_weights))
        if not self.soup_weights or self.soup_weights[0] <= 0:
            raise ValueError("soup_weights must hold at least one weight, each > 0")
        if self.ranges:
            self.ranges = {k: (float(v[0]), float(v[1])) for k, v in self.ranges.items()}
            for task, (lo, hi) in self.ranges.items():
                if not hi > lo:
                    raise ValueError(f"range for {task!r} must have hi > lo, got ({lo}, {hi})")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["merge_scales"] = list(self.merge_scales)
        d["soup_weights"] = list(self.soup_weights)
        if d["ranges"] is not None:
            d["ranges"] = {k: list(v) for k, v in d["ranges"].items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CycleQDConfig":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    def search_identity(self) -> dict:
        """The fields that must match for a resume to continue the same search (generations may grow)."""
        d = self.to_dict()
        for later in ("generations", "merge_temperature", "merge_scales", "soup_size", "soup_weights"):  # they act after the search
            d.pop(later)
        return d


__all__ = ["CycleQDConfig", "Sampling", "Mutation", "Granularity"]
