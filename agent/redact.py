"""Removes secrets from anything about to be written: trajectories travel, keys must not.

Two nets: the values of environment variables whose names say they are secret (whatever
their shape), and strings shaped like well-known credentials (whatever their origin, since a
model may print a key it found in a file).
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE", re.IGNORECASE)
# Short values ("1", "true") under secret-looking names are flags, and replacing them would
# shred ordinary text.
_MIN_SECRET_LENGTH = 8

_PATTERNS = [
    re.compile(p)
    for p in (
        r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",  # OpenAI, Anthropic
        r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
        r"github_pat_[A-Za-z0-9_]{30,}",
        r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
        r"AKIA[0-9A-Z]{16}",  # AWS access key id
        r"AIza[0-9A-Za-z_\-]{35}",  # Google API key
        r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
        r"glpat-[A-Za-z0-9_\-]{20,}",  # GitLab
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    )
]
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/\-]{16,}=*")


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names look secret, longest first."""
    environ = os.environ if environ is None else environ
    values = {v for k, v in environ.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    for value in secret_values() if secrets is None else secrets:
        text = text.replace(value, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def redact(obj: Any, secrets: list[str] | None = None) -> Any:
    """A copy of a JSON-like value with every string redacted (dict keys included)."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    if isinstance(obj, dict):
        return {redact(k, secrets): redact(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v, secrets) for v in obj]
    return obj
