#!/usr/bin/env bash
# The GPU tests and `kiln run` examples, one command on nvidia-h200-x2 (on one GPU it runs both
# halves one after the other):
#   GPU 0: `kiln run --llm builtin` on $RUN_EXAMPLES (examples/large), bench/check_trace.py once,
#          then the test groups in $TESTS0;
#   GPU 1: the test groups in $TESTS1.
# Groups are separated by ';'.
#   . bench/device_env.sh && bash bench/device_callC.sh
set -u
DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
RUN_EXAMPLES=${RUN_EXAMPLES:-layernorm elementwise_chain sum_reduction linear_gelu}
TESTS0=${TESTS0:-tests/agents tests/graphs}
TESTS1=${TESTS1:--n 8 --dist loadgroup tests/corpus tests/core;tests/integrity tests/profile tests/compile tests/builtin}
env_record "$OUT/env.txt"
runs() {
  for p in $RUN_EXAMPLES; do
    local s=$(( $(left) - 60 )); [ $s -gt 30 ] || { note "run $p: no time"; continue; }
    local t0=$SECONDS
    timeout $s kiln run examples/large/$p.py --device cuda --max-iters 3 --target-speedup 100 --quiet \
      --out "$OUT/runs/$p" > "$OUT/runs-$p.log" 2>&1
    note "run $p rc=$? $((SECONDS - t0))s: $(tail -3 "$OUT/runs-$p.log" | tr '\n' ' ')"
  done
  timeout 55 python3 bench/check_trace.py --out "$OUT/trace" --n 2 > "$OUT/trace.log" 2>&1
  note "trace rc=$?: $(grep -o '"compile": [0-9.]*' "$OUT/trace/trace.json" | tr '\n' ' ')"
}
tests() {  # groups separated by ';'
  local IFS=';'
  for group in $1; do
    IFS=' '
    local t0=$SECONDS s=$(( $(left) - 5 )); [ $s -gt 20 ] || { note "tests $group: no time"; continue; }
    local name=$(echo "$group" | tr -c 'a-z0-9\n' '_')
    timeout $s python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider $group > "$OUT/t-$name.log" 2>&1
    note "tests $group rc=$? $((SECONDS - t0))s: $(tail -1 "$OUT/t-$name.log")"
  done
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  (export CUDA_VISIBLE_DEVICES=0; runs; tests "$TESTS0") & (export CUDA_VISIBLE_DEVICES=1; tests "$TESTS1"); wait
else
  tests "$TESTS1"; runs; tests "$TESTS0"
fi
cd "$OUT" && tar czf logs.tgz runs-*.log runs t-*.log trace.log trace/trace.json 2>/dev/null \
  && rm -rf runs-*.log runs t-*.log trace.log trace
# what comes back is at most 8 files: logs.tgz, summary.txt, env.txt
cat summary.txt
