"""Drafting from the conversation: which tokens prompt lookup proposes, and the cache it leaves."""
from __future__ import annotations

import torch

from skillgraft.agent.models.kv_cache import GrowingCache
from skillgraft.agent.models.lookup_decoding import draft, greedy_with_lookup, keep_first, plain_argmax


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
    sequence = greedy_with_lookup(model, ids, cache, max_new_tokens=12, lookup_tokens=5, stop=set())
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
