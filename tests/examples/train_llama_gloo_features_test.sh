#!/usr/bin/env bash
# Issue 28's three features over Gloo, one process per rank under dtrun, on
# tp_sp_fsdp: activation checkpointing (full, selective) and bf16 mixed
# precision on dp=2 x tp=2, context parallelism (balanced) on
# dp=2 x cp=2 x tp=2 (8 processes), and all three together. Each run's
# saved checkpoint (parameters and optimizer state) must be byte for byte
# the in-process run's: Gloo's all_reduce adds in rank order like the
# in-process backend (docs/collectives_backends.md), so no tolerance. Its
# losses must be the single-rank program's (dp=1 x tp=1) as printed
# (4 decimals) in f32, and within 0.1 per step with bf16 (the tolerances of
# train_llama_long_context_test).
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
out="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--steps 2 --seed 1 --batch 4 --seq 32
  --plan parallel/plans/tp_sp_fsdp.json)
source tests/examples/compare_losses.sh
single=$(examples/train_llama "${common[@]}" --mesh dp=1,tp=1)
check() {  # name, processes, tolerance against one rank, flags...
  local name=$1 nproc=$2 tol=$3
  shift 3
  local inprocess gloo
  inprocess=$(examples/train_llama "${common[@]}" "$@" \
    --save "$out/$name.inprocess")
  gloo=$(tools/dtrun --nproc "$nproc" -- examples/train_llama \
    --backend gloo "${common[@]}" "$@" --save "$out/$name.gloo")
  echo "$name over Gloo:"
  echo "$gloo"
  [[ "$(losses "$gloo")" == "$(losses "$inprocess")" ]] ||
    { echo "$name: gloo losses differ from in-process"; exit 1; }
  diff -rq "$out/$name.inprocess" "$out/$name.gloo" ||
    { echo "$name: gloo checkpoint differs from in-process"; exit 1; }
  compare "$single" "$gloo" "$tol" "$name against one rank" 2
}
check full 4 0 --mesh dp=2,tp=2 --activation-checkpoint full
check selective 4 0 --mesh dp=2,tp=2 --activation-checkpoint selective
check bf16 4 0.1 --mesh dp=2,tp=2 --mixed-precision bf16
check cp 8 0 --mesh dp=2,cp=2,tp=2 --context-parallel balanced
check all 8 0.1 --mesh dp=2,cp=2,tp=2 --context-parallel balanced \
  --mixed-precision bf16 --activation-checkpoint selective
echo "PASS"
