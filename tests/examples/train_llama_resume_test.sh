#!/usr/bin/env bash
# Save and resume in the main example: two steps saved on dp=2,tp=2 with the
# TP plan and resumed on dp=1,tp=4 with the TP+SP+FSDP plan continue the loss
# curve of four uninterrupted steps.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
losses() { grep -o 'loss [0-9.]*' | awk '{print $2}'; }
checkpoint="${TEST_TMPDIR}/checkpoint"
straight=$(examples/train_llama --steps 4 --seed 5 | losses)
first=$(examples/train_llama --steps 2 --seed 5 --save "$checkpoint" | losses)
[[ -f "$checkpoint/metadata.json" ]] || { echo "no checkpoint written"; exit 1; }
resumed_output=$(examples/train_llama --steps 4 --seed 5 --resume \
  "$checkpoint" --mesh dp=1,tp=4 --plan parallel/plans/tp_sp_fsdp.json)
echo "$resumed_output"
grep -q 'resumed from .* after step 2' <<<"$resumed_output" ||
  { echo "no resume line"; exit 1; }
grep -q 'collectives issued by rank 0 over 2 steps' <<<"$resumed_output" ||
  { echo "the report does not count the 2 resumed steps"; exit 1; }
# Two steps are fewer than the warm-up: the steady-state line times both.
grep -q 'steady state, steps 3-4: [0-9.]* ms a step (median), [0-9]* tokens/s' \
  <<<"$resumed_output" || { echo "no steady-state line for steps 3-4"; exit 1; }
resumed=$(losses <<<"$resumed_output")
[[ $(wc -l <<<"$resumed") -eq 2 ]] || { echo "expected 2 resumed steps"; exit 1; }
# The layouts differ, so sums run in another order: allow 2e-4.
paste <(echo "$first"; echo "$resumed") <(echo "$straight") |
  awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 2e-4) { print "step " NR ": " $1 " vs " $2; bad = 1 } }
       END { exit bad }' || { echo "resumed curve differs"; exit 1; }
# A corrupt checkpoint is an error naming what is wrong, not a crash.
printf 'garbage' >"$checkpoint/metadata.json"
if examples/train_llama --steps 3 --resume "$checkpoint" 2>"$TEST_TMPDIR/err"; then
  echo "corrupt checkpoint accepted"; exit 1
fi
cat "$TEST_TMPDIR/err"
grep -q 'metadata' "$TEST_TMPDIR/err" || { echo "error does not name metadata"; exit 1; }
echo "PASS"
