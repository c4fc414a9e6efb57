"""Hosted models and OpenAI-compatible servers through litellm.

Rate limits, timeouts, dropped connections and 5xx answers are the provider's trouble, not
the task's: they are retried with exponential backoff and never surface as a failed run
unless every attempt fails. Cost comes from litellm's price table; a model it has no price
for (a local server) costs 0 rather than stopping the run.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tenacity import Retrying, before_sleep_log, retry_if_exception_type, stop_after_attempt, wait_exponential

from skillgraft.agent.models.base import ModelError, ModelReply, Sampling

# litellm downloads a price map at import time unless told to use its bundled copy; the
# sandboxed machines this runs on have no network, and a hang on import helps nobody.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

logger = logging.getLogger(__name__)

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one bash command in the repository and get its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command to run."}},
            "required": ["command"],
        },
    },
}


def _litellm():
    # Imported on first use: litellm takes seconds to import and most commands never need it.
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def transient_errors() -> tuple[type[BaseException], ...]:
    """Provider errors worth retrying: they say nothing about the request itself."""
    lm = _litellm()
    return (
        lm.RateLimitError,
        lm.Timeout,
        lm.APIConnectionError,
        lm.InternalServerError,
        lm.ServiceUnavailableError,
        lm.BadGatewayError,
    )


class LitellmModel:
    """A litellm model string such as "anthropic/claude-sonnet-4-5" or "openai/<name>" with api_base.

    tools: use a `bash` tool call (True), fenced blocks only (False), or ask litellm whether
    the model supports function calling (None). mock_script: per-attempt extra arguments for
    litellm.completion (e.g. {"mock_response": "litellm.RateLimitError"}), consumed one per API
    attempt, so provider behaviour can be scripted offline through litellm's own mock path.
    """

    def __init__(
        self,
        name: str,
        *,
        tools: bool | None = None,
        model_kwargs: dict[str, Any] | None = None,
        attempts: int = 8,
        wait_min: float = 2.0,
        wait_max: float = 60.0,
        mock_script: Iterable[dict[str, Any]] | None = None,
    ):
        self.name = name
        self.model_kwargs = dict(model_kwargs or {})
        self.attempts = attempts
        self.wait_min, self.wait_max = wait_min, wait_max
        self._script = list(mock_script) if mock_script is not None else None
        try:
            _litellm().get_llm_provider(name, api_base=self.model_kwargs.get("api_base"))
        except Exception as exc:  # litellm raises its BadRequestError for a name it cannot route
            raise ModelError(f"litellm does not know a provider for model {name!r} (write it as provider/model)") from exc
        self.tools = self._supports_tools() if tools is None else tools
        self.retries = 0  # transient errors survived, over the model's life

    @contextmanager
    def sampled(self, sampling: Sampling) -> Iterator[None]:
        """Asks for `sampling.temperature` until the block ends; the provider draws anew at every
        call, so the stream needs nothing more."""
        before = dict(self.model_kwargs)
        self.model_kwargs["temperature"] = sampling.temperature
        try:
            yield
        finally:
            self.model_kwargs = before

    def _supports_tools(self) -> bool:
        try:
            return bool(_litellm().supports_function_calling(self.name))
        except Exception:  # unknown model or provider: plain text is the safe choice
            return False

    def query(self, messages: list[dict]) -> ModelReply:
        import openai  # litellm's exceptions derive from the openai client's

        retrying = Retrying(
            reraise=True,
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=1, min=self.wait_min, max=self.wait_max),
            retry=retry_if_exception_type(transient_errors()),
            before_sleep=self._note_retry,
        )
        try:
            response = retrying(self._complete, messages)
        except transient_errors() as exc:
            raise ModelError(f"{self.name}: provider still failing after {self.attempts} attempts: {exc}") from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.name}: {exc}") from exc
        return self._reply(response)

    def _note_retry(self, state) -> None:
        self.retries += 1
        before_sleep_log(logger, logging.WARNING)(state)

    def _complete(self, messages: list[dict]):
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages, **self.model_kwargs}
        if self.tools:
            kwargs["tools"] = [BASH_TOOL]
        if self._script is not None:
            if not self._script:
                raise ModelError(f"{self.name}: mock script used up")
            kwargs.update(self._script.pop(0))
        # Retries are ours (tenacity), so litellm must not retry underneath them.
        return _litellm().completion(num_retries=0, **kwargs)

    def _reply(self, response) -> ModelReply:
        choice = response.choices[0]
        message = choice.message
        content = message.content or ""
        command, call_id = _bash_call(getattr(message, "tool_calls", None) or [])
        usage = {}
        if getattr(response, "usage", None) is not None:
            usage = {k: getattr(response.usage, k, None) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        usage["finish_reason"] = choice.finish_reason
        return ModelReply(content=content, cost=self._cost(response), tool_command=command, usage=usage, tool_call_id=call_id)

    def _cost(self, response) -> float:
        try:
            return float(_litellm().completion_cost(completion_response=response, model=self.name) or 0.0)
        except Exception:  # no price known for this model: count it as free rather than fail
            return 0.0


def _bash_call(tool_calls: list) -> tuple[str | None, str | None]:
    """The command of the reply's single bash call; (None, None) when there is not exactly one,
    which the loop then treats like a reply without a bash block."""
    if len(tool_calls) != 1 or tool_calls[0].function.name != "bash":
        return None, None
    try:
        args = json.loads(tool_calls[0].function.arguments or "{}")
    except json.JSONDecodeError:
        return None, None
    command = args.get("command") if isinstance(args, dict) else None
    if not isinstance(command, str) or not command.strip():
        return None, None
    return command, tool_calls[0].id
