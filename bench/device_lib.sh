# Sourced by bench/device.sh (after `set -u`, with its default time budget):
#   DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
# $OUT, a deadline from $BUDGET_S, and the helpers every device call uses.
OUT=${OUT:-/tmp/out}
DEADLINE=$((SECONDS + ${BUDGET_S:-${DEFAULT_BUDGET_S:-560}}))
left() { echo $((DEADLINE - SECONDS)); }              # seconds to the deadline
note() { echo "$*" >> "$OUT/summary.txt"; }           # one line of the call's summary
env_record() {  # FILE: the machine, for bench/RESULTS.md (GPUs, clocks, versions, cores)
  { nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
    python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
    nvcc --version | tail -1; ncu --version 2>/dev/null | tail -1; nproc; } > "$1" 2>&1
}
