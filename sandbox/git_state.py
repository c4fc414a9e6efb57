"""The repository's start state inside a sandbox, and its diff against it, as shell scripts.

Both backends run these as the sandbox user in /repo. The start state is a commit under
refs/skillgraft/start built with a scratch index, so the agent's index, HEAD and history stay as
they were; the diff builds another scratch index from the worktree, so new files show up and
ignored ones do not. A folder that is not a repository yet gets one, with a first commit.
"""
import shlex
from collections.abc import Sequence

from skillgraft.sandbox.base import SandboxError

IDENTITY = "-c user.name=agent -c user.email=agent@sandbox"

GIT_START = rf"""
set -e
exclude() {{ mkdir -p .git/info && printf '%s\n' '__pycache__/' '*.pyc' '.pytest_cache/' >> .git/info/exclude; }}
if [ ! -d .git ]; then
  # No templates: sample hooks are dead weight, and skipping them makes init much cheaper.
  git init -q -b main --template=
  exclude
  git add -A
  git {IDENTITY} commit -q --allow-empty --no-verify -m "start"
  git update-ref refs/skillgraft/start HEAD
else
  exclude
  export GIT_INDEX_FILE="$(mktemp)"
  rm -f "$GIT_INDEX_FILE"
  git add -A
  tree=$(git write-tree)
  rm -f "$GIT_INDEX_FILE"
  git update-ref refs/skillgraft/start "$(git {IDENTITY} commit-tree -m start "$tree")"
fi
"""

GIT_DIFF = r"""
export GIT_INDEX_FILE="$(mktemp)"
rm -f "$GIT_INDEX_FILE"
git add -A && git diff --cached --binary refs/skillgraft/start
status=$?
rm -f "$GIT_INDEX_FILE"
exit $status
"""

# Puts the files matching the pathspecs back as they were at the start (a file the agent added is
# removed) and prints the paths it restored, one per line. The agent's index and HEAD stay as they were.
GIT_RESTORE = r"""
set -e
export GIT_INDEX_FILE="$(mktemp)"
rm -f "$GIT_INDEX_FILE"
git add -A
changed=$(git diff --cached --name-only --no-renames refs/skillgraft/start -- "$@")
rm -f "$GIT_INDEX_FILE"
unset GIT_INDEX_FILE
printf '%s\n' "$changed" | while IFS= read -r path; do
  [ -n "$path" ] || continue
  if git cat-file -e "refs/skillgraft/start:$path" 2>/dev/null; then
    git restore --source=refs/skillgraft/start --worktree -- ":(literal)$path"
  else
    rm -f -- "$path"
  fi
  printf '%s\n' "$path"
done
"""

# Prints the id of a tree holding the worktree as it is (ignored files left out): equal ids, equal
# files. The tree is written to the object store, so the files can be put back later (GIT_REWIND).
GIT_SNAPSHOT = r"""
export GIT_INDEX_FILE="$(mktemp)"
rm -f "$GIT_INDEX_FILE"
git add -A && git write-tree
status=$?
rm -f "$GIT_INDEX_FILE"
exit $status
"""

# Makes the worktree hold exactly the files of tree $1 (from GIT_SNAPSHOT): files added since are
# removed (and the folders they leave empty), changed and deleted ones written back. Ignored
# files, the agent's index and HEAD stay.
GIT_REWIND = r"""
set -e
export GIT_INDEX_FILE="$(mktemp)"
rm -f "$GIT_INDEX_FILE"
git add -A
git diff --cached --name-only --no-renames --diff-filter=A -z "$1" | xargs -0 -r sh -c '
  for p; do rm -f -- "$p"; d=$(dirname -- "$p"); [ "$d" = . ] || rmdir -p -- "$d" 2>/dev/null || true; done' _
git read-tree "$1"
git checkout-index -a -f
rm -f "$GIT_INDEX_FILE"
"""

# The diff is the task's result, not an observation: it is kept whole up to this many characters.
DIFF_LIMIT = 20_000_000


def restore_files(run, timeout: float, globs: Sequence[str]) -> list[str]:
    """Restores the files matching globs (relative to the repository) to their start state through
    a backend's `run`; the paths that the agent had changed, added or deleted."""
    specs = " ".join(shlex.quote(f":(glob){g}") for g in globs)
    result = run(f"set -- {specs}\n{GIT_RESTORE}", timeout, DIFF_LIMIT)
    if result.returncode != 0:
        raise SandboxError(f"could not restore the task's test files: {result.output.strip()[:2000]}")
    return [line for line in result.output.splitlines() if line]


def read_diff(run, timeout: float) -> str:
    """The patch, from a backend's `run(script, timeout, limit) -> ExecResult`; SandboxError when
    git fails or the patch is too long to be one anyone could review."""
    result = run(GIT_DIFF, timeout, DIFF_LIMIT)
    if result.returncode != 0:
        raise SandboxError(f"git diff failed in the sandbox: {result.output.strip()[:2000]}")
    if result.elided:
        raise SandboxError(f"the diff is longer than {DIFF_LIMIT} characters; it is not a patch anyone can review")
    return result.output


def snapshot_tree(run, timeout: float) -> str:
    """The id of a tree holding the worktree's files as they are now (GIT_SNAPSHOT)."""
    result = run(GIT_SNAPSHOT, timeout, 4096)
    tree = result.output.strip()
    if result.returncode != 0 or len(tree) not in (40, 64):
        raise SandboxError(f"could not snapshot the repository: {result.output.strip()[:2000]}")
    return tree


def rewind_tree(run, timeout: float, tree: str) -> None:
    """Puts the worktree's files back as they were in `tree` (an id snapshot_tree returned)."""
    if not tree or any(c not in "0123456789abcdef" for c in tree):
        raise SandboxError(f"not a tree id: {tree!r}")
    result = run(f"set -- {tree}\n{GIT_REWIND}", timeout, DIFF_LIMIT)
    if result.returncode != 0:
        raise SandboxError(f"could not put the repository back to {tree[:12]}: {result.output.strip()[:2000]}")
