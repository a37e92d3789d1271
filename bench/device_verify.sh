#!/usr/bin/env bash
# A short H200 command: the sandbox's and the red team's GPU tests (logs kept) and one cold
# `kiln check` with an empty cache (every baseline measured). Carry .whl and .deb.
#   . bench/device_env.sh && bash bench/device_verify.sh
set -u
DEFAULT_BUDGET_S=200; . "$(dirname "$0")/device_lib.sh"
deb=$(ls .deb/bubblewrap_*.deb | head -1); dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"
export PATH="$dir/usr/bin:$PATH"
mkdir -p "$OUT/logs"
t() { local name=$1 secs=$2; shift 2
  timeout "$secs" python3 -m pytest -m gpu -q -rxXfE -p no:cacheprovider "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?: $(tail -1 "$OUT/logs/$name.log")"; }
KILN_CACHE_DIR=/tmp/cold-cache timeout 60 kiln check bench/eval_core_cases/softmax_problem.py \
  bench/eval_core_cases/softmax_triton.py --device cuda --json "$OUT/logs/cold.json" > "$OUT/logs/cold.txt" 2>&1
note "cold check rc=$?: $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['status'], r['stages_s'], {k: round(v['value'],3) for k,v in r['timing']['speedups'].items()}, r['timing']['baseline_errors'])" "$OUT/logs/cold.json" 2>&1 | tail -1)"
t redteam 75 tests/redteam/test_gpu.py
t sandbox 50 -x tests/sandbox/test_gpu_sandbox.py
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt"
