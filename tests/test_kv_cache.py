"""The growing key/value cache: the same states and the same greedy tokens as transformers' own
cache, kept in place across growth and cropping, on a real tiny Llama."""
from __future__ import annotations

import torch
from transformers import DynamicCache, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

from skillgraft.agent.models.kv_cache import MIN_ROOM, GrowingCache, growing_cache


def _model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=120, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    return LlamaForCausalLM(config).eval()


def _generate(model, prompt: torch.Tensor, cache, new: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
                             min_new_tokens=new, do_sample=False, cache=cache, pad_token_id=0)
    return out[0].tolist()


def test_decoding_past_the_first_buffer_gives_the_same_tokens_and_states():
    model = _model()
    prompt = torch.randint(3, 120, (1, MIN_ROOM - 20), generator=torch.Generator().manual_seed(1))
    growing, dynamic = GrowingCache(), DynamicCache()
    assert _generate(model, prompt, growing, 60) == _generate(model, prompt, dynamic, 60)
    assert growing.get_seq_length() == dynamic.get_seq_length() > MIN_ROOM  # the buffer had to grow once
    for mine, theirs in zip(growing.layers, dynamic.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)
        assert mine.keys.untyped_storage().nbytes() >= 2 * MIN_ROOM * mine.keys.shape[-1] * mine.keys.shape[1] * 4


def test_a_cropped_cache_continues_like_a_fresh_read_of_the_kept_prefix():
    """What an agent's next turn does: keep the shared prefix, run only what differs."""
    model = _model()
    g = torch.Generator().manual_seed(2)
    first = torch.randint(3, 120, (1, 90), generator=g)
    cache = GrowingCache()
    _generate(model, first, cache, 12)
    cache.crop(-(cache.get_seq_length() - 70))  # the next prompt shares 70 tokens with the last one
    following = torch.randint(3, 120, (1, 25), generator=g)
    prompt = torch.cat([first[:, :70], following], dim=1)
    assert _generate(model, prompt, cache, 15) == _generate(model, prompt, DynamicCache(), 15)
    assert cache.get_seq_length() == 70 + 25 + 15 - 1


def test_models_with_sliding_window_layers_keep_their_own_cache():
    sliding = Gemma3TextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8)
    assert growing_cache(sliding) is None
    assert isinstance(growing_cache(_model().config), GrowingCache)
