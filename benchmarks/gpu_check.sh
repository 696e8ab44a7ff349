#!/usr/bin/env bash
# The GPU check: speed and memory of tapt's GPU path with a randomly initialised model of
# Qwen3-Embedding-0.6B's exact architecture (no weights and no network needed).
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]          # about 8-9 minutes on one H200
#
# Prints, with the date and the machine:
#   1. corpus encoding tokens/s and fraction of the bf16 peak at ~150, 512 and 2048 tokens
#      per passage: tapt float32, tapt bfloat16 (tapt eval --dtype), tapt under bf16
#      autocast (the in-loop evaluator), plain SentenceTransformer.encode_document in bf16
#      at several batch sizes; the ratio of tapt to sentence-transformers at its best;
#   2. tapt train triplets/s, tokens/s, MFU and peak memory at sequence 512 and 2048, with
#      and without gradient checkpointing, at two batch sizes (evaluation and checkpoint
#      time excluded);
#   3. tapt eval with the embedding cache cold, then warm (same --cache-dir): corpus
#      encode seconds, wall seconds, passages from the cache and the cold/warm ratios;
#   4. --long-passages chunk-mean and chunk-max with 2048-token windows on the 2048-token
#      copy: passages/s, tokens/s and windows per passage;
#   5. exact search latency at 100k and 1M passages x 1024 dimensions: faiss vs tapt's
#      torch search with float32 and float16 rows (benchmarks/bench_search.py).
#
# Needs torch (CUDA), transformers, sentence-transformers, accelerate and peft. The rest
# (faiss-cpu, datasets, pytrec-eval-terrier, bm25s, pydantic and their needs) is installed
# from the wheel folder named by TAPT_WHEELS when set (no network), else from the package
# index. Prepare that folder on a machine with PyPI access (see benchmarks/README.md).
# TAPT_GPU_CHECK_DIVERGENCE=1 appends the divergence matrix of benchmarks/divergence.py
# (40 steps per arm at full size, about 3 more minutes).
# TAPT_GPU_CHECK_TINY=1 runs the same steps with a tiny model on a CPU in a minute or two
# (to test the script itself; its figures mean nothing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
PYTHON="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=true PYTHONUNBUFFERED=1
started=$(date +%s)
stamp() { echo; echo "=== $1 ($(( $(date +%s) - started )) s) ==="; }

stamp "environment"
date -u +"%Y-%m-%d %H:%M UTC"
"$PYTHON" - <<'PY'
import torch, transformers, sentence_transformers
print("torch", torch.__version__, "cuda", torch.version.cuda, "| transformers",
      transformers.__version__, "| sentence-transformers", sentence_transformers.__version__)
