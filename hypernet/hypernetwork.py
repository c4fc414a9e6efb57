"""The hypernetwork: chunk vectors of a skill → LoRA factors for every target module.

For each (layer, module kind) pair the pooled skill vector is joined with a learned layer
embedding and a learned module-kind embedding, passed through a small residual MLP trunk
shared by all pairs, and read out by one head per module kind that emits A (r × in) and
B (out × r). All pairs of all skills in a batch go through in one pass.

Lexical targets (modules that write the residual stream, such as o_proj) are read out
differently: their B columns are the base model's output embeddings of tokens that learned
queries pick out of the skill text, each scaled by a coefficient the trunk gives per layer, and
their A rows (when to write) come from the trunk as usual. So a literal of the skill can reach
the adapter as itself, which no pooled vector of the text can carry.

The B half of every head starts at exactly zero, so an untrained hypernetwork generates
ΔW = 0 and leaves the base model unchanged; A starts non-zero so that B receives gradient.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from skillgraft.hypernet.encoder import EncodedSkills, SkillTokens
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
    # Module kinds (of target_modules) whose B columns are embeddings of the skill's own tokens;
    # they must write the residual stream (out_features = the base's hidden size).
    lexical_targets: tuple[str, ...] = ()
    lexical_rank: int = 8  # tokens picked per skill: the rank of every lexical module
    lexical_layer: int = -1  # the base's hidden layer whose states the token selection reads
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["target_modules"] = list(self.target_modules)
        d["lexical_targets"] = list(self.lexical_targets)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "HypernetConfig":
        d = dict(d)
        d["target_modules"] = tuple(d.get("target_modules", DEFAULT_TARGETS))
        d["lexical_targets"] = tuple(d.get("lexical_targets", ()))
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


def _init_a(to_a: nn.Linear, hidden: int, in_features: int) -> None:
    """A: a small input-dependent part around a fixed Kaiming-scaled base, like a fresh LoRA A."""
    nn.init.normal_(to_a.weight, std=0.02 / math.sqrt(hidden))
    with torch.no_grad():
        bound = 1.0 / math.sqrt(in_features)
        to_a.bias.uniform_(-bound, bound)


class KindHead(nn.Module):
    """One module kind's read-out: trunk features → (A, B) for rank r."""

    def __init__(self, hidden: int, rank: int, in_features: int, out_features: int, b_scale: float):
        super().__init__()
        self.rank, self.in_features, self.out_features = rank, in_features, out_features
        self.b_scale = b_scale
        self.norm = nn.LayerNorm(hidden)
        self.to_a = nn.Linear(hidden, rank * in_features)
        self.to_b = nn.Linear(hidden, rank * out_features)
        _init_a(self.to_a, hidden, in_features)
        nn.init.zeros_(self.to_b.weight)
        nn.init.zeros_(self.to_b.bias)

    def forward(self, h: Tensor) -> tuple[Tensor, Tensor]:
        lead = h.shape[:-1]
        h = self.norm(h)
        A = self.to_a(h).view(*lead, self.rank, self.in_features)
        B = (self.to_b(h) * self.b_scale).view(*lead, self.out_features, self.rank)
        return A, B


class TokenSelect(nn.Module):
    """Learned queries attend over a skill's tokens by their features; each query returns the
    weighted mean of the picked tokens' embeddings, scaled to unit RMS: (N, K, D)."""

    def __init__(self, dim: int, picks: int, key_dim: int = 128):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.keys = nn.Linear(dim, key_dim)
        self.queries = nn.Parameter(torch.randn(picks, key_dim) / math.sqrt(key_dim))

    def forward(self, tokens: SkillTokens) -> Tensor:
        keys = self.keys(self.norm(tokens.features))
        scores = torch.einsum("nlk,qk->nql", keys, self.queries) / math.sqrt(keys.shape[-1])
        weights = scores.masked_fill(~tokens.mask[:, None, :], float("-inf")).softmax(-1)
        picked = torch.einsum("nql,nld->nqd", weights, tokens.embeddings)
        return picked / picked.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-6)


class LexicalHead(nn.Module):
    """A lexical kind's read-out: A (K × in) from the trunk; B (out × K) = the picked token
    directions, each times a trunk coefficient that starts at zero (so ΔW starts at 0)."""

    def __init__(self, hidden: int, picks: int, in_features: int, b_scale: float):
        super().__init__()
        self.rank, self.in_features, self.b_scale = picks, in_features, b_scale
        self.norm = nn.LayerNorm(hidden)
        self.to_a = nn.Linear(hidden, picks * in_features)
        self.to_c = nn.Linear(hidden, picks)
        _init_a(self.to_a, hidden, in_features)
        nn.init.zeros_(self.to_c.weight)
        nn.init.zeros_(self.to_c.bias)

    def forward(self, h: Tensor, picked: Tensor) -> tuple[Tensor, Tensor]:
        h = self.norm(h)  # (N, P, hidden)
        A = self.to_a(h).view(*h.shape[:-1], self.rank, self.in_features)
        coef = self.to_c(h) * self.b_scale  # (N, P, K)
        B = picked.transpose(1, 2).unsqueeze(1) * coef.unsqueeze(2)  # (N, P, out, K)
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
        lexical = set(config.lexical_targets)
        unknown = sorted(lexical - set(spec.kinds))
        if unknown:
            raise ValueError(f"lexical targets {unknown} are not among the target modules {list(spec.kinds)}")
        widths = {spec.shape_of(kind)[1] for kind in lexical}
        if len(widths) > 1:
            raise ValueError(f"lexical targets {sorted(lexical)} must all write the residual stream (one output width)")
        self.select = TokenSelect(widths.pop(), config.lexical_rank) if lexical else None
        for kind in spec.kinds:
            fin, fout = spec.shape_of(kind)
            if kind in lexical:
                self.heads[kind] = LexicalHead(h, config.lexical_rank, fin, config.b_scale)
            else:
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
        picked = None
        if self.select is not None:
            if skills.tokens is None:
                raise ValueError("this hypernetwork reads the skill's tokens: encode skills with lexicon.encoder_for")
            picked = self.select(skills.tokens)
        out: dict[str, tuple[Tensor, Tensor]] = {}
        start = 0
        for kind in self.spec.kinds:
            mods = self.spec.of_kind(kind)
            head = self.heads[kind]
            part = h[:, start : start + len(mods)]
            A, B = head(part, picked) if isinstance(head, LexicalHead) else head(part)
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
