#!/usr/bin/env bash
# Sets up a fresh machine (see setup.sh) and runs the whole test suite with the project's
# virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True TOKENIZERS_PARALLELISM=false
.venv/bin/python -m pytest -q -ra --durations=15 "$@"
