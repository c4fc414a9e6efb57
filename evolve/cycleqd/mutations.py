"""The mutations a CycleQD config may name, one registered entry each.

    @register_mutation("flip", summary="negates the child")
    def flip(child, rng, expert_svd, params):
        return {name: LowRank(B=-lr.B, A=lr.A) for name, lr in child.items()}

An entry gets the child, the child's random generator, the SVD of the quality archive's best
elite (only when registered with uses_expert=True, and None while that archive is empty) and the
search's MutationParams. Config validation, make_mutator and the lists of names read MUTATIONS.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from skillgraft.evolve.cycleqd.operators import Svd, gaussian_mutation, svd_expert_mutation, svd_rescale_mutation
from skillgraft.hypernet.lora import LoraDelta


@dataclass(frozen=True)
class MutationParams:
    rank: int  # children are brought back to this rank
    w_max: float = 0.1
    noise_std: float = 0.05


MutationFn = Callable[[LoraDelta, np.random.Generator, Svd | None, MutationParams], LoraDelta]


@dataclass(frozen=True)
class RegisteredMutation:
    mutate: MutationFn
    uses_expert: bool = False  # whether the search computes the quality expert's SVD for it
    summary: str = ""  # what it does, for `skillgraft evolve mutations`


class Mutator(Protocol):
    def __call__(self, child: LoraDelta, rng: np.random.Generator, expert_svd: Svd | None) -> LoraDelta: ...


MUTATIONS: dict[str, RegisteredMutation] = {}


def register_mutation(name: str, *, uses_expert: bool = False, summary: str = "") -> Callable[[MutationFn], MutationFn]:
    def register(mutate: MutationFn) -> MutationFn:
        if name in MUTATIONS:
            raise ValueError(f"mutation {name!r} is registered twice")
        MUTATIONS[name] = RegisteredMutation(mutate, uses_expert, summary)
        return mutate

    return register


def mutation_names() -> list[str]:
    return list(MUTATIONS)


def mutation_choices() -> str:
    """The names as a reader lists them, "svd, svd_rescale, gaussian or none"."""
    names = list(MUTATIONS)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def uses_expert(name: str) -> bool:
    return MUTATIONS[name].uses_expert


def make_mutator(name: str, *, rank: int, w_max: float = 0.1, noise_std: float = 0.05) -> Mutator:
    """The mutation named in the config, as one callable with a shared signature."""
    if name not in MUTATIONS:
        raise ValueError(f"unknown mutation {name!r}: use {mutation_choices()}")
    mutation, params = MUTATIONS[name].mutate, MutationParams(rank, w_max, noise_std)

    def mutate(child: LoraDelta, rng: np.random.Generator, expert_svd: Svd | None) -> LoraDelta:
        return mutation(child, rng, expert_svd, params)

    return mutate


@register_mutation("svd", uses_expert=True, summary="along the quality expert's singular directions")
def _svd_expert(child: LoraDelta, rng: np.random.Generator, expert_svd: Svd | None, params: MutationParams) -> LoraDelta:
    if not expert_svd:
        return child  # an empty archive has no expert to learn from yet
    return svd_expert_mutation(child, expert_svd, rng, rank=params.rank, w_max=params.w_max)


@register_mutation("svd_rescale", summary="rescales the child's own singular values")
def _svd_rescale(child: LoraDelta, rng: np.random.Generator, expert_svd: Svd | None, params: MutationParams) -> LoraDelta:
    return svd_rescale_mutation(child, rng, rank=params.rank, w_max=params.w_max)


@register_mutation("gaussian", summary="adds low-rank Gaussian noise (an ablation)")
def _gaussian(child: LoraDelta, rng: np.random.Generator, expert_svd: Svd | None, params: MutationParams) -> LoraDelta:
    return gaussian_mutation(child, rng, rank=params.rank, std=params.noise_std)


@register_mutation("none", summary="leaves the child as crossover made it (an ablation)")
def _none(child: LoraDelta, rng: np.random.Generator, expert_svd: Svd | None, params: MutationParams) -> LoraDelta:
    return child
