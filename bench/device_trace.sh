#!/usr/bin/env bash
# One device call: where a check spends its time (bench/check_trace.py), then the GPU tests that
# are not full corpus checks, until the deadline.   . bench/device_env.sh && bash bench/device_trace.sh
set -u
DEFAULT_BUDGET_S=570; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
t0=$SECONDS
timeout 200 python3 bench/check_trace.py --out "$OUT/trace" --n 4 > "$OUT/trace.log" 2>&1
echo "trace triton rc=$? $((SECONDS - t0))s" >> "$OUT/summary.txt"; t0=$SECONDS
timeout 90 python3 bench/check_trace.py --out "$OUT/trace_fast" --n 2 --baselines eager \
  --candidate bench/eval_core_cases/softmax_fast.py >> "$OUT/trace.log" 2>&1
echo "trace fast rc=$? $((SECONDS - t0))s" >> "$OUT/summary.txt"
for group in "tests/compile" "tests/builtin" "tests/agents tests/graphs" "tests/integrity tests/profile"; do
  t0=$SECONDS; s=$(( $(left) - 10 )); [ $s -gt 20 ] || { echo "$group: no time" >> "$OUT/summary.txt"; continue; }
  name=$(echo "$group" | tr ' /' '__')
  timeout $s python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider $group > "$OUT/t-$name.log" 2>&1
  echo "$group rc=$? $((SECONDS - t0))s: $(tail -1 "$OUT/t-$name.log")" >> "$OUT/summary.txt"
done
cd "$OUT" && tar czf logs.tgz trace trace_fast t-*.log trace.log 2>/dev/null
cat "$OUT/summary.txt"; cat "$OUT/trace/trace.md" | head -c 6000
