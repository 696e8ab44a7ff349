#!/usr/bin/env bash
# Install tapt with its test extras into .venv (first run only) and run the whole test suite.
# Tests build tiny models at run time and never touch the network (HF_HUB_OFFLINE=1).
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" test
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
