#!/usr/bin/env bash
# The one maintained GPU script: named parts, run on the H200 machine in one device call.
#   carry: .whl .deb third_party/KernelBench/KernelBench
#   . bench/device_env.sh && bash bench/device.sh PART [PART ...]
# Parts:
#   startup      import times (torch, triton, kiln's CLI), the fork server's start, kiln doctor (its GPU line)
#   check_speed  issue 22's check-time rows (bench/check_speed.py: fresh `kiln check` processes)
#   concurrent   issue 22: six checks at once on one GPU, then the reward burst, one thread and 8 (bench/check_concurrent.py;
#                CONC_ARGS=--burst-only leaves the six out)
#   gpu_tests    the GPU suite (pytest -m gpu), one log per folder (GPU_DIRS narrows it)
#   builtin      issue 23: the built-in Coder over KernelBench level 1 and 2 (bench/builtin_speed.py)
#   model        issue 24: whole-model workloads (bench/model_bench.py), each one `kiln model --budget-minutes 8`
#                ($MODEL_BUDGET_MIN): only what fits the call runs; name one with model:PART (model:resblock-fp32,
#                model:resblock-bf16, model:resnet50-stage4-fp32, model:qwen3-b8-bf16, model:overhead)
#   model_drift  issue 24: eager timed at each stage boundary inside one `kiln model` run (bench/model_drift.py;
#                DRIFT_ARGS: the run's options, default sd_resblock fp32, --top 2, 2.7-minute budget)
#   projection   issue 22: one timing-audit projection of a 256 MB output, whole and by part (bench/projection_speed.py)
#   fast_paths   issue 25: fp32 GEMM speed and error vs kiln's rule per tl.dot input_precision (bench/fast_paths.py)
#   gn_speed     issue 23: group norm (+ SiLU) at UNet/ResNet sizes, the built-in kernel's paths vs eager and compile
#   builtin_kb1  issue 23: bench/builtin_kb.py over KernelBench level 1 (built-in one-shot: correct by kiln's rule,
#   builtin_kb2  x eager, x torch.compile, % roofline); one level per call; KB_ARGS="--problems 1-18"
#                narrows it (KB1_ARGS / KB2_ARGS per level), KB_BUDGET_S caps its seconds
#   sandbox      the OS sandbox with CUDA: raw bubblewrap (two /dev layouts), kiln doctor's sandbox line,
#                tests/sandbox (GPU and CPU tests), per-spawn cost (bench/sandbox_overhead.py)
#   sandbox_matrix  which inner-layer steps let CUDA start in a confined worker (bench/sandbox_cuda_matrix.py)
#   trace        where a check spends its time (bench/check_trace.py; a Triton and a fast-path candidate)
#   eval_core    issue 2's per-stage and end-to-end check benchmark (bench/eval_core.py --parts
#                $EVAL_CORE_PARTS, default triton_e2e,repeat; `stages` is the ~6-8 min one)
#   cold_check   one `kiln check` with an empty cache (every baseline measured)
#   runs         `kiln run --llm builtin` on $RUN_EXAMPLES (examples/large: layernorm elementwise_chain ...)
#   tolerance    issue 16: bench/tolerance_verdicts.py on 23 KernelBench level-1 problems, examples/large
#                and the corpus's kernels, one check at a time; the GPU tolerance tests first
#   transcripts  issue 12: bench/transcripts_gpu.py at KernelBench sizes ($TRANSCRIPTS_ONLY: --only NAME)
#   curriculum   issue 15: bench/curriculum_figures.py ($CUR_ROUNDS rounds) and the curriculum's GPU tests
#   kb_batch     issue 6: the 23-problem level-1 one-shot batch on two GPUs, then on one (nvidia-h200-x2),
#                compared by bench/batch_throughput.py
# `bench/device.sh` with no part (or --help) prints this list. Parts replace the one-off scripts
# bench/RESULTS.md's older entries name (device_call*.sh, device_owed.sh, gpu_tests.sh, ...; see its top).
# Every part keeps its log under $OUT/logs; the call ends with $OUT/logs.tgz and $OUT/summary.txt.
if [ $# -eq 0 ] || [ "$1" = --help ] || [ "$1" = -h ]; then sed -n '2,/^# Every part/s/^# \{0,1\}//p' "$0"; exit 0; fi
set -u
DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
mkdir -p "$OUT/logs"
deb=$(ls .deb/bubblewrap_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"; export PATH="$dir/usr/bin:$PATH"; fi
BW=$(command -v bwrap || true)
KB1=third_party/KernelBench/KernelBench/level1
t() {  # name, seconds, pytest args...: one GPU test group, its log kept
  local name=$1 secs=$2; shift 2
  [ "$secs" -lt "$(( $(left) - 10 ))" ] || secs=$(( $(left) - 10 ))
  local quiet=-q; case " ${PYTEST_ARGS:-} " in *" -v "*) quiet= ;; esac  # -q and -v cancel: a timed-out run then names nothing
  timeout "$secs" python3 -m pytest -m gpu $quiet -rxXfE --tb=short --timeout "${TEST_TIMEOUT_S:-300}" -p no:cacheprovider \
    ${PYTEST_ARGS:-} "$@" > "$OUT/logs/$name.log" 2>&1
  note "$name rc=$?: $(tail -1 "$OUT/logs/$name.log")"
}
b() {  # name, seconds, command...: one benchmark, its output kept
  local name=$1 secs=$2; shift 2
  [ "$secs" -lt "$(( $(left) - 10 ))" ] || secs=$(( $(left) - 10 ))  # never past the call's deadline
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
      b concurrent $(( $(left) - 10 )) python3 bench/check_concurrent.py --out "$OUT/logs/concurrent" --jobs 6 ${CONC_ARGS:-}
      cp "$OUT/logs/concurrent/concurrent.md" "$OUT/" 2>/dev/null ;;
    gpu_tests)  # GPU_DIRS="tests/core tests/redteam" narrows it
      # modules that time kernels in the test's own process run alone first, never beside xdist's
      # workers (six checks sharing the GPU moved a 4x speedup to 1.6x on the H200, 2026-12-02)
      ALONE="tests/integrity/test_gpu_timing.py tests/integrity/test_gpu_physics.py tests/integrity/test_gpu_contention.py"
      case " ${GPU_DIRS:-tests/integrity} " in *" tests/integrity "*)
        PYTEST_ARGS= t gpu-integrity-alone 200 $ALONE ;; esac
      IGNORE=$(for f in $ALONE; do printf -- ' --ignore=%s' "$f"; done)
      for d in ${GPU_DIRS:-tests/core tests/redteam tests/sandbox tests/integrity tests/compile tests/corpus \
               tests/builtin tests/agents tests/graphs tests/model tests/curriculum tests/profile}; do
        [ "$(left)" -gt 40 ] || { note "gpu_tests $d: not run (no time left)"; continue; }
        t "gpu-$(basename $d)" $(( ${GPU_DIR_S:-$(left)} < $(left) - 30 ? ${GPU_DIR_S:-$(left)} : $(left) - 30 )) "$d" $IGNORE
      done ;;
    builtin)
      b builtin $(( $(left) - 10 )) python3 bench/builtin_speed.py --root third_party/KernelBench --out "$OUT/logs/builtin"
      cp "$OUT/logs/builtin/"*.md "$OUT/" 2>/dev/null ;;
    builtin_kb1|builtin_kb2)
      lvl=${part#builtin_kb}
      kb=$(( $(left) - 45 )); [ "${KB_BUDGET_S:-$kb}" -lt "$kb" ] && kb=$KB_BUDGET_S  # KB_BUDGET_S caps one level
      b "$part" $(( kb + 35 )) python3 bench/builtin_kb.py --root third_party/KernelBench --levels "$lvl" \
        --out "$OUT/logs/$part" --budget-s "$kb" --compile-budget-s 200 ${KB_ARGS:-} \
        $(eval echo "\${KB${lvl}_ARGS:-}")
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
    model_drift)
      b model_drift 260 python3 bench/model_drift.py ${DRIFT_TARGET:-examples/model/sd_resblock.py:make} -- \
        ${DRIFT_ARGS:---device cuda --dtype fp32 --top 2 --max-iters 1 --budget-minutes 2.7 --min-share 0.02 --trials 2 --timeout 120 --concurrency 2} \
        --out /tmp/model_drift
      grep '^DRIFT' "$OUT/logs/model_drift.log" > "$OUT/model_drift.jsonl" 2>/dev/null
      mkdir -p "$OUT/logs/model_drift_run" && cp /tmp/model_drift/*.json "$OUT/logs/model_drift_run/" 2>/dev/null ;;
    projection)
      b projection 60 python3 bench/projection_speed.py
      cp "$OUT/logs/projection.log" "$OUT/projection.md" 2>/dev/null ;;
    gn_speed)
      b gn_speed 300 python3 bench/gn_speed.py --json "$OUT/logs/gn_speed.json" ${GN_ARGS:-}
      sed -n '/^| dtype/,$p' "$OUT/logs/gn_speed.log" > "$OUT/gn_speed.md" ;;
    fast_paths)
      b fast_paths 300 python3 bench/fast_paths.py
      cp "$OUT/logs/fast_paths.log" "$OUT/fast_paths.md" 2>/dev/null ;;
    sandbox)
      PY=$(command -v python3)
      CUDA_ONE='import torch; x = torch.ones(4, device="cuda"); torch.cuda.synchronize(); print("cuda ok", float(x.sum()))'
      devs=(); for d in /dev/null /dev/zero /dev/urandom /dev/random /dev/nvidia*; do devs+=(--dev-bind "$d" "$d"); done
      { echo "== ro-bind / , dev-bind /dev"
        "$BW" --unshare-user --uid 65534 --unshare-net --unshare-pid --die-with-parent --ro-bind / / \
          --dev-bind /dev /dev --proc /proc --tmpfs /tmp -- "$PY" -c "$CUDA_ONE"
        echo "== same, minimal /dev (null, urandom, nvidia nodes)"
        "$BW" --unshare-user --uid 65534 --unshare-net --unshare-pid --die-with-parent --ro-bind / / \
          --tmpfs /dev "${devs[@]}" --proc /proc --tmpfs /tmp -- "$PY" -c "$CUDA_ONE"
      } > "$OUT/logs/sandbox-raw.log" 2>&1
      note "raw bwrap CUDA ($BW): $(grep -c 'cuda ok' "$OUT/logs/sandbox-raw.log")/2 configurations ran"
      kiln doctor --json > "$OUT/logs/sandbox-doctor.json" 2>/dev/null
      note "doctor: $(python3 -c "import json,sys; i=[x for x in json.load(open(sys.argv[1])) if x['name']=='sandbox'][0]; print(i['status'], i['detail'])" "$OUT/logs/sandbox-doctor.json" 2>&1 | tail -1)"
      timeout $(( $(left) > 230 ? $(left) - 200 : 30 )) python3 -m pytest -q -rfE -p no:cacheprovider -m "gpu or not gpu" \
        tests/sandbox > "$OUT/logs/sandbox-tests.log" 2>&1
      note "tests/sandbox (gpu and cpu): $(tail -1 "$OUT/logs/sandbox-tests.log")"
      b sandbox_overhead $(( $(left) - 20 )) python3 bench/sandbox_overhead.py --device cuda --n 10 \
        --json "$OUT/logs/sandbox-overhead.json"
      cp "$OUT/logs/sandbox-overhead.json" "$OUT/" 2>/dev/null ;;
    sandbox_matrix)
      b sandbox_matrix 150 python3 bench/sandbox_cuda_matrix.py --bwrap "$BW" --json "$OUT/logs/matrix.json"
      cp "$OUT/logs/matrix.json" "$OUT/" 2>/dev/null ;;
    trace)
      b trace 200 python3 bench/check_trace.py --out "$OUT/logs/trace" --n "${TRACE_N:-3}"
      cp "$OUT/logs/trace/trace.md" "$OUT/" 2>/dev/null
      [ -n "${TRACE_FAST:-}" ] && b trace_fast 90 python3 bench/check_trace.py --out "$OUT/logs/trace_fast" --n 2 --baselines eager \
        --candidate bench/eval_core_cases/softmax_fast.py
      cp "$OUT/logs/trace/trace.md" "$OUT/" 2>/dev/null ;;
    eval_core)
      b eval_core $(( $(left) - 10 )) python3 bench/eval_core.py --out "$OUT/logs/core" --parts "${EVAL_CORE_PARTS:-triton_e2e,repeat}"
      cp "$OUT/logs/core/eval_core.md" "$OUT/" 2>/dev/null ;;
    cold_check)
      KILN_CACHE_DIR=/tmp/cold-cache b cold_check 60 kiln check bench/eval_core_cases/softmax_problem.py \
        bench/eval_core_cases/softmax_triton.py --device cuda --json "$OUT/logs/cold.json"
      note "cold check: $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['status'], r['stages_s'], {k: round(v['value'],3) for k,v in r['timing']['speedups'].items()}, r['timing']['baseline_errors'])" "$OUT/logs/cold.json" 2>&1 | tail -1)" ;;
    runs)
      for p in ${RUN_EXAMPLES:-layernorm elementwise_chain sum_reduction linear_gelu}; do
        [ "$(left)" -gt 40 ] || { note "run $p: no time"; continue; }
        b "run-$p" $(( $(left) - 10 )) kiln run "examples/large/$p.py" --device cuda --max-iters 3 --target-speedup 100 \
          --quiet --out "$OUT/logs/runs/$p"
      done ;;
    tolerance)  # one check at a time: four 1.6e9-element checks at once ran the H200 out of memory
      t tolerance_gpu 120 tests/core/test_tolerance_gpu.py
      probs=$(for n in 1 2 19 20 21 22 23 24 25 26 27 28 29 30 31 32 36 40 47 48 49 53 88; do ls $KB1/${n}_*.py; done)
      b verdicts $(( $(left) - 30 )) python3 bench/tolerance_verdicts.py --device cuda --trials 1 --jobs 1 \
        --out "$OUT/logs/verdicts" $probs examples/large/*.py --manifest tests/fixtures/kernels/MANIFEST.json
      python3 bench/tolerance_verdicts.py --report --out "$OUT/logs/verdicts" > "$OUT/verdicts.md" 2>&1
      rm -rf "$OUT"/logs/verdicts/candidates ;;
    transcripts)
      b transcripts $(( $(left) - 10 )) python3 bench/transcripts_gpu.py --root third_party/KernelBench \
        --out "$OUT/logs/transcripts" ${TRANSCRIPTS_ONLY:+--only "$TRANSCRIPTS_ONLY"}
      cp "$OUT/logs/transcripts/transcripts_gpu.json" "$OUT/" 2>/dev/null ;;
    curriculum)
      b curriculum $(( $(left) - 90 )) python3 bench/curriculum_figures.py --out "$OUT/logs/curriculum" --rounds "${CUR_ROUNDS:-3}"
      tail -40 "$OUT/logs/curriculum.log" > "$OUT/curriculum.md"
      t curriculum_gpu 80 tests/curriculum/test_curriculum_gpu.py ;;
    kb_batch)  # fresh caches (compile, Triton, inductor) for each run
      for run in "gpu2 0,1 ${KB_MIN2:-4.5}" "gpu1 0 -"; do
        read -r name gpus mins <<< "$run"
        [ "$mins" = - ] && mins=$(python3 -c "print(max(0.5, ($(left) - 40) / 60))")
        date +%s.%N > "$OUT/logs/$name.start"
        KILN_CACHE_DIR=/tmp/kb-cache-$name HOME=/tmp/kb-home-$name CUDA_VISIBLE_DEVICES=$gpus b "kb-$name" $(( $(left) - 5 )) \
          kiln eval kernelbench --root third_party/KernelBench --level 1 --problems "${KB_PROBLEMS:-1,2,19-32,36,40,47-49,53,88}" \
          --mode oneshot --llm builtin --device cuda --out "$OUT/logs/$name" --batch-budget-minutes "$mins"
      done
      python3 bench/batch_throughput.py "$OUT/logs/gpu1" "$OUT/logs/gpu2" > "$OUT/throughput.md" 2>&1 ;;
    *) note "unknown part: $part" ;;
  esac
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/summary.txt"
