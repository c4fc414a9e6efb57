"""The sandbox image's tag and the ways to build it: what the command line names before any
engine is asked (importing the Docker SDK costs a command's start-up a tenth of a second)."""
from __future__ import annotations

IMAGE_TAG = "skillgraft-sandbox:1"
METHODS = ("auto", "dockerfile", "debootstrap")
