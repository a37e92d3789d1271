#!/usr/bin/env bash
# The last ~4 device minutes of 2026-12-01's seventh session: the GPU tests of what changed
# (OOM message, tolerance), the one-shot confined CUDA run, and the two examples/large rows the
# figure's call did not reach. `. bench/device_env.sh && bash bench/device_call7b.sh`
set -u
DEFAULT_BUDGET_S=230; . "$(dirname "$0")/device_lib.sh"
deb=$(ls .deb/bubblewrap_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"; export PATH="$dir/usr/bin:$PATH"; fi
timeout 120 python3 -m pytest -m gpu -v -rA -p no:cacheprovider --junitxml="$OUT/gpu.xml" \
  tests/core/test_tolerance_gpu.py tests/sandbox/test_gpu_sandbox.py \
  "tests/core/test_core_gpu.py::test_running_the_gpu_out_of_memory_is_reported_as_such" > "$OUT/gpu.log" 2>&1
note "gpu tests rc=$?: $(tail -1 "$OUT/gpu.log")"
timeout $(( $(left) - 10 )) python3 bench/tolerance_verdicts.py --device cuda --trials 1 --jobs 2 --out /tmp/large2 \
  examples/large/sum_reduction.py examples/large/sum_middle.py > "$OUT/large2.log" 2>&1
note "large2 rc=$?"
python3 bench/tolerance_verdicts.py --report --out /tmp/large2 > "$OUT/large2.md" 2>&1
cat "$OUT/summary.txt"
