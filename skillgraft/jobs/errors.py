"""The one error a job raises, carrying the command's exit code."""
from __future__ import annotations

FAILED, BAD_INPUT, NO_SANDBOX, SETUP_FAILED = 1, 2, 3, 4


class JobError(Exception):
    def __init__(self, message: str, exit_code: int = FAILED):
        super().__init__(message)
        self.exit_code = exit_code