print("device:", torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU only")
PY

stamp "dependencies"
site="$out/site"
if "$PYTHON" -c 'import faiss, datasets, pytrec_eval, bm25s, pydantic' 2>/dev/null; then
  echo "all present"
elif [ -n "${TAPT_WHEELS:-}" ]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$TAPT_WHEELS"/*.whl
else
  "$PYTHON" -m pip install -q --no-compile --target "$site" faiss-cpu datasets \
    pytrec-eval-terrier bm25s pydantic
fi
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
tapt() { "$PYTHON" -m tapt "$@"; }

if [ "${TAPT_GPU_CHECK_TINY:-0}" = 1 ]; then
  shape=(--layers 2 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --intermediate 128 --vocab 4000)
  queries=120; distractors=200; encode_n=96; long_n=24; seqs=(128 256); batches=(2 4)
  steps=2; warmup=1; st_batches=(8 16); sweep=(2000 10000); div_steps=3
  cache_distractors=100; chunk_distractors=20
else
  shape=()  # Qwen3-Embedding-0.6B: 28 layers, hidden 1024, 16/8 heads, vocabulary 151,669
  queries=1500; distractors=8000; encode_n=4096; long_n=512; seqs=(512 2048); batches=(4 16)
  steps=6; warmup=2; st_batches=(32 64 128); sweep=(100000 1000000); div_steps=40
  cache_distractors=1000; chunk_distractors=200
fi

stamp "data and model"
tapt data synth "$out/data" --queries "$queries" --distractors "$distractors" --seed 0 >/dev/null
"$PYTHON" benchmarks/random_qwen3.py "$out/qwen3" --texts "$out/data" --overwrite "${shape[@]}"
for n in "${seqs[@]}"; do
  "$PYTHON" benchmarks/long_passages.py "$out/data" "$out/data-$n" --tokens "$n" \
    --tokenizer "$out/qwen3"
done

dtypes=(float32); peak=()
if "$PYTHON" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then
  dtypes=(float32 bfloat16)
fi

stamp "encoding: generated passages (~150 tokens)"
"$PYTHON" benchmarks/bench_encode.py --model "$out/qwen3" --family qwen3 --data "$out/data" \
  --max-passages "$encode_n" --dtypes "${dtypes[@]}" --autocast --repeats 1 \
  --batch-size 64 --max-tokens-per-batch 65536 --st-batch-sizes "${st_batches[@]}" \
  --json "$out/encode-150.json"
for n in "${seqs[@]}"; do
  stamp "encoding: $n-token passages"
  count=$encode_n; [ "$n" -gt 1024 ] && count=$long_n
  "$PYTHON" benchmarks/bench_encode.py --model "$out/qwen3" --family qwen3 \
    --data "$out/data-$n" --max-seq-length "$n" --max-passages "$count" \
    --dtypes "${dtypes[@]}" --repeats 1 --max-tokens-per-batch 65536 \
    --st-batch-sizes "${st_batches[@]}" --json "$out/encode-$n.json"
done

stamp "training throughput and memory"
for n in "${seqs[@]}"; do
  "$PYTHON" benchmarks/bench_train.py --model "$out/qwen3" --family qwen3 --data "$out/data-$n" \
    --seq "$n" --batch-sizes "${batches[@]}" --checkpointing on off --steps "$steps" \
    --warmup "$warmup" --workdir "$out/train" --json "$out/train-$n.json"
done

eval_dtype="${dtypes[-1]}"  # bfloat16 on a GPU
stamp "embedding cache: tapt eval cold, then warm ($eval_dtype)"
rm -rf "$out/cache"
for run in cold warm; do
  begin=$(date +%s%N)
  tapt eval --model "$out/qwen3" --family qwen3 --data "$out/data" --split test \
    --distractors "$cache_distractors" --dtype "$eval_dtype" --cache-dir "$out/cache" \
    --output "$out/cache-$run.json" --overwrite --quiet >/dev/null
  echo $(( ($(date +%s%N) - begin) / 1000000 )) > "$out/cache-$run.wall"  # ms
done
"$PYTHON" - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
runs = {}
for run in ("cold", "warm"):
    data = json.loads((out / f"cache-{run}.json").read_text())
    runs[run] = {"wall": float((out / f"cache-{run}.wall").read_text()) / 1000,
                 "encode": data["timings"]["corpus_encode_s"],
                 "cached": data["evaluated"]["search"]["passages_from_cache"],
                 "passages": data["evaluated"]["corpus_size"],
                 "ndcg": data["binary_ndcg@10"]}
print(f"{'run':6} {'passages':>9} {'from cache':>11} {'encode s':>9} {'wall s':>7} "
      f"{'nDCG@10':>8}")
for run, r in runs.items():
    print(f"{run:6} {r['passages']:>9,} {r['cached']:>11,} {r['encode']:>9.2f} "
          f"{r['wall']:>7.1f} {r['ndcg']:>8.4f}")
cold, warm = runs["cold"], runs["warm"]
print(f"cold/warm: corpus encode {cold['encode'] / max(warm['encode'], 1e-9):.1f}x, "
      f"wall {cold['wall'] / warm['wall']:.2f}x; same nDCG@10: {cold['ndcg'] == warm['ndcg']}")
PY

long="${seqs[-1]}"
stamp "long passages: chunk-mean and chunk-max, $long-token windows"
for mode in chunk-mean chunk-max; do
  tapt eval --model "$out/qwen3" --family qwen3 --data "$out/data-$long" --split test \
    --max-seq-length "$long" --long-passages "$mode" --distractors "$chunk_distractors" \
    --dtype "$eval_dtype" --no-cache --output "$out/chunk-$mode.json" --overwrite \
    --quiet >/dev/null
done
"$PYTHON" - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'mode':11} {'passages':>9} {'windows/passage':>16} {'passages/s':>11} "
      f"{'tokens/s':>10} {'encode s':>9}")
for mode in ("chunk-mean", "chunk-max"):
    data = json.loads((out / f"chunk-{mode}.json").read_text())
    timings, windows = data["timings"], data["evaluated"].get("long_passages", {})
    passages = max(windows.get("passages", 0), 1)
    split = (passages - windows.get("split", 0) + windows.get("windows_of_split", 0)) / passages
    print(f"{mode:11} {data['evaluated']['corpus_size']:>9,} {split:>16.2f} "
          f"{timings['passages_per_s']:>11.1f} {timings.get('tokens_per_s', float('nan')):>10,.0f} "
          f"{timings['corpus_encode_s']:>9.2f}")
PY

stamp "exact search: faiss vs torch (float32 and float16 rows)"
"$PYTHON" benchmarks/bench_search.py --sizes "${sweep[@]}" --dims 1024 --repeats 5 \
  --single-queries 20 --json "$out/search.json"

if [ "${TAPT_GPU_CHECK_DIVERGENCE:-0}" = 1 ]; then
  # Issue 6, point 5: the same 40-step fine-tune through tapt, plain sentence-transformers
  # and variations; adds about 3 minutes on an H200.
  stamp "divergence: tapt vs plain sentence-transformers vs variations"
  "$PYTHON" benchmarks/divergence.py --data "$out/data" --model-dir "$out/qwen3" "${shape[@]}" \
    --steps "$div_steps" --arms plain-st,tapt,zero-lr,low-lr,fp32 --quiet \
    --json "$out/divergence.json"
fi

stamp "done"
rm -rf "$out/site" "$out/train"
echo "figures are in $out/*.json"
