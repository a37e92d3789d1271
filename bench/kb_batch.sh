#!/usr/bin/env bash
# Issue 6's KernelBench level-1 batch on nvidia-h200-x2, one command: the 23-problem one-shot
# built-in batch on both GPUs, then the same batch on one GPU (capped by the time left), each
# with fresh caches (compile, Triton, inductor); bench/batch_throughput.py compares them.
#   . bench/device_env.sh && bash bench/kb_batch.sh
# The curriculum's checking throughput, on both GPUs then on one (a second command, fresh caches):
#   . bench/device_env.sh && bash bench/kb_batch.sh curriculum
set -u
DEFAULT_BUDGET_S=470; . "$(dirname "$0")/device_lib.sh"
P=${KB_PROBLEMS:-1,2,19-32,36,40,47-49,53,88}
env_record "$OUT/env.txt"
batch() {  # name, gpus, minutes
  local name=$1 gpus=$2 mins=$3
  export KILN_CACHE_DIR=/tmp/kb-cache-$name HOME=/tmp/kb-home-$name; mkdir -p "$HOME"
  date +%s.%N > "$OUT/$name.start"
  CUDA_VISIBLE_DEVICES=$gpus timeout $(( $(left) - 5 )) kiln eval kernelbench --root third_party/KernelBench \
    --level 1 --problems "$P" --mode oneshot --llm builtin --device cuda --out "$OUT/$name" \
    --batch-budget-minutes "$mins" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(date +%s.%N)" >> "$OUT/summary.txt"
  kiln report "$OUT/$name" >> "$OUT/$name.log" 2>&1
}
if [ "${1:-}" = curriculum ]; then  # 1 round of 8 modules x 4 samples each way: samples/GPU-hour, 2 GPUs vs 1
  for g in 0,1 0; do
    export KILN_CACHE_DIR=/tmp/cur-cache-$g HOME=/tmp/cur-home-$g; mkdir -p "$HOME"
    CUDA_VISIBLE_DEVICES=$g timeout $(( $(left) / 2 - 5 )) python3 bench/curriculum_figures.py --out "$OUT/cur-$g" \
      --rounds 1 --per-round 8 --samples 4 > "$OUT/cur-$g.log" 2>&1
    echo "curriculum gpus=$g rc=$? $(grep -o '"samples_per_hour": [0-9.]*' "$OUT/cur-$g/figures.json")" >> "$OUT/summary.txt"
  done
  cd "$OUT" && tar czf cur.tgz cur-* && rm -rf cur-*; cat summary.txt; exit 0
fi
batch gpu2 0,1 "${KB_MIN2:-4.5}"
batch gpu1 0 "$(python3 -c "print(max(0.5, ($DEADLINE - $SECONDS - 30) / 60))")"
python3 bench/batch_throughput.py "$OUT/gpu1" "$OUT/gpu2" > "$OUT/throughput.md" 2>&1
cd "$OUT" && tar czf kb.tgz gpu1 gpu2 *.log *.start env.txt 2>/dev/null && rm -rf *.log *.start env.txt gpu1/problems gpu2/problems gpu1/report/records gpu2/report/records
# what comes back is at most 8 files: kb.tgz, summary.txt, throughput.md
cat summary.txt throughput.md; head -60 gpu2/metrics.json
