#!/usr/bin/env bash
# Issue 28's three features in train_llama, against the plain dp=2 x tp=2 run
# of tp_sp_fsdp: context parallelism alone (dp=2 x cp=2 x tp=2, both orders;
# the same losses as printed, 4 decimals), and context parallelism with
# bf16 mixed precision and activation checkpointing together (within 0.1 per
# step, mixed precision's tolerance); bad --context-parallel values and a
# mesh without "cp" refused naming them.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
run() {
  examples/train_llama --steps 3 --seed 1 --batch 4 --seq 32 \
    --plan parallel/plans/tp_sp_fsdp.json "$@"
}
source tests/examples/compare_losses.sh
plain=$(run --mesh dp=2,tp=2)
for order in balanced contiguous; do
  cp=$(run --mesh dp=2,cp=2,tp=2 --context-parallel "$order")
  compare "$plain" "$cp" 0 "cp $order" 3
done
all=$(run --mesh dp=2,cp=2,tp=2 --context-parallel balanced \
  --mixed-precision bf16 --activation-checkpoint selective)
echo "$all"
compare "$plain" "$all" 0.1 "cp + bf16 + checkpointing" 3
for bad in "--mesh dp=2,cp=2,tp=2 --context-parallel sideways" \
  "--mesh dp=2,tp=2 --context-parallel balanced"; do
  # shellcheck disable=SC2086
  if err=$(run $bad 2>&1); then
    echo "accepted: $bad"; exit 1
  fi
  grep -q -e sideways -e 'mesh_dim "cp"' <<<"$err" ||
    { echo "unclear error: $err"; exit 1; }
done
echo "PASS"
