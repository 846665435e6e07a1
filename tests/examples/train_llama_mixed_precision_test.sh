#!/usr/bin/env bash
# train_llama --mixed-precision bf16 on dp=2 x tp=2 with FSDP: the losses of
# the f32 run within 0.1 per step (the per-step tolerance of
# tests/parallel/mixed_precision_test.cc), every all-gather moving half the
# f32 bytes, and bad values refused with a message naming them.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
run() {
  examples/train_llama --steps 4 --seed 1 --batch 4 --seq 32 \
    --plan parallel/plans/tp_sp_fsdp.json "$@"
}
f32=$(run)
bf16=$(run --mixed-precision bf16)
echo "$bf16"
losses() { grep -o 'loss [0-9.]*' <<<"$1" | awk '{print $2}'; }
paste <(losses "$f32") <(losses "$bf16") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d;
    if (d > 0.1) { print "step " n ": f32 " $1 ", bf16 " $2; bad = 1 } }
  END { if (n != 4) { print "expected 4 losses, got " n; bad = 1 }; exit bad }'
gathered() { awk '$1 == "all_gather" { print $4 }' <<<"$1"; }
[[ $(( $(gathered "$f32") )) -eq $(( 2 * $(gathered "$bf16") )) ]] ||
  { echo "all_gather bytes: f32 $(gathered "$f32"), bf16 $(gathered "$bf16")"; exit 1; }
for bad in "--mixed-precision fp8" "--mixed-precision bf16 --dtype bf16"; do
  # shellcheck disable=SC2086
  if err=$(examples/train_llama --steps 1 $bad 2>&1); then
    echo "accepted: $bad"; exit 1
  fi
  grep -q -e fp8 -e 'dtype bf16' <<<"$err" || { echo "unclear error: $err"; exit 1; }
done
echo "PASS"
