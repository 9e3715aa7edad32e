#!/usr/bin/env bash
# The FinOps Foundation's FOCUS validator for the FOCUS export's conformance test:
# focus-validator 2.2.1 (it ships the FOCUS 1.2.0.1 rules) in a Python 3.12 virtual environment of
# its own under a cache folder, reused when it already imports. Writes the validator's path to
# .ci/.focus-validator (about a minute the first time; the cache folder is kept between runs).
# numpy 2 replaces the numpy<2 the package pins, in a second pip call (pip will not resolve both
# in one): its pyarrow wants numpy 2, and the validator runs with it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${PLANNER_CI_FOCUS_VALIDATOR_VENV:-$HOME/.cache/planner-ci/focus-validator}"
if ! "$venv/bin/python" -c "import focus_validator" >/dev/null 2>&1; then
  # the first Python 3.12 that runs: $PLANNER_CI_PYTHON312, python3.12 on PATH, pyenv's 3.12.1
  python312=""
  for candidate in "${PLANNER_CI_PYTHON312:-}" python3.12 \
    "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions/3.12.1/bin/python3.12"; do
    if [ -n "$candidate" ] && "$candidate" -c "import sys; assert sys.version_info[:2] == (3, 12)" \
      >/dev/null 2>&1; then
      python312="$candidate"
      break
    fi
  done
  if [ -z "$python312" ]; then
    echo "error: focus-validator needs Python 3.12 (python3.12 on PATH or pyenv's 3.12.1)" >&2
    exit 1
  fi
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python312" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check focus-validator==2.2.1
  # its output is only pip's warning that focus-validator pins numpy<2 (expected): shown on failure
  if ! log="$("$venv/bin/pip" install --quiet --disable-pip-version-check "numpy>=2" 2>&1)"; then
    echo "$log" >&2
    exit 1
  fi
fi
"$venv/bin/python" -c "import importlib.metadata as m, focus_validator
print('focus-validator', m.version('focus-validator'), 'numpy', m.version('numpy'))"
echo "$venv/bin/focus-validator" > .ci/.focus-validator
