"""bench_store's count of the encoder's work, against torch's own count of the same forward pass."""
import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.bench_store import encoder_flops
from skillgraft.skills.embedder import minilm_path


@pytest.mark.parametrize("tokens", [1, 37, 256])
def test_encoder_flops_equals_torchs_count_of_the_minilm_forward(tokens):
    from transformers import AutoModel

    folder = minilm_path()
    config = json.loads((folder / "config.json").read_text())
    # Eager attention, so torch counts the attention products too; no pooler, which the embedder never runs.
    model = AutoModel.from_pretrained(folder, attn_implementation="eager", add_pooling_layer=False).eval()
    ids = torch.arange(1000, 1000 + tokens).unsqueeze(0)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert encoder_flops(config, tokens) == counter.get_total_flops()
