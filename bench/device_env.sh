# Source this first in every command on the GPU machine (with `.whl` carried):
#   . bench/device_env.sh
# It installs the carried wheels (the image lacks langgraph, langchain, pydantic, nvtx) and kiln
# itself, offline, and exports what kiln's GPU tests and benchmarks need.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null || return 1
export PYTHONUNBUFFERED=1 PATH="$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -1)"
mkdir -p "${OUT:-/tmp/out}"
