# Sourced by the scripts here: make .venv and install tapt into it if that was not done yet.
# TORCH_SPEC picks the torch build (default torch==2.13.0; on a CUDA machine use e.g.
# "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
extras="$1"
stamp=".venv/.tapt-installed-$extras"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first: a bare requirement would pull a multi-GB CUDA build on a CPU machine.
  .venv/bin/python -m pip install -q ${TORCH_SPEC:-torch==2.13.0}
  .venv/bin/python -m pip install -q -e ".[$extras]"
  touch "$stamp"
fi
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
