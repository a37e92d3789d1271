#!/usr/bin/env bash
# kiln's whole GPU test suite in one device call (writes $OUT/gpu-tests-*.log and a summary).
#   . bench/device_env.sh && bash bench/gpu_tests.sh
# Timing-sensitive areas (compile/timing, integrity physics and timing, built-in speed, ncu
# overhead) run one test at a time; compile-heavy, timing-free areas run in parallel with
# pytest-xdist. With two GPUs the two groups run at once, one GPU each.
set -u
DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/gpu-env.txt"
run() {  # name, gpu, seconds, pytest args...
  local name=$1 gpu=$2 secs=$3; shift 3
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpu timeout "$secs" python3 -m pytest -m gpu -q -rfE -p no:cacheprovider "$@" \
    > "$OUT/gpu-tests-$name.log" 2>&1
  echo "$name gpu=$gpu rc=$? $((SECONDS - t0))s: $(tail -1 "$OUT/gpu-tests-$name.log")" >> "$OUT/gpu-tests-summary.txt"
}
parallel_group() { run parallel "$1" "${T_PAR:-300}" -n 8 --dist loadgroup tests/corpus tests/core tests/agents tests/graphs; }
serial_group() {
  run compile "$1" "${T_COMPILE:-150}" tests/compile
  run integrity "$1" "${T_INTEGRITY:-150}" -s tests/integrity
  run builtin "$1" "${T_BUILTIN:-90}" -s tests/builtin
  run profile "$1" "${T_PROFILE:-150}" -s tests/profile
}
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  parallel_group 0 & serial_group 1; wait
else
  parallel_group 0; serial_group 0
fi
cat "$OUT/gpu-tests-summary.txt"
