"""Local transformers causal LMs (`hf:<path>`) that take PEFT LoRA adapters.

One adapter is active at a time: loading wraps the base in a PeftModel, unloading strips the
LoRA layers again without merging them, so the base weights are never changed and outputs
after unloading equal those before loading.
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillgraft.agent.models.base import ModelError, ModelReply, Sampling
from skillgraft.agent.models.draws import draw_seed

# transformers' loading contexts (meta-device init, default dtype) are process-global, so two
# threads loading at once can leave one model on the meta device, and its lazy imports are not
# safe to race either: one load (and first import) at a time.
_LOADING = threading.Lock()
LOOKUP_TOKENS = 10  # drafted per step in greedy decoding (lookup_decoding)
# Used when a tokenizer has no chat template (a policy trained from scratch, as the tests build): short role tags.
PLAIN_ROLE_TAGS = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}


def plain_chat_text(messages: list[dict], add_generation_prompt: bool = True) -> str:
    parts = [f"{PLAIN_ROLE_TAGS.get(m['role'], '<|' + m['role'] + '|>')}\n{m.get('content') or ''}\n" for m in messages]
    if add_generation_prompt:
        parts.append(f"{PLAIN_ROLE_TAGS['assistant']}\n")
    return "".join(parts)


class HFModel:
    """A causal LM loaded from a local folder; greedy decoding unless temperature > 0.

    max_context: tokens the prompt plus reply may use (default: the model's position limit).
    Older turns are dropped first; the system prompt and the task message always stay.

    The key/value cache of the last call is kept: an agent's next prompt is the last one plus
    the reply and an observation, so only those new tokens are run through the model (the
    longest common prefix of token ids decides what is reused). Loading or unloading an
    adapter drops it, since the cached states were computed with other weights. The cache grows
    in place (`kv_cache.GrowingCache`), so a decoding step does not copy the whole conversation.

    lookup_tokens: up to this many next tokens are drafted by copying from the conversation and
    checked in one forward pass (`lookup_decoding`); the tokens chosen are the same either way.
    0 turns it off.

    temperature > 0 samples. Each reply's draws come from a generator seeded by `seed` and the
    conversation (`draws.draw_seed`: the figures of observations left out, so a test run's
    duration does not change them), so a conversation replays, two tasks draw differently, and
    threads that sample at once do not disturb each other.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        device: str | None = None,
        max_new_tokens: int = 256,
        max_context: int | None = None,
        temperature: float = 0.0,
        dtype: str | None = None,
        seed: int = 0,
        reuse_cache: bool = True,
        lookup_tokens: int = LOOKUP_TOKENS,
    ):
        import torch

        self.path = Path(path).expanduser()
        if not (self.path / "config.json").is_file():
            raise ModelError(f"hf:{path}: no config.json there; give the folder of a saved transformers model")
        self.name = f"hf:{self.path}"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.seed = seed
        self._stream = 0  # which of the seed's streams of draws (Sampling.stream)
        self.dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        try:
            with _LOADING:
                from transformers import AutoTokenizer

                self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{self.name}: cannot load tokenizer: {exc}") from exc
        self._base = self._load_base()
        self._model = self._base
        self.adapter_dir: Path | None = None
        self.reuse_cache = reuse_cache
        if lookup_tokens < 0:
            raise ModelError(f"{self.name}: lookup_tokens must be 0 (off) or more, not {lookup_tokens}")
        self.lookup_tokens = lookup_tokens
        self._cache: tuple[list[int], Any] | None = None  # (token ids the cache holds, the cache)
        self._lock = threading.Lock()
        limit = getattr(self._base.config, "max_position_embeddings", None) or 2048
        self.max_context = min(max_context or limit, limit)
        if self.max_new_tokens >= self.max_context:
            raise ModelError(f"{self.name}: max_new_tokens {max_new_tokens} leaves no room in a {self.max_context}-token context")

    def _load_base(self):
        try:
            with _LOADING:
                from transformers import AutoModelForCausalLM

                model = AutoModelForCausalLM.from_pretrained(self.path, dtype=self.dtype).to(self.device)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{self.name}: cannot load model: {exc}") from exc
        return model.eval()

    # -- adapters -------------------------------------------------------------------------

    @property
    def base_config(self) -> Any:
        return self._base.config

    def load_adapter(self, adapter_dir: Path) -> None:
        """Activates a PEFT LoRA adapter folder, replacing any active one."""
        from peft import PeftModel

        from skillgraft.hypernet.peft_io import BaseMismatchError, check_base
        from skillgraft.skills.adapter_files import AdapterFormatError, check_adapter_files

        adapter_dir = Path(adapter_dir)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise ModelError(f"{adapter_dir}: not a PEFT adapter folder (no adapter_config.json)")
        try:
            check_adapter_files(adapter_dir)  # before PEFT touches the base
        except AdapterFormatError as exc:
            raise ModelError(str(exc)) from None
        self.unload_adapter()
        self._cache = None
        try:
            check_base(adapter_dir, self._base)
        except BaseMismatchError as exc:
            raise ModelError(f"adapter does not fit {self.name}: {exc}") from exc
        try:
            with warnings.catch_warnings():
                # PEFT asks transformers about gradient checkpointing through a name transformers
                # has deprecated; the warning, repeated for every episode, says nothing to the user.
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                self._model = PeftModel.from_pretrained(self._base, str(adapter_dir), is_trainable=False)
        except (RuntimeError, ValueError, KeyError) as exc:
            # PEFT injects its layers before it finds the shapes wrong, leaving the base altered:
            # reload it so a refused adapter leaves no trace.
            self._base = self._model = self._load_base()
            raise ModelError(f"{adapter_dir}: adapter does not fit {self.name}: {exc}") from exc
        self._model.eval()
        self.adapter_dir = adapter_dir

    def unload_adapter(self) -> None:
        if self.adapter_dir is None:
            return
        self._base = self._model.unload()
        self._model = self._base
        self.adapter_dir = None
        self._cache = None

    # -- generation -----------------------------------------------------------------------

    def render(self, messages: list[dict]) -> str:
        """The prompt text for messages, with the generation prompt appended."""
        plain = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True)
        return plain_chat_text(plain)

    def prompt_ids(self, messages: list[dict]) -> tuple[list[int], int]:
        """Token ids of the prompt that fits the context, and how many messages were dropped."""
        budget = self.max_context - self.max_new_tokens
        head, turns = messages[:2], list(messages[2:])
        dropped = 0
        while True:
            ids = self._encode(self.render(head + turns))
            if len(ids) <= budget or not turns:
                break
            # Drop the oldest exchange whole, so a reply is never left without what it answered.
            cut = 2 if len(turns) > 2 else 1
            turns, dropped = turns[cut:], dropped + cut
        if len(ids) > budget:  # the task message alone is too long: keep its most recent end
            ids = ids[-budget:]
        return ids, dropped

    def _encode(self, text: str) -> list[int]:
        # Templates already carry their special tokens; adding more would double the BOS.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _reusable(self, ids: list[int]):
        """(cache cut to the longest prefix it shares with ids, its length), or (None, 0)."""
        if self._cache is None:
            return None, 0
        held, cache = self._cache
        self._cache = None
        same = 0
        for a, b in zip(held, ids[:-1]):  # at least the last prompt token is always run
            if a != b:
                break
            same += 1
        if same == 0:
            return None, 0
        from skillgraft.agent.models.lookup_decoding import keep_first

        try:
            keep_first(cache, same)
        except (RuntimeError, ValueError):  # a sliding-window layer that cannot roll back
            return None, 0
        return cache, same

    @contextmanager
    def sampled(self, sampling: Sampling) -> Iterator[None]:
        """Samples at `sampling.temperature` from stream `sampling.stream` until the block ends."""
        before = self.temperature, self._stream
        self.temperature, self._stream = sampling.temperature, sampling.stream
        try:
            yield
        finally:
            self.temperature, self._stream = before

    def query(self, messages: list[dict]) -> ModelReply:
        import torch

        from skillgraft.agent.models.kv_cache import growing_cache
        from skillgraft.agent.models.lookup_decoding import decode_with_lookup, greedy, plain_argmax, sampler, stop_ids

        ids, dropped = self.prompt_ids(messages)
        if not ids:
            raise ModelError(f"{self.name}: empty prompt")
        sampling = self.temperature > 0
        seed = draw_seed(self.seed, self._stream, messages) if sampling else None
        with self._lock, torch.no_grad():
            cache, reused = self._reusable(ids)
            if cache is None:
                cache = growing_cache(self._base.config)
            if cache is not None and (self.lookup_tokens or sampling) and plain_argmax(self._base.generation_config):
                choose = sampler(self.temperature, torch.Generator().manual_seed(seed)) if sampling else greedy
                sequence = decode_with_lookup(self._model, ids, cache, max_new_tokens=self.max_new_tokens,
                                              lookup_tokens=self.lookup_tokens,
                                              stop=stop_ids(self._base.generation_config), device=self.device,
                                              choose=choose)
                kept = cache
            else:
                if sampling:  # generate() draws from the global generator
                    torch.manual_seed(seed)
                input_ids = torch.tensor([ids], device=self.device)
                pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
                out = self._model.generate(
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=sampling,
                    temperature=self.temperature if sampling else None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=pad,
                    return_dict_in_generate=True,
                    **({"cache": cache} if cache is not None else {}),  # None: the model's own kind of cache
                )
                sequence = out.sequences[0].tolist()
                kept = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
            if kept is not None and self.reuse_cache:
                self._cache = (sequence[:kept.get_seq_length()], kept)
        new = sequence[len(ids):]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        usage = {"prompt_tokens": len(ids), "completion_tokens": len(new), "dropped_messages": dropped,
                 "cached_tokens": reused}
        if self.adapter_dir is not None:
            usage["adapter"] = str(self.adapter_dir)
        return ModelReply(content=text, usage=usage)
