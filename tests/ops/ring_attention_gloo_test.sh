#!/usr/bin/env bash
# Ring attention's cases (ring_attention_case.h) over Gloo, one process per
# rank under dtrun: cp = 2 on 2 processes; cp = 4 (uneven lengths included)
# and dp = 2 x cp = 2 on 4; forward and gradients against the single-rank
# program, every rank reporting its cases.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
for nproc in 2 4; do
  output=$(tools/dtrun --nproc "$nproc" -- tests/ops/ring_attention_worker gloo)
  echo "$output"
  [[ $(grep -c 'cases match one rank' <<<"$output") -eq $nproc ]] ||
    { echo "expected $nproc ranks to report on $nproc processes"; exit 1; }
done
echo "PASS"
