#!/usr/bin/env bash
# Sets up a fresh machine (see setup.sh) and runs the whole test suite with the project's
# virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The web pages are tested in a real headless browser: Debian's chromium and its driver.
if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  printf '\n== installing chromium and chromium-driver for the browser tests\n'
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True TOKENIZERS_PARALLELISM=false
.venv/bin/python -m pytest -q -ra --durations=15 "$@"
