"""Retrying calls to the Docker engine that fail for reasons that pass (a busy or restarting daemon)."""
from __future__ import annotations

from typing import Callable, TypeVar

import docker.errors
import requests.exceptions
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Server-side 5xx and dropped connections pass; a 4xx (no such container, bad request) does not."""
    if isinstance(exc, docker.errors.NotFound):
        return False
    if isinstance(exc, docker.errors.APIError):
        return exc.status_code is not None and exc.status_code >= 500 and "No such" not in str(exc)
    return isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError))


def transient_retry(call: Callable[..., T]) -> Callable[..., T]:
    """call, retried up to four times with exponential backoff on transient engine errors."""
    return retry(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(4),
        wait=wait_exponential(multiplier=0.2, max=2.0),
        reraise=True,
    )(call)
