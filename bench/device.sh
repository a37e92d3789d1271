#!/usr/bin/env bash
# The one maintained GPU script: named parts, run on the H200 machine in one device call.
#   carry: .whl .deb third_party/KernelBench/KernelBench
#   . bench/device_env.sh && bash bench/device.sh PART [PART ...]
# Parts:
#   startup      import times (torch, triton, kiln's CLI), the fork server's start, kiln doctor (its GPU line)
#   check_speed  issue 22's check-time rows (bench/check_speed.py: fresh `kiln check` processes)
#   concurrent   issue 22: six checks at once on one GPU (bench/check_concurrent.py)
#   gpu_tests    the GPU suite (pytest -m gpu), one log per folder (GPU_DIRS narrows it)
#   builtin      issue 23: the built-in Coder over KernelBench level 1 and 2 (bench/builtin_speed.py)
#   model        issue 24: whole-model workloads (bench/model_bench.py), each one `kiln model --budget-minutes 8`
#                ($MODEL_BUDGET_MIN): only what fits the call runs; name one with model:PART (model:resblock-fp32,
#                model:resblock-bf16, model:resnet50-stage4-fp32, model:qwen3-b8-bf16, model:overhead)
#   fast_paths   issue 25: fp32 GEMM speed and error vs kiln's rule per tl.dot input_precision (bench/fast_paths.py)
#   builtin_kb1  issue 23: bench/builtin_kb.py over KernelBench level 1 (built-in one-shot: correct vs
#   builtin_kb2  float64, x eager, x torch.compile, % roofline; conv also autotuned); one level per call
# Every part keeps its log under $OUT/logs; the call ends with $OUT/logs.tgz and $OUT/summary.txt.
set -u
DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
mkdir -p "$OUT/logs"
deb=$(ls .deb/bubblewrap_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"; export PATH="$dir/usr/bin:$PATH"; fi
t() {  # name, seconds, pytest args...: one GPU test group, its log kept
  local name=$1 secs=$2; shift 2
  timeout "$secs" python3 -m pytest -m gpu -q -rxXfE --tb=short --timeout "${TEST_TIMEOUT_S:-300}" -p no:cacheprovider \
    ${PYTEST_ARGS:-} "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?: $(tail -1 "$OUT/logs/$name.log")"
}
b() {  # name, seconds, command...: one benchmark, its output kept
  local name=$1 secs=$2; shift 2
  timeout "$secs" "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$? ($(( $(date +%s) - start ))s into the call)"
}
start=$(date +%s)
for part in "$@"; do
  [ "$(left)" -gt 20 ] || { note "$part: skipped (no time left)"; continue; }
  case $part in
    startup)
      b startup 120 bash -c '
        for m in torch "torch, triton" "kiln.evals.cli" "kiln.tools.sandbox.zygote"; do
          /usr/bin/time -f "import $m: %e s" python3 -c "import $m" ; done
        python3 -X importtime -c "import torch, triton" 2> /tmp/imp.txt; sort -t"|" -k2 -n /tmp/imp.txt | tail -15
        python3 bench/startup_times.py
        /usr/bin/time -f "kiln doctor: %e s" python3 -m kiln.evals.cli doctor --json' ;;
    check_speed)
      b check_speed ${SPEED_S:-240} python3 bench/check_speed.py --out "$OUT/logs/check_speed" --bwrap "$(command -v bwrap)"
      cp "$OUT/logs/check_speed/check_speed.md" "$OUT/" 2>/dev/null ;;
    concurrent)
      b concurrent $(( $(left) - 10 )) python3 bench/check_concurrent.py --out "$OUT/logs/concurrent" --jobs 6
      cp "$OUT/logs/concurrent/concurrent.md" "$OUT/" 2>/dev/null ;;
    gpu_tests)  # GPU_DIRS="tests/core tests/redteam" narrows it
      for d in ${GPU_DIRS:-tests/core tests/redteam tests/sandbox tests/integrity tests/compile tests/corpus \
               tests/builtin tests/agents tests/graphs tests/model tests/curriculum tests/profile}; do
        [ "$(left)" -gt 40 ] || { note "gpu_tests $d: not run (no time left)"; continue; }
        t "gpu-$(basename $d)" $(( ${GPU_DIR_S:-$(left)} < $(left) - 30 ? ${GPU_DIR_S:-$(left)} : $(left) - 30 )) "$d"
      done ;;
    builtin)
      b builtin $(( $(left) - 10 )) python3 bench/builtin_speed.py --root third_party/KernelBench --out "$OUT/logs/builtin"
      cp "$OUT/logs/builtin/"*.md "$OUT/" 2>/dev/null ;;
    builtin_kb1|builtin_kb2)
      lvl=${part#builtin_kb}
      b "$part" $(( $(left) - 10 )) python3 bench/builtin_kb.py --root third_party/KernelBench --levels "$lvl" \
        --out "$OUT/logs/$part" --budget-s $(( $(left) - 45 )) --compile-budget-s 200 --conv-autotune
      cp "$OUT/logs/$part/builtin_kb.md" "$OUT/$part.md" 2>/dev/null ;;
    model|model:*)
      mb=${MODEL_BUDGET_MIN:-8}  # whole minutes
      parts=${part#model:}; [ "$part" = model ] && parts="resblock-fp32 resblock-bf16 resnet50-stage4-fp32 qwen3-b8-bf16 overhead"
      for p in $parts; do
        need=$(( mb * 63 + 30 ))  # the budget + 5% (it counts kiln's own start), then the fresh-process reload
        [ "$p" = overhead ] && need=150
        [ "$(left)" -gt "$need" ] || { note "model-$p: not run (needs ${need} s, $(left) s left)"; continue; }
        OUT="$OUT/logs" timeout $(( $(left) - 10 )) python3 bench/model_bench.py --part "$p" --budget-minutes "$mb" \
          > "$OUT/logs/model-$p.log" 2>&1
        note "model-$p rc=$? ($(( $(date +%s) - start ))s into the call)"
      done
      python3 bench/model_bench.py --table "$OUT/logs/model_bench" > "$OUT/model.md" 2>&1 ;;
    fast_paths)
      b fast_paths 300 python3 bench/fast_paths.py
      cp "$OUT/logs/fast_paths.log" "$OUT/fast_paths.md" 2>/dev/null ;;
    *) note "unknown part: $part" ;;
  esac
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt"
