"""Drafting from the conversation: which tokens prompt lookup proposes, and the cache it leaves."""
from __future__ import annotations

import pytest
import torch

from skillgraft.agent.models.kv_cache import GrowingCache
from skillgraft.agent.models.lookup_decoding import decode_with_lookup, draft, keep_first, plain_argmax, sampler


def test_the_draft_copies_what_followed_the_latest_earlier_match_longest_first():
    #          0  1  2  3  4  5  6  7  8  9
    tokens = [5, 6, 7, 8, 9, 6, 7, 1, 2, 6]
    assert draft(tokens, 3) == [7, 1, 2]  # last token 6: its latest earlier occurrence is at 5
    assert draft(tokens + [7], 3) == [1, 2, 6]  # (6, 7) matched at 5, not at 1
    assert draft([5, 6, 7, 8, 5, 6, 9, 6, 7], 2) == [8, 5]  # (9, 6, 7) never occurred before; (6, 7) did, at 1
    assert draft([1, 2, 3], 4) == []  # the last token never occurred before
    assert draft([4, 4], 4) == [4]  # only what is there to copy
    assert draft([1, 2, 1], 0) == []


def test_plain_argmax_only_without_settings_that_reshape_logits():
    from transformers import GenerationConfig

    assert plain_argmax(GenerationConfig(eos_token_id=2))
    assert not plain_argmax(GenerationConfig(repetition_penalty=1.3))
    assert not plain_argmax(GenerationConfig(no_repeat_ngram_size=3))


def test_the_loop_leaves_the_cache_holding_every_token_but_the_last():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2, eos_token_id=None)).eval()
    ids = [3, 9, 4, 3, 9, 4, 3, 9]
    cache = GrowingCache()
    sequence = decode_with_lookup(model, ids, cache, max_new_tokens=12, lookup_tokens=5, stop=set())
    assert sequence[:len(ids)] == ids and len(sequence) == len(ids) + 12
    assert cache.get_seq_length() == len(sequence) - 1
    with torch.no_grad():  # the kept states are those a fresh read of the sequence computes
        fresh = model(input_ids=torch.tensor([sequence[:-1]]), use_cache=True).cache
    for layer, other in zip(cache.layers, fresh.layers):
        assert torch.allclose(layer.keys, other.keys, atol=1e-5) and torch.allclose(layer.values, other.values, atol=1e-5)
    plain = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)
    assert sequence == plain[0].tolist()
    keep_first(cache, 4)
    assert cache.get_seq_length() == 4
    keep_first(cache, 10)  # never grows
    assert cache.get_seq_length() == 4


def _tiny_lm(vocab: int = 6):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, eos_token_id=None)).eval()


def test_sampling_with_drafts_draws_replies_with_the_models_own_probabilities():
    """Two-token replies sampled with drafts (the prompt repeats, so most second tokens are
    drafted) are as frequent as the model's exact probability of each pair says."""
    model = _tiny_lm()
    ids = [1, 2, 3, 1, 2, 3, 1, 2]
    with torch.no_grad():
        first = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1], -1)
        second = torch.softmax(model(input_ids=torch.tensor([[*ids, t] for t in range(6)])).logits[:, -1], -1)
    exact = first[:, None] * second  # p(t1) p(t2 | t1)
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(6, 6)
    runs = 3000
    for _ in range(runs):
        out = decode_with_lookup(model, ids, GrowingCache(), max_new_tokens=2, lookup_tokens=3, stop=set(),
                                 choose=sampler(1.0, generator))
        counts[out[-2], out[-1]] += 1
    distance = 0.5 * (counts / runs - exact).abs().sum().item()  # total variation
    assert distance < 0.05, distance


def test_sampling_replays_with_the_same_generator_and_nears_greedy_when_cold():
    model = _tiny_lm(vocab=32)
    ids = [4, 5, 6, 4, 5]

    def run(temperature: float, seed: int) -> list[int]:
        return decode_with_lookup(model, ids, GrowingCache(), max_new_tokens=10, lookup_tokens=4, stop=set(),
                                  choose=sampler(temperature, torch.Generator().manual_seed(seed)))

    assert run(1.5, 7) == run(1.5, 7)
    assert len({tuple(run(1.5, seed)) for seed in range(6)}) > 1
    greedy = decode_with_lookup(model, ids, GrowingCache(), max_new_tokens=10, lookup_tokens=4, stop=set())
    assert run(1e-4, 1) == greedy
    with pytest.raises(ValueError, match="temperature"):
        sampler(0.0, torch.Generator())
