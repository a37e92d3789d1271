#!/usr/bin/env bash
# The session's last H200 command (carry .whl, .deb, third_party/KernelBench/KernelBench):
#   . bench/device_env.sh && bash bench/device_final.sh
# GPU tests of the sandbox, the red team's GPU attacks and the numerics tolerance (logs kept), then
# issue 16's before/after verdicts on KernelBench level-1 problems and examples/large (built-in
# Coder candidates, --trials 1: every distribution once). Everything comes back in one archive.
set -u
DEFAULT_BUDGET_S=450; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
deb=$(ls .deb/bubblewrap_*.deb | head -1); dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"
export PATH="$dir/usr/bin:$PATH"
mkdir -p "$OUT/logs"
t() {  # name, seconds, pytest args...
  local name=$1 secs=$2; shift 2
  timeout "$secs" python3 -m pytest -m gpu -q -rxXfE -p no:cacheprovider "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?: $(tail -1 "$OUT/logs/$name.log")"
}
t sandbox 60 tests/sandbox/test_gpu_sandbox.py
t redteam 90 tests/redteam/test_gpu.py
t tolerance 60 tests/core/test_tolerance_gpu.py
KB=third_party/KernelBench/KernelBench/level1
timeout "$(( $(left) - 25 ))" python3 bench/tolerance_verdicts.py --device cuda --trials 1 --out "$OUT/logs/tol" \
  $KB/47_Sum_reduction_over_a_dimension.py $KB/23_Softmax.py $KB/40_LayerNorm.py $KB/94_MSELoss.py \
  examples/large/sum_reduction.py examples/large/softmax.py examples/large/layernorm.py $KB/24_LogSoftmax.py \
  $KB/48_Mean_reduction_over_a_dimension.py $KB/88_MinGPTNewGelu.py $KB/19_ReLU.py examples/large/sum_dim0.py \
  examples/large/rmsnorm.py > "$OUT/logs/tol.md" 2> "$OUT/logs/tol.err"
note "tolerance_verdicts rc=$?"
cp "$OUT/logs/tol.md" "$OUT/tol.md" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt" "$OUT/tol.md" 2>/dev/null | tail -60
