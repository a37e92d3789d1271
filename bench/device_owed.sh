#!/usr/bin/env bash
# The H200 work still owed by issues 11, 12, 13, 15 and 16, in three device calls that fit one
# session's 30 minutes (carry .whl, .deb, third_party/KernelBench/KernelBench):
#   . bench/device_env.sh && bash bench/device_owed.sh loop      # 12: transcripts at real sizes; 15: figures
#   . bench/device_env.sh && bash bench/device_owed.sh model     # 13: whole-model parts, GPU tests
#   . bench/device_env.sh && bash bench/device_owed.sh trust     # 11: GPU test failures, parent bound
#   . bench/device_env.sh && bash bench/device_owed.sh tolerance # 16: the 23-problem level-1 verdicts, GPU tests
# Each call keeps its logs in one archive (at most 8 files come back) and prints its summary.
set -u
DEFAULT_BUDGET_S=540; . "$(dirname "$0")/device_lib.sh"
part=${1:?usage: device_owed.sh loop|model|trust|tolerance}
env_record "$OUT/env.txt"
mkdir -p "$OUT/logs"
deb=$(ls .deb/bubblewrap_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"; export PATH="$dir/usr/bin:$PATH"; fi
t() {  # name, seconds, pytest args...: one GPU test group, its log kept
  local name=$1 secs=$2; shift 2
  timeout "$secs" python3 -m pytest -m gpu -q -rxXfE -p no:cacheprovider "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?: $(tail -1 "$OUT/logs/$name.log")"
}
b() {  # name, seconds, command...: one benchmark, its output kept
  local name=$1 secs=$2; shift 2
  timeout "$secs" "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?"
}
case $part in
  loop)
    b transcripts 420 python3 bench/transcripts_gpu.py --root third_party/KernelBench --out "$OUT/logs/transcripts"
    cp "$OUT/logs/transcripts/transcripts_gpu.json" "$OUT/" 2>/dev/null
    b curriculum $(( $(left) - 90 )) python3 bench/curriculum_figures.py --out "$OUT/logs/curriculum" --rounds 3
    tail -40 "$OUT/logs/curriculum.log" > "$OUT/curriculum.md"
    t curriculum_gpu 80 tests/curriculum/test_curriculum_gpu.py ;;
  model)
    t model_gpu 120 tests/model
    for p in resblock-fp32 resnet50-fp32 qwen3-b8-bf16; do
      [ "$(left)" -gt 100 ] || break
      OUT="$OUT/logs" timeout $(( $(left) - 60 )) python3 bench/model_bench.py --part "$p" > "$OUT/logs/model-$p.log" 2>&1
      note "model-$p rc=$?"
    done
    python3 bench/model_bench.py --table "$OUT/logs/model_bench" > "$OUT/model.md" 2>&1 ;;
  trust)
    t sandbox 60 tests/sandbox/test_gpu_sandbox.py
    t redteam 90 tests/redteam/test_gpu.py
    t accounting 60 tests/integrity/test_gpu_accounting.py
    b check_speed 150 python3 bench/check_speed.py --out "$OUT/logs/check_speed" --bwrap "$(command -v bwrap)"
    mkdir -p "$OUT/logs/sandbox"
    OUT="$OUT/logs/sandbox" BUDGET_S=$(( $(left) - 30 )) timeout $(( $(left) - 20 )) bash bench/device_sandbox.sh "$deb" \
      > "$OUT/logs/sandbox_overhead.log" 2>&1
    note "sandbox_overhead rc=$?" ;;
  tolerance)  # issue 16's figures (one check at a time: four 1.6e9-element checks at once ran the H200 out of memory)
    t tolerance_gpu 120 tests/core/test_tolerance_gpu.py
    kb=third_party/KernelBench/KernelBench/level1
    probs=$(for n in 1 2 19 20 21 22 23 24 25 26 27 28 29 30 31 32 36 40 47 48 49 53 88; do ls $kb/${n}_*.py; done)
    b verdicts $(( $(left) - 30 )) python3 bench/tolerance_verdicts.py --device cuda --trials 1 --jobs 1 \
      --out "$OUT/logs/verdicts" $probs examples/large/*.py --manifest tests/fixtures/kernels/MANIFEST.json
    pkill -f tolerance_verdicts; python3 bench/tolerance_verdicts.py --report --out "$OUT/logs/verdicts" > "$OUT/verdicts.md" 2>&1
    cp "$OUT/logs/verdicts/verdicts.json" "$OUT/" 2>/dev/null ;;
  *) echo "unknown part: $part" >&2; exit 2 ;;
esac
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt"
