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
./bazelw build //examples:train_llama //tools:dtrun >/dev/null 2>&1
bin=bazel-bin/examples/train_llama
dtrun=bazel-bin/tools/dtrun
tokens=$((8 * 64))  # train_llama's batch x seq

# Milliseconds per step from train_llama's last "N tokens/s" (the steps
# after the first: --steps counts them all; the first's cost is amortized).
dtensor_ms() {
  local out
  out=$("$@" --steps $steps 2>&1 | tr '\r' '\n' | grep -o '[0-9]* tokens/s' |
        tail -1 | cut -d' ' -f1)
  python3 -c "print(f'{$tokens / $out * 1e3:.2f}')"
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

run_case "1 process" single env OMP_NUM_THREADS=1 "$bin" --mesh dp=1 \
  --plan bench/peer/empty.json
run_case "TP=2" tp "$dtrun" --nproc 2 -- "$bin" --backend gloo --mesh tp=2 \
  --plan bench/peer/tp.json
run_case "DP=2" ddp "$dtrun" --nproc 2 -- "$bin" --backend gloo --mesh dp=2 \
  --plan bench/peer/dp.json
