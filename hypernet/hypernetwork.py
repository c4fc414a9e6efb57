"""The hypernetwork: chunk vectors of a skill → LoRA factors for every target module.

For each (layer, module kind) pair the pooled skill vector is joined with a learned layer
embedding and a learned module-kind embedding, passed through a small residual MLP trunk
shared by all pairs, and read out by one head per module kind that emits A (r × in) and
B (out × r). All pairs of all skills in a batch go through in one pass.

The B half of every head starts at exactly zero, so an untrained hypernetwork generates
ΔW = 0 and leaves the base model unchanged; A starts non-zero so that B receives gradient.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from skillgraft.hypernet.encoder import EncodedSkills
from skillgraft.hypernet.lora import LoraDelta, LowRank
from skillgraft.hypernet.targets import DEFAULT_TARGETS, TargetSpec


@dataclass
class HypernetConfig:
    encoder: str = "minilm"
    encoder_dim: int = 384
    encoder_layer: int = -1  # which hidden layer the base-hidden encoder reads
    encoder_window: int | None = None  # tokens per chunk vector (None: the encoder's default)
    target_modules: tuple[str, ...] = DEFAULT_TARGETS
    rank: int = 8
    hidden: int = 256
    embed_dim: int = 64
    trunk_blocks: int = 2
    pool_heads: int = 4
    # B is emitted at this fraction of the head's raw output: keeps early steps from
    # swinging ΔW far before the trunk has learned anything.
    b_scale: float = 0.1
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["target_modules"] = list(self.target_modules)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "HypernetConfig":
        d = dict(d)
        d["target_modules"] = tuple(d.get("target_modules", DEFAULT_TARGETS))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


class AttentionPool(nn.Module):
    """Learned queries attend over a skill's chunk vectors, so every chunk can contribute."""

    def __init__(self, dim: int, heads: int, out: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.queries = nn.Parameter(torch.randn(heads, dim) / math.sqrt(dim))
        self.proj = nn.Linear(heads * dim, out)

    def forward(self, chunks: Tensor, mask: Tensor) -> Tensor:
        x = self.norm(chunks)  # (N, C, D)
        scores = torch.einsum("ncd,hd->nhc", x, self.queries) / math.sqrt(x.shape[-1])
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        weights = scores.softmax(-1)
        pooled = torch.einsum("nhc,ncd->nhd", weights, chunks)
        return self.proj(pooled.flatten(1))


class ResidualBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.mlp(self.norm(x))


class KindHead(nn.Module):
    """One module kind's read-out: trunk features → (A, B) for rank r."""

    def __init__(self, hidden: int, rank: int, in_features: int, out_features: int, b_scale: float):
        super().__init__()
        self.rank, self.in_features, self.out_features = rank, in_features, out_features
        self.b_scale = b_scale
        self.norm = nn.LayerNorm(hidden)
        self.to_a = nn.Linear(hidden, rank * in_features)
        self.to_b = nn.Linear(hidden, rank * out_features)
        # A: small input-dependent part around a fixed Kaiming-scaled base, like a fresh LoRA A.
        nn.init.normal_(self.to_a.weight, std=0.02 / math.sqrt(hidden))
        with torch.no_grad():
            bound = 1.0 / math.sqrt(in_features)
            self.to_a.bias.uniform_(-bound, bound)
        nn.init.zeros_(self.to_b.weight)
        nn.init.zeros_(self.to_b.bias)

    def forward(self, h: Tensor) -> tuple[Tensor, Tensor]:
        lead = h.shape[:-1]
        h = self.norm(h)
        A = self.to_a(h).view(*lead, self.rank, self.in_features)
        B = (self.to_b(h) * self.b_scale).view(*lead, self.out_features, self.rank)
        return A, B


class Hypernetwork(nn.Module):
    def __init__(self, config: HypernetConfig, spec: TargetSpec):
        super().__init__()
        self.config = config
        self.spec = spec
        h = config.hidden
        self.pool = AttentionPool(config.encoder_dim, config.pool_heads, h)
        self.layer_embed = nn.Embedding(spec.n_layers, config.embed_dim)
        self.kind_embed = nn.Embedding(len(spec.kinds), config.embed_dim)
        nn.init.normal_(self.layer_embed.weight, std=1.0)
        nn.init.normal_(self.kind_embed.weight, std=1.0)
        self.join = nn.Linear(h + 2 * config.embed_dim, h)
        self.trunk = nn.Sequential(*[ResidualBlock(h) for _ in range(config.trunk_blocks)])
        self.heads = nn.ModuleDict()
        for kind in spec.kinds:
            fin, fout = spec.shape_of(kind)
            self.heads[kind] = KindHead(h, config.rank, fin, fout, config.b_scale)
        # Pairs are ordered kind by kind so each head reads one contiguous slice.
        layers, kinds = [], []
        for k, kind in enumerate(spec.kinds):
            for m in spec.of_kind(kind):
                layers.append(m.layer)
                kinds.append(k)
        self.register_buffer("_pair_layer", torch.tensor(layers), persistent=False)
        self.register_buffer("_pair_kind", torch.tensor(kinds), persistent=False)

    def forward(self, skills: EncodedSkills) -> dict[str, tuple[Tensor, Tensor]]:
        """Factors for every target module, batched over skills: path → (A (N,r,in), B (N,out,r))."""
        skill = self.pool(skills.chunks, skills.mask)  # (N, h)
        n, p = skill.shape[0], self._pair_layer.shape[0]
        pair = torch.cat([self.layer_embed(self._pair_layer), self.kind_embed(self._pair_kind)], -1)  # (P, 2e)
        x = torch.cat([skill.unsqueeze(1).expand(-1, p, -1), pair.unsqueeze(0).expand(n, -1, -1)], -1)
        h = self.trunk(self.join(x))  # every (skill, layer, kind) in one pass: (N, P, h)
        out: dict[str, tuple[Tensor, Tensor]] = {}
        start = 0
        for kind in self.spec.kinds:
            mods = self.spec.of_kind(kind)
            A, B = self.heads[kind](h[:, start : start + len(mods)])
            start += len(mods)
            for j, module in enumerate(mods):
                out[module.path] = (A[:, j], B[:, j])
        return out


def factors_to_deltas(factors: dict[str, tuple[Tensor, Tensor]]) -> list[LoraDelta]:
    """Batched factors → one detached LoraDelta per skill."""
    n = next(iter(factors.values()))[0].shape[0]
    return [
        {path: LowRank(B=B[i].detach().clone(), A=A[i].detach().clone()) for path, (A, B) in factors.items()}
        for i in range(n)
    ]


def delta_sq_norm(factors: dict[str, tuple[Tensor, Tensor]]) -> Tensor:
    """Σ over modules of ‖B A‖_F² per skill (N,), via tr((BᵀB)(AAᵀ)): the L2 penalty on ΔW."""
    total = None
    for A, B in factors.values():
        term = torch.einsum("nij,nji->n", B.transpose(1, 2) @ B, A @ A.transpose(1, 2))
        total = term if total is None else total + term
    return total
