#!/usr/bin/env bash
# Device call B on nvidia-h200 (one GPU), one command: where a check spends its time, issue 2's
# end-to-end and repeatability benchmark (unloaded), then the GPU tests until the deadline.
#   . bench/device_env.sh && bash bench/device_callB.sh
set -u
DEFAULT_BUDGET_S=545; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
t0=$SECONDS
timeout 100 python3 bench/check_trace.py --out "$OUT/trace" --n 3 > "$OUT/g-trace.log" 2>&1
note "trace rc=$? $((SECONDS - t0))s"; t0=$SECONDS
timeout 170 python3 bench/eval_core.py --out "$OUT/core" --parts triton_e2e,repeat > "$OUT/g-core.log" 2>&1
note "eval_core rc=$? $((SECONDS - t0))s"
for group in "-n 6 tests/corpus tests/core" "tests/agents tests/graphs"; do
  t0=$SECONDS; s=$(( $(left) )); [ $s -gt 20 ] || { note "tests $group: no time"; continue; }
  name=$(echo "$group" | tr -c 'a-z0-9\n' '_')
  timeout $s python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider $group > "$OUT/t-$name.log" 2>&1
  note "tests $group rc=$? $((SECONDS - t0))s: $(tail -1 "$OUT/t-$name.log")"
done
cd "$OUT" && tar czf logs.tgz --exclude='*.pstats' g-*.log t-*.log trace core 2>/dev/null
cat summary.txt; grep -h "fork_server_skipped" g-trace.log | head -3; cat core/eval_core.md 2>/dev/null | tail -25
