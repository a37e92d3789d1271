#!/usr/bin/env bash
# Device call A on nvidia-h200-x2, one 10-minute command:
#   GPU 0: where a check spends its time (check_trace), issue 2's end-to-end and repeatability
#          benchmark, then `kiln run --llm builtin` on the four large examples, until the deadline;
#   GPU 1: the GPU tests (corpus/core in parallel, then builtin, agents+graphs, integrity+profile).
#   . bench/device_env.sh && bash bench/device_callA.sh
set -u
DEFAULT_BUDGET_S=470; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  local t0=$SECONDS
  timeout 120 python3 bench/check_trace.py --out "$OUT/trace" --n 3 > "$OUT/g0-trace.log" 2>&1
  note "trace rc=$? $((SECONDS - t0))s"; t0=$SECONDS
  timeout 200 python3 bench/eval_core.py --out "$OUT/core" --parts triton_e2e,repeat > "$OUT/g0-core.log" 2>&1
  note "eval_core rc=$? $((SECONDS - t0))s"
  for p in layernorm elementwise_chain sum_reduction linear_gelu; do
    local s=$(( $(left) - 5 )); [ $s -gt 30 ] || { note "run $p: no time"; continue; }
    t0=$SECONDS
    timeout $s kiln run examples/large/$p.py --device cuda --max-iters 3 --target-speedup 100 --quiet \
      --out "$OUT/runs/$p" > "$OUT/runs-$p.log" 2>&1
    note "run $p rc=$? $((SECONDS - t0))s"
  done
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  for group in "-n 4 tests/corpus tests/core" "tests/builtin" "tests/agents tests/graphs" "tests/integrity tests/profile"; do
    local t0=$SECONDS s=$(( $(left) - 5 )); [ $s -gt 20 ] || { note "tests $group: no time"; continue; }
    local name=$(echo "$group" | tr -c 'a-z0-9\n' '_')
    timeout $s python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider $group > "$OUT/t-$name.log" 2>&1
    note "tests $group rc=$? $((SECONDS - t0))s: $(tail -1 "$OUT/t-$name.log")"
  done
}
gpu0 & gpu1; wait
cd "$OUT" && tar czf logs.tgz --exclude='*.pstats' g0-*.log runs-*.log runs t-*.log trace core 2>/dev/null
cat "$OUT/summary.txt"; cat "$OUT/core/eval_core.md" 2>/dev/null | tail -30; head -c 2500 "$OUT/trace/trace.md"
