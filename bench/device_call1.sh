#!/usr/bin/env bash
# Device call 1 on a 2-GPU machine (nvidia-h200-x2), inside one 10-minute command:
#   GPU 1: the timing-sensitive GPU tests, one at a time (compile, integrity, builtin, profile);
#   GPU 0: the parallel GPU tests, then issue 2's per-stage benchmark until the deadline.
#   . bench/device_env.sh && bash bench/device_call1.sh
set -u
DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/gpu-env.txt"
run() {  # name, gpu, seconds, pytest args...
  local name=$1 gpu=$2 secs=$3; shift 3
  local t0=$SECONDS
  [ "$secs" -gt 5 ] || { echo "$name skipped: no time left" >> "$OUT/summary.txt"; return; }
  CUDA_VISIBLE_DEVICES=$gpu timeout "$secs" python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider "$@" \
    > "$OUT/t-$name.log" 2>&1
  echo "$name gpu=$gpu rc=$? $((SECONDS - t0))s: $(tail -1 "$OUT/t-$name.log")" >> "$OUT/summary.txt"
}
serial() {
  run compile 1 150 tests/compile
  run integrity 1 "$(( $(left) < 170 ? $(left) : 170 ))" -s tests/integrity
  run builtin 1 "$(( $(left) < 80 ? $(left) : 80 ))" -s tests/builtin
  run profile 1 "$(( $(left) - 5 ))" -s tests/profile
}
first() {
  run parallel 0 240 -n 8 tests/corpus tests/core tests/agents tests/graphs
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=0 timeout "$(( $(left) - 10 ))" python3 bench/eval_core.py --out "$OUT/core" --parts stages \
    > "$OUT/eval-core-stages.log" 2>&1
  echo "eval_core stages rc=$? $((SECONDS - t0))s" >> "$OUT/summary.txt"
}
first & serial; wait
cd "$OUT" && tar czf logs.tgz t-*.log eval-core-stages.log core 2>/dev/null
cat "$OUT/summary.txt"
