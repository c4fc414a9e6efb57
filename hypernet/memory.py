"""A skill's literal edits written into the base model's weights in closed form: a key-value memory.

The hypernetwork's adapters carry what a skill is about and some of its literals, but a small
policy that sees the old value in front of it tends to write it again where the skill's new
one goes. The memory writes the skill's edit commands themselves: the backticked substitutions
whose two sides differ in more than placeholders (is_literal_edit). For every token of such
an edit (`sed -i 's/ or / and /' FILE`), the base model's MLP input at
that token in a band of layers is a key, and the output embedding of the token that follows is
its value; each layer's `down_proj` gets the ΔW that maps every key to its value exactly and
moves typical inputs least: keys whitened by the second moment C of the layer's inputs over
reference conversations (as rank-one model editing does),

    ΔW = V (Kᵀ C⁻¹ K + ρ)⁻¹ Kᵀ C⁻¹,   a LoRA with B = V (Kᵀ C⁻¹ K + ρ)⁻¹ and A = Kᵀ C⁻¹.

When the agent's own command reaches the same few tokens (`s/ or /`), the layer's input is
close to the key and the value raises the token the skill wrote next (` and`). Placeholders
(NAME, FILE, A: words in capitals, and KEY in KEYs) are never written as values: the agent
fills them from its task; nor are the keys that would chain into loops (code_pairs). No
training: one forward pass of the base over the skill text.

    moments = LayerMoments.measure(model, reference_ids, layers)
    memory = CommandMemory(model, tokenizer, moments)
    [delta] = memory.write([skill_text])          # LoraDelta over the band's down_proj modules

A hypernetwork checkpoint holds a memory when its folder has `memory.json` (the band, the scale,
the ridge and the reference token ids, written by `save_memory_spec`); its Compiler then adds the
memory's adapter to every compiled skill that has a literal edit, except where the prompt shows
the skill's text too (Compiler.beside_text).
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from skillgraft.hypernet.lora import LoraDelta, LowRank
from skillgraft.hypernet.targets import find_targets

_SPAN = re.compile(r"`([^`\n]+)`")
# NAME, FILE, one-letter ones such as A and B, and the KEY of a value derived from one (KEYs)
_PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_0-9]*\b|\b[A-Z][A-Z_0-9]+(?=[a-z]{1,3}\b)")
# A sed substitution's two sides; the `s` follows a quote, a slash or a space, never a word (tests/).
_SUBSTITUTION = re.compile(r"(?<![\w.])s/((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/")
_PLACEHOLDER_HEAD = re.compile(r"\b[A-Z][A-Z_0-9]*")  # also KEY in KEYs
KIND = "down_proj"
SPEC = "memory.json"  # in a hypernetwork checkpoint's folder
RULES = "3"  # what code_pairs writes; part of the checkpoint's id, so a change recompiles every skill


def is_literal_edit(span: str) -> bool:
    """Whether a command changes code by a literal the task cannot show: a substitution whose two
    sides differ in more than placeholders (`s/ or / and /`, `s/"KEY"]/"KEYs"]/`). A template
    (`s/HELPER(B, A)/HELPER(A, B)/`, `s/NAME = OLD/NAME = NEW/`) is filled from the task, and the
    commands every skill shares (running the tests, grep) the policy already knows."""
    def shape(side: str) -> str:  # a line anchor (`OLD$`) is no literal either
        return _PLACEHOLDER_HEAD.sub("□", side.removeprefix("^").removesuffix("$"))
    return any(shape(m.group(1)) != shape(m.group(2)) for m in _SUBSTITUTION.finditer(span))


_SED_SYNTAX = frozenset("/^$'\"[] ")  # delimiters, anchors, quotes and brackets: what every sed command writes


def code_pairs(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The text's token ids and (position, next token id) for each token of a backticked literal
    edit (is_literal_edit) whose next token lies in the same span and is no part of a placeholder,
    leaving out two kinds of keys that chain into loops when the agent writes its own command:

    - a token the span writes again right before a placeholder: there the agent fills in its own
      word, and the value the token had the first time would come once more (`s/return$/return VAR/`:
      `$` after the first `return`, so `$/return$/return…`);
    - sed syntax followed by sed syntax, both within a substitution's sides (`$/` in
      `return$/return`, `"]/"` in `"KEY"]/"KEYs"]`): such keys look alike everywhere. The address
      before the sides (`/^$/`), every skill's own, and the close after them are written: they
      hold the policy's syntax steady against the other keys.

    The first rule also takes a literal that follows such a token (` -` after the second ` =` of
    `s/NAME = VALUE$/NAME = -VALUE/`): its key would fire at the first ` =` just as well.

    Nor is sed syntax keyed by a placeholder's token (`"]` after KEY): the agent's own word stands
    there, and it writes that word in its reasons too (`the dict has "values"`), where the syntax
    would follow it and run on (`"values"]"]/"/"/…`). A literal after a placeholder (the `s` of
    KEYs) is still written: that is what the skill adds."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    literal = [m for m in _SPAN.finditer(text) if is_literal_edit(m.group(1))]
    spans = [(m.start(1), m.end(1)) for m in literal]
    sides = [(s.start(1), s.end(2)) for m in literal for s in _SUBSTITUTION.finditer(text, m.start(1), m.end(1))]
    holes = [(m.start(), m.end()) for m in _PLACEHOLDER.finditer(text)]

    def span_of(start: int) -> int | None:
        return next((k for k, (a, b) in enumerate(spans) if a <= start < b), None)

    def sed_syntax(start: int, end: int) -> bool:
        return any(a <= start < b for a, b in sides) and set(text[start:end]) <= _SED_SYNTAX

    span = [span_of(a) for a, _ in offsets]
    hole = [any(a < end and start < b for a, b in holes) for start, end in offsets]
    syntax = [sed_syntax(a, b) for a, b in offsets]
    before_hole = {(span[t], ids[t]) for t in range(len(ids) - 1) if span[t] is not None and hole[t + 1]}
    pairs = []
    for t in range(len(ids) - 1):
        if span[t] is None or span[t] != span[t + 1] or hole[t + 1] or (span[t], ids[t]) in before_hole:
            continue
        if syntax[t] and syntax[t + 1]:
            continue
        if hole[t] and set(text[offsets[t + 1][0]:offsets[t + 1][1]]) <= _SED_SYNTAX:
            continue
        pairs.append((t, ids[t + 1]))
    return ids, pairs


def _layer_modules(model: torch.nn.Module, layers: Sequence[int]) -> dict[int, tuple[str, torch.nn.Module]]:
    spec = find_targets(model, (KIND,))
    modules = dict(model.named_modules())
    by_layer = {m.layer: (m.path, modules[m.path]) for m in spec.modules}
    missing = [layer for layer in layers if layer not in by_layer]
    if missing:
        raise ValueError(f"the base model has no {KIND} in layers {missing} (it has {spec.n_layers} layers)")
    return {layer: by_layer[layer] for layer in layers}


@torch.no_grad()
def read_layers(model: torch.nn.Module, ids: Sequence[int], layers: Sequence[int]) -> tuple[dict[int, Tensor], Tensor]:
    """{layer: the down_proj inputs at every token (T, in)} and the residual norms (layers+1, T)."""
    modules = _layer_modules(model, layers)
    seen: dict[int, Tensor] = {}
    reader = threading.get_ident()  # hooks fire for every forward: keep only this thread's own

    def keep(layer: int):
        def hook(_module, args, _output):
            if threading.get_ident() == reader:
                seen[layer] = args[0][0].float()
        return hook

    handles = [module.register_forward_hook(keep(layer)) for layer, (_, module) in modules.items()]
    try:
        device = next(model.parameters()).device
        backbone = getattr(model, "base_model", model)  # the vocabulary projection is not read
        out = backbone(input_ids=torch.tensor([list(ids)], device=device), output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    norms = torch.stack([h[0].float().norm(dim=-1) for h in out.hidden_states])
    return {layer: seen[layer].cpu() for layer in layers}, norms.cpu()


@dataclass
class LayerMoments:
    """Per layer of the band: the second moment of down_proj's inputs and the mean norm of the
    residual stream after the layer, over reference token sequences."""

    second: dict[int, Tensor]
    norm: dict[int, float]

    @classmethod
    def measure(cls, model: torch.nn.Module, sequences: Sequence[Sequence[int]], layers: Sequence[int]) -> "LayerMoments":
        if not sequences:
            raise ValueError("the memory's moments need at least one reference sequence")
        second: dict[int, Tensor] = {}
        norm_sum = torch.zeros(())  # broadcasts to one entry per hidden state
        count = 0
        for ids in sequences:
            inputs, norms = read_layers(model, ids, layers)
            for layer, x in inputs.items():
                x = x.double()
                second[layer] = second.get(layer, 0) + x.T @ x
            norm_sum = norm_sum + norms.sum(1)
            count += len(ids)
        return cls({layer: s / count for layer, s in second.items()},
                   {layer: float(norm_sum[layer + 1] / count) for layer in layers})


class CommandMemory:
    """Writes skills' literal edits into the down_proj of a band of layers (see the module)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, moments: LayerMoments | Callable[[], LayerMoments], *,
                 layers: Sequence[int] | None = None, scale: float = 1.0, ridge: float = 0.3, shrink: float = 0.01):
        """`moments` may be a function that measures them, with the `layers` it reads: they are then
        measured at the first write, so a run that writes nothing does not wait for them."""
        if isinstance(moments, LayerMoments):
            measured = moments
            self.layers, self._measure = sorted(measured.second), lambda: measured
        elif layers is None:
            raise ValueError("moments measured later need the layers they are read from")
        else:
            self.layers, self._measure = sorted(layers), moments
        self.model, self.tokenizer = model, tokenizer
        self.scale, self.ridge, self.shrink = scale, ridge, shrink
        self.paths = {layer: path for layer, (path, _) in _layer_modules(model, self.layers).items()}
        head = model.get_output_embeddings() or model.get_input_embeddings()
        self.unembedding = head.weight.detach().float().cpu()
        self._whitening: tuple[LayerMoments, dict[int, Tensor]] | None = None
        self._lock = threading.Lock()

    def whitening(self) -> tuple[LayerMoments, dict[int, Tensor]]:
        """The moments and each layer's C⁻¹, with a little of the identity mixed in (the moments
        are read off a few thousand tokens); measured once, at the first call."""
        with self._lock:
            if self._whitening is None:
                moments = self._measure()
                inverse = {}
                for layer, c in moments.second.items():
                    eye = torch.eye(c.shape[0], dtype=c.dtype)
                    inverse[layer] = torch.linalg.inv(c + self.shrink * c.diagonal().mean() * eye)
                self._whitening = moments, inverse
            return self._whitening

    def modules(self) -> list[str]:
        """The paths of the modules the memory writes."""
        return [self.paths[layer] for layer in self.layers]

    def write(self, texts: Sequence[str]) -> list[LoraDelta]:
        return [self._write_one(text) for text in texts]

    def _write_one(self, text: str) -> LoraDelta:
        ids, pairs = code_pairs(self.tokenizer, text)
        if not pairs:
            return {}
        moments, inverse = self.whitening()
        inputs, _ = read_layers(self.model, ids, self.layers)
        targets = torch.stack([self.unembedding[y] / self.unembedding[y].norm() for _, y in pairs]).double().T
        delta: LoraDelta = {}
        for layer in self.layers:
            keys = inputs[layer][[t for t, _ in pairs]].double().T  # (in, n)
            whitened = inverse[layer] @ keys
            gram = keys.T @ whitened
            gram = gram + self.ridge * gram.diagonal().mean() * torch.eye(gram.shape[0], dtype=gram.dtype)
            values = targets * (self.scale * moments.norm[layer] / len(self.layers))
            delta[self.paths[layer]] = LowRank(B=(values @ torch.linalg.inv(gram)).float(), A=whitened.T.float())
        return delta


def save_memory_spec(folder: str | Path, layers: Sequence[int], reference: Sequence[Sequence[int]], *,
                     scale: float = 1.0, ridge: float = 0.3) -> Path:
    """Gives the checkpoint in `folder` a memory: its compiler writes skills' commands into the
    down_proj of `layers`, moments read off the `reference` token sequences when it loads."""
    if not layers or not reference:
        raise ValueError("a memory needs at least one layer and one reference sequence")
    path = Path(folder) / SPEC
    path.write_text(json.dumps({"layers": [int(x) for x in layers], "scale": scale, "ridge": ridge,
                                "reference": [[int(i) for i in ids] for ids in reference]}))
    return path


def load_memory(folder: str | Path, model: torch.nn.Module, tokenizer: Any) -> CommandMemory | None:
    """The memory of the checkpoint in `folder` for `model`, or None when it has none."""
    path = Path(folder) / SPEC
    if not path.is_file():
        return None
    spec = json.loads(path.read_text())
    measure = partial(LayerMoments.measure, model, spec["reference"], spec["layers"])
    return CommandMemory(model, tokenizer, measure, layers=spec["layers"], scale=spec["scale"], ridge=spec["ridge"])
