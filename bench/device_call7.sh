#!/usr/bin/env bash
# Issue 16's H200 figure after the unit-scale floor (2026-12-01, seventh session), one device call
# (carry .whl, .deb, third_party/KernelBench/KernelBench):
#   . bench/device_env.sh && bash bench/device_call7.sh
# The corpus's wrong kernels first (are they still caught?), then the 23 level-1 problems one
# check at a time (two at once ran the GPU out of memory at 1.6e9 elements), then examples/large.
set -u
DEFAULT_BUDGET_S=540; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
deb=$(ls .deb/bubblewrap_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"; export PATH="$dir/usr/bin:$PATH"; fi
mkdir -p "$OUT/logs"
v() {  # name, jobs, args...: one tolerance_verdicts run, its table kept
  local name=$1 jobs=$2; shift 2
  timeout $(( $(left) - 25 )) python3 bench/tolerance_verdicts.py --device cuda --trials 1 --jobs "$jobs" \
    --out "$OUT/logs/$name" "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?"
  python3 bench/tolerance_verdicts.py --report --out "$OUT/logs/$name" > "$OUT/$name.md" 2>&1
}
v wrong 2 --manifest tests/fixtures/kernels/MANIFEST.json --expect wrong
kb=third_party/KernelBench/KernelBench/level1
v level1 1 $(for n in 1 2 19 20 21 22 23 24 25 26 27 28 29 30 31 32 36 40 47 48 49 53 88; do ls $kb/${n}_*.py; done)
v large 2 examples/large/*.py
rm -rf "$OUT"/logs/*/candidates
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt"
