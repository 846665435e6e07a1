#!/bin/bash
# train_llama against the same model and step in eager PyTorch
# (bench/peer/llama_torch.py), run side by side: one process; TP=2 (the
# Megatron split; PyTorch written by hand) and DP=2 (PyTorch:
# DistributedDataParallel), both two processes over Gloo on this machine.
# Rounds alternate the two programs; the medians of the per-round times per
# step and their ratio (dtensor / PyTorch) are printed.
#
#   bench/peer/compare.sh [ROUNDS]      (from the repository root)
#
# Needs PyTorch: apt-get install python3-torch (Debian); without it the
# script says so and exits 0. Builds //examples:train_llama and //tools:dtrun.
set -euo pipefail
rounds=${1:-3}
steps=20
# Debian's interpreter, where python3-torch installs (PATH may hold another).
python=${PYTHON:-/usr/bin/python3}
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "skip: PyTorch is not installed (apt-get install python3-torch)"
  exit 0
fi
# -c opt as every benchmark here (bench/BUILD.bazel).
./bazelw build -c opt //examples:train_llama //tools:dtrun >/dev/null 2>&1
bin=bazel-bin/examples/train_llama
dtrun=bazel-bin/tools/dtrun
tokens=$((8 * 64))  # train_llama's batch x seq
# One BLAS thread everywhere, as the PyTorch side (torch.set_num_threads(1)).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# Median milliseconds per step after the first 2, as llama_torch.py: step k's
# progress line gives the cumulative time k * tokens / (tokens/s), so each
# step's time is the difference of two lines (the rounded rate: about 1%).
dtensor_ms() {
  "$@" --steps $steps 2>&1 | tr '\r' '\n' |
    sed -n 's/.*step *\([0-9]*\)\/.* \([0-9.]*\) tokens\/s/\1 \2/p' |
    python3 -c "
import statistics, sys
t = {int(k): int(k) * $tokens / float(r) for k, r in (l.split() for l in sys.stdin)}
print(f'{statistics.median(t[k] - t[k - 1] for k in t if k > 2) * 1e3:.2f}')"
}

median() { python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.2f}')" "$@"; }

run_case() {  # name, torch mode, dtensor command...
  local name=$1 mode=$2; shift 2
  local ours=() theirs=()
  for ((r = 0; r < rounds; r++)); do
    ours+=("$(dtensor_ms "$@")")
    theirs+=("$("$python" bench/peer/llama_torch.py "$mode" --steps $steps |
                cut -d' ' -f3)")
  done
  local a b
  a=$(median "${ours[@]}")
  b=$(median "${theirs[@]}")
  printf '%-10s dtensor %8s ms/step  pytorch %8s ms/step  ratio %s\n' \
    "$name" "$a" "$b" "$(python3 -c "print(f'{$a / $b:.2f}')")"
}

run_case "1 process" single "$bin" --mesh dp=1 \
  --plan bench/peer/empty.json
run_case "TP=2" tp "$dtrun" --nproc 2 -- "$bin" --backend gloo --mesh tp=2 \
  --plan bench/peer/tp.json
run_case "DP=2" ddp "$dtrun" --nproc 2 -- "$bin" --backend gloo --mesh dp=2 \
  --plan bench/peer/dp.json
