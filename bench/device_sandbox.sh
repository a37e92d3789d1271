#!/usr/bin/env bash
# The OS sandbox on the GPU machine (root, no network, no bubblewrap installed): does CUDA run in a
# confined worker, what does each spawn cost, what does the sandbox's GPU test suite say.
#
#   here, once:  mkdir -p .deb && (cd .deb && apt-get download bubblewrap) && echo /.deb/ >> .git/info/exclude
#   there:       . bench/device_env.sh && bash bench/device_sandbox.sh .deb/bubblewrap_*.deb
#                (carry .whl and .deb; $1 may also be an unpacked folder or a bwrap binary, or set KILN_BWRAP)
#
# Writes $OUT/sandbox-summary.txt (one line per step), sandbox-doctor.json, sandbox-tests.log,
# sandbox-overhead.json, sandbox-raw.log.
set -u
DEFAULT_BUDGET_S=560; . "$(dirname "$0")/device_lib.sh"
SUM="$OUT/sandbox-summary.txt"; : > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }

src=${1:-${KILN_BWRAP:-}}
case "$src" in
  *.deb) dir=/tmp/kiln-bwrap; rm -rf "$dir"; dpkg -x "$src" "$dir" && BWRAP=$dir/usr/bin/bwrap ;;
  "") BWRAP=$(command -v bwrap || true) ;;
  *) if [ -d "$src" ]; then BWRAP=$(find "$src" -name bwrap -type f | head -1); else BWRAP=$src; fi ;;
esac
[ -x "${BWRAP:-}" ] || { say "no bubblewrap binary from '${src}'"; exit 1; }
export PATH="$(dirname "$BWRAP"):$PATH"   # kiln finds it on PATH (or pass --bwrap to kiln check)
say "bwrap: $BWRAP ($("$BWRAP" --version 2>&1)); kernel $(uname -r); $(nvidia-smi -L | head -1)"

# 1. The bare facts, without kiln: the configuration measured before, then kiln's curated /dev.
PY=$(command -v python3)
CUDA_ONE='import torch; x = torch.ones(4, device="cuda"); torch.cuda.synchronize(); print("cuda ok", float(x.sum()))'
{ echo "== ro-bind / , dev-bind /dev"
  "$BWRAP" --unshare-user --uid 65534 --unshare-net --unshare-pid --die-with-parent --ro-bind / / \
    --dev-bind /dev /dev --proc /proc --tmpfs /tmp -- "$PY" -c "$CUDA_ONE"
  echo "== same, minimal /dev (null, urandom, nvidia nodes)"
  devs=(); for d in /dev/null /dev/zero /dev/urandom /dev/random /dev/nvidia*; do devs+=(--dev-bind "$d" "$d"); done
  "$BWRAP" --unshare-user --uid 65534 --unshare-net --unshare-pid --die-with-parent --ro-bind / / \
    --tmpfs /dev "${devs[@]}" --proc /proc --tmpfs /tmp -- "$PY" -c "$CUDA_ONE"
} > "$OUT/sandbox-raw.log" 2>&1
say "raw bwrap CUDA: $(grep -c 'cuda ok' "$OUT/sandbox-raw.log")/2 configurations ran (sandbox-raw.log)"

# 2. kiln's view: every layer in force?
kiln doctor --json > "$OUT/sandbox-doctor.json" 2>/dev/null
say "doctor: $(python3 -c "import json,sys; i=[x for x in json.load(open(sys.argv[1])) if x['name']=='sandbox'][0]; print(i['status'], i['detail'])" "$OUT/sandbox-doctor.json")"

# 3. The sandbox's tests, GPU ones and the CPU ones (containment with the GPU's nodes in /dev).
timeout "$(( $(left) - 200 ))" python3 -m pytest -q -rfE -p no:cacheprovider -m "gpu or not gpu" tests/sandbox \
  > "$OUT/sandbox-tests.log" 2>&1
say "tests/sandbox (gpu and cpu): $(tail -1 "$OUT/sandbox-tests.log")"

# 4. What a spawn costs, with and without the sandbox (fork server and one-shot), CUDA env.
timeout "$(( $(left) - 20 ))" python3 bench/sandbox_overhead.py --device cuda --n 10 --json "$OUT/sandbox-overhead.json" \
  > /dev/null 2> "$OUT/sandbox-overhead.err"
say "per-spawn overhead: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('fork server', d['fork_server_plain']['median_ms'], '->', d['fork_server_sandboxed']['median_ms'], 'ms; one-shot', d['oneshot_plain']['median_ms'], '->', d['oneshot_sandboxed']['median_ms'], 'ms; server start', d['fork_server_plain']['server_start_s'], '->', d['fork_server_sandboxed']['server_start_s'], 's; probe', d['probe_s'], 's')" "$OUT/sandbox-overhead.json" 2>&1)"
cat "$SUM"
