#!/usr/bin/env bash
# The bundled default, on a CPU with no network: generate a FormBench-like dataset, show
# the BM25 baseline, then TAPT all-MiniLM-L6-v2 (zero-shot vs best checkpoint vs test).
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" models
data=data/quickstart
if [ ! -f "$data/corpus.jsonl" ]; then
  .venv/bin/tapt data synth "$data" --queries 250 --distractors 300 --seed 0
fi
.venv/bin/tapt bm25 --data "$data" --split test --quiet
run="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
exec .venv/bin/tapt train recipes/quickstart.yaml --test "output_dir=$run" "$@"
