#!/usr/bin/env bash
# Issue 11 on the H200 in one device command (carry .whl and .deb):
#   . bench/device_env.sh && bash bench/device_call11.sh
# 1. the sandbox's facts there (raw bubblewrap + CUDA, kiln doctor's sandbox line);
# 2. bench/check_speed.py: cold and warm `kiln check` times, and what the sandbox costs;
# 3. the GPU tests of the parent-driven check, the sandbox, compile/timing and integrity.
# Everything lands under $OUT; the summary is printed last.
set -u
DEFAULT_BUDGET_S=540; . "$(dirname "$0")/device_lib.sh"
env_record "$OUT/env.txt"
deb=$(ls .deb/bubblewrap_*.deb | head -1); dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$deb" "$dir"
export PATH="$dir/usr/bin:$PATH"
note "bwrap $(bwrap --version 2>&1); $(nvidia-smi -L | head -1)"
PY=$(command -v python3)
bwrap --unshare-user --uid 65534 --unshare-net --unshare-pid --die-with-parent --ro-bind / / --dev-bind /dev /dev \
  --proc /proc --tmpfs /tmp -- "$PY" -c 'import torch; x = torch.ones(4, device="cuda"); print("cuda ok", float(x.sum()))' \
  > "$OUT/raw-bwrap.log" 2>&1
note "raw bwrap CUDA: $(tail -1 "$OUT/raw-bwrap.log")"
kiln doctor --json > "$OUT/doctor.json" 2>&1
note "doctor sandbox: $(python3 -c "import json,sys; i=[x for x in json.load(open(sys.argv[1])) if x['name']=='sandbox'][0]; print(i['status'], i['detail'])" "$OUT/doctor.json" 2>&1 | tail -1)"

timeout "${T_SPEED:-240}" python3 bench/check_speed.py --out "$OUT" --bwrap "$dir/usr/bin/bwrap" > "$OUT/speed.log" 2>&1
note "check_speed rc=$?"

tests() {  # name, seconds, pytest args...
  local name=$1 secs=$2; shift 2
  timeout "$secs" python3 -m pytest -m gpu -q -rfE -p no:cacheprovider "$@" > "$OUT/tests-$name.log" 2>&1
  note "$name rc=$?: $(tail -1 "$OUT/tests-$name.log")"
}
tests core "$(( $(left) / 4 ))" tests/sandbox/test_gpu_sandbox.py tests/core/test_core_gpu.py -k "not corpus_entry"
tests redteam "$(( $(left) / 2 ))" -rxXfE tests/redteam/test_gpu.py
tests compile_integrity "$(( $(left) - 15 ))" tests/compile/test_compile_gpu.py tests/integrity
cat "$OUT/summary.txt" "$OUT/check_speed.md" 2>/dev/null
