"""A small byte-level BPE tokenizer trained offline on the world's own text, with a chat
template, so that `hf:` loads it and formats a conversation exactly as training did."""
from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

SYSTEM, USER, ASSISTANT, END, PAD = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>"
SPECIAL = [PAD, SYSTEM, USER, ASSISTANT, END]
ROLE_TOKENS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}

# No newline between a role token and its content: the content then starts a fresh chunk for
# BPE both when a whole conversation is encoded in training and when a prompt ends at
# "<|assistant|>" at run time, so the reply's first tokens are split the same way in both.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    # Runs of spaces and each digit stand alone, so a name or a line number is the same tokens
    # wherever it appears ("::test_scale" in a test report, "def scale(" in a grep): the policy's
    # main job is copying those from an observation into its next command, and a name that
    # changes tokens with the character before it is much harder to copy for a small model.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(" +"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token=PAD,
                                   additional_special_tokens=[SYSTEM, USER, ASSISTANT])
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 4096
    return fast


def encode_conversation(tokenizer: PreTrainedTokenizerFast, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Token ids of the conversation as the chat template renders it, and a 0/1 mask that is 1
    on the tokens the policy must produce: each assistant reply and the end token closing it."""
    ids: list[int] = []
    mask: list[int] = []
    end = tokenizer.convert_tokens_to_ids(END)
    for message in messages:
        role = tokenizer.convert_tokens_to_ids(ROLE_TOKENS[message["role"]])
        content = tokenizer.encode(message["content"], add_special_tokens=False)
        trained = 1 if message["role"] == "assistant" and message.get("train", True) else 0
        ids += [role] + content + [end]
        mask += [0] + [trained] * (len(content) + 1)
    return ids, mask
