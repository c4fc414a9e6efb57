"""Decoding that drafts its next tokens from the conversation (prompt lookup).

An agent's reply copies a great deal from what it has read: file names, commands, lines of code,
the skill's own edit. After each chosen token, the tokens that followed the latest earlier
occurrence of the last few tokens are taken as a draft, and the model runs its last token and the
whole draft in one forward pass. It keeps the draft's tokens up to the first one it would not
have chosen itself, and that pass has already given its own choice at that point, so every step
yields at least one token. On a CPU a forward pass over ten tokens costs little more than one
over a single token (both read all the weights once), so each accepted draft token is nearly free.

The tokens chosen are greedy decoding's: a draft only skips passes, never changes a choice (up to
float rounding, which differs between a pass over one token and one over several; the tests and
bench_agent_turns check the replies against plain greedy decoding).

Sampling keeps that property: each position of the pass draws its token from the model's
distribution given the tokens before it, which are the sequence's own as long as the draft was
kept, so keeping the draft up to the first draw that differs from it, and that draw, is a sample
of the whole reply. The draws come from a generator of the caller's, never the global one, so
threads that sample at once do not take each other's random numbers.

transformers' own prompt lookup (`generate(prompt_lookup_num_tokens=...)`) runs the whole prompt
again when handed a cache that already holds part of it, so it cannot continue the conversation's
kept cache; this loop starts from whatever the cache holds.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

LONGEST_MATCH = 3  # tokens matched to find where to copy from; shorter matches are tried next


def draft(tokens: Sequence[int], size: int, longest: int = LONGEST_MATCH) -> list[int]:
    """Up to size tokens that followed the latest earlier occurrence of tokens' last n tokens
    (n from longest down to 1), or [] when even the last token never occurred before."""
    if size <= 0:
        return []
    end = len(tokens)
    for n in range(min(longest, end - 1), 0, -1):
        tail = list(tokens[end - n:])
        for start in range(end - n - 1, -1, -1):
            if tokens[start] == tail[0] and list(tokens[start:start + n]) == tail:
                follow = list(tokens[start + n:start + n + size])
                if follow:
                    return follow
    return []


# Generation settings that make a greedy choice other than the raw logits' argmax; a model whose
# generation config sets one of them is decoded by transformers' generate() instead.
_SHAPING = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
            "bad_words_ids": None, "suppress_tokens": None, "begin_suppress_tokens": None, "sequence_bias": None,
            "min_length": 0, "min_new_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None}


def plain_argmax(generation_config: Any) -> bool:
    """Whether greedy decoding under this generation config is the argmax of the raw logits."""
    return all(getattr(generation_config, name, neutral) in (neutral, None) for name, neutral in _SHAPING.items())


def stop_ids(generation_config: Any) -> set[int]:
    eos = getattr(generation_config, "eos_token_id", None)
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


Choose = Callable[[torch.Tensor], list[int]]  # a pass's logits (positions x vocabulary) -> a token each


def greedy(logits: torch.Tensor) -> list[int]:
    return logits.argmax(-1).tolist()


def sampler(temperature: float, generator: torch.Generator) -> Choose:
    """Draws each position's token from softmax(logits / temperature) with `generator`."""
    if temperature <= 0:
        raise ValueError(f"sampling needs a temperature above 0, not {temperature}")

    def choose(logits: torch.Tensor) -> list[int]:
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).tolist()

    return choose


@torch.no_grad()
def decode_with_lookup(model: Any, ids: list[int], cache: Any, *, max_new_tokens: int, lookup_tokens: int,
                       stop: set[int], device: str | torch.device = "cpu", choose: Choose = greedy) -> list[int]:
    """The whole sequence (ids then the reply), each token picked by `choose` (greedy by default);
    cache holds the states of ids' first cache.get_seq_length() tokens (none for a fresh cache)
    and is left holding states for every token of the sequence but the last, ready for the next
    turn."""
    held = cache.get_seq_length()
    if held >= len(ids):
        raise ValueError(f"the cache holds {held} tokens; at least the prompt's last of {len(ids)} must be run")
    sequence = list(ids)
    pending = sequence[held:]  # tokens to run: the uncached prompt first, then last token + draft
    proposed: list[int] = []
    new = 0
    while True:
        run = torch.tensor([pending + proposed], device=device)
        logits = model(input_ids=run, cache=cache, use_cache=True, logits_to_keep=len(proposed) + 1).logits
        choices = choose(logits[0])
        kept = 0
        while kept < len(proposed) and choices[kept] == proposed[kept]:
            kept += 1
        if kept < len(proposed):  # states of the rejected draft tokens go
            keep_first(cache, len(sequence) + kept)
        done = False
        for token in proposed[:kept] + [choices[kept]]:
            sequence.append(token)
            new += 1
            if token in stop or new >= max_new_tokens:
                done = True
                break
        if done:
            break
        pending = sequence[-1:]
        proposed = draft(sequence, min(lookup_tokens, max_new_tokens - new))
    keep_first(cache, len(sequence) - 1)
    return sequence


def keep_first(cache: Any, n: int) -> None:
    """Drops the cache's states past its first n tokens (its crop takes the count to remove)."""
    extra = cache.get_seq_length() - n
    if extra > 0:
        cache.crop(-extra)
