"""The repository's start state inside a sandbox, and its diff against it, as shell scripts.

Both backends run these as the sandbox user in /repo. The start state is a commit under
refs/skillgraft/start built with a scratch index, so the agent's index, HEAD and history stay as
they were; the diff builds another scratch index from the worktree, so new files show up and
ignored ones do not. A folder that is not a repository yet gets one, with a first commit.
"""

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

# The diff is the task's result, not an observation: it is kept whole up to this many characters.
DIFF_LIMIT = 20_000_000
