"""Suite-wide set-up: offline libraries, a private home folder, and engine checks.

Tests marked `docker` need a running engine, tests marked `browser` headless chromium and its
driver. On CI a missing one is an error, not a skip: the test command installs them, so their
absence means the set-up broke.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True, scope="session")
def _private_home(tmp_path_factory):
    """Keeps every test's state out of the user's ~/.skillgraft. The text encoder is exported once
    for the whole suite, whatever home folder a test then chooses."""
    home = tmp_path_factory.mktemp("skillgraft-home")
    saved = {key: os.environ.get(key) for key in ("SKILLGRAFT_HOME", "SKILLGRAFT_ENCODER_CACHE")}
    os.environ["SKILLGRAFT_HOME"] = str(home)
    os.environ["SKILLGRAFT_ENCODER_CACHE"] = str(home / "cache" / "encoders")
    yield home
    for key, old in saved.items():
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old


def _docker_reason() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure to reach the engine
        return f"no Docker engine reachable ({exc.__class__.__name__}); run scripts/setup.sh"
    return None


def _browser_reason() -> str | None:
    import shutil

    missing = [tool for tool in ("chromium", "chromedriver") if shutil.which(tool) is None]
    return f"no {' or '.join(missing)} on the PATH; scripts/test.sh installs them" if missing else None


def pytest_collection_modifyitems(config, items):
    for marker, check in (("docker", _docker_reason), ("browser", _browser_reason)):
        if not any(marker in item.keywords for item in items):
            continue
        reason = check()
        if reason is None:
            continue
        if os.environ.get("CI"):
            raise pytest.UsageError(reason)
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)
