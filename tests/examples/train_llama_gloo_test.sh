#!/usr/bin/env bash
# The main example as one process per rank over Gloo, started by dtrun: the
# same seed gives the same losses as on in-process ranks, and only rank 0
# reports.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
losses() { grep -o 'loss [0-9.]*' | awk '{print $2}'; }
inprocess=$(examples/train_llama --steps 3 --seed 2 | losses)
gloo_output=$(tools/dtrun --nproc 4 -- examples/train_llama --backend gloo \
  --steps 3 --seed 2)
echo "$gloo_output"
gloo=$(losses <<<"$gloo_output")
[[ $(wc -l <<<"$gloo") -eq 3 ]] || { echo "expected 3 loss values"; exit 1; }
[[ "$gloo" == "$inprocess" ]] ||
  { echo "gloo losses differ: $gloo vs $inprocess"; exit 1; }
[[ $(grep -c 'collectives issued' <<<"$gloo_output") -eq 1 ]] ||
  { echo "expected one report, from rank 0"; exit 1; }
# A mesh that does not match the number of processes is an error.
if tools/dtrun --nproc 2 -- examples/train_llama --backend gloo \
  --steps 1 >/dev/null 2>&1; then
  echo "a 4-rank mesh on 2 processes was accepted"; exit 1
fi
echo "PASS"
