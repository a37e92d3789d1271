#!/usr/bin/env bash
# Session 6's device calls (carry .whl, .deb, third_party/KernelBench/KernelBench):
#   . bench/device_env.sh && bash bench/device_call6.sh          # the first
#   . bench/device_env.sh && bash bench/device_call6.sh landlock # the second: Landlock grants x CUDA, red team c7
# 1. which inner-layer steps let CUDA start in a one-shot confined worker (error 304 hunt);
# 2. the red-team GPU tests after the fork server learned its cache root;
# 3. the real model's 40_LayerNorm kernel at KernelBench's size (transcripts_gpu: the 4th problem);
# 4. issue 11's check-time rows, each kept as it comes.
set -u
DEFAULT_BUDGET_S=500; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
mkdir -p "$OUT/logs"
deb=$(ls .deb/bubblewrap_*.deb | head -1); dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"
export PATH="$dir/usr/bin:$PATH"; BW=$dir/usr/bin/bwrap
if [ "${1:-}" = landlock ]; then
  timeout 100 python3 bench/sandbox_cuda_matrix.py --bwrap "$BW" --json "$OUT/matrix2.json" > "$OUT/logs/matrix2.log" 2>&1
  note "matrix2 rc=$?"
  timeout $(( $(left) - 10 )) python3 -m pytest -m gpu -v -rA -p no:cacheprovider --junitxml="$OUT/redteam2.xml" \
    tests/redteam/test_gpu.py -k "c7_ or c8_ or claimed" > "$OUT/logs/redteam2.log" 2>&1
  note "redteam2 rc=$?: $(tail -1 "$OUT/logs/redteam2.log")"
  tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"; cat "$OUT/summary.txt"; exit 0
fi
timeout 150 python3 bench/sandbox_cuda_matrix.py --bwrap "$BW" --json "$OUT/matrix.json" > "$OUT/logs/matrix.log" 2>&1
note "matrix rc=$?"
timeout 100 python3 -m pytest -m gpu -q -rfE -p no:cacheprovider tests/redteam/test_gpu.py > "$OUT/logs/redteam.log" 2>&1
note "redteam rc=$?: $(tail -1 "$OUT/logs/redteam.log")"
timeout 130 python3 bench/transcripts_gpu.py --root third_party/KernelBench --out "$OUT/logs/t40" --only 40_LayerNorm \
  > "$OUT/logs/t40.log" 2>&1
note "t40 rc=$?"
timeout $(( $(left) - 15 )) python3 bench/check_speed.py --out "$OUT/logs/speed" --bwrap "$BW" > "$OUT/logs/speed.log" 2>&1
note "check_speed rc=$?"
cp "$OUT/logs/speed/check_speed.json" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt"
