#!/usr/bin/env bash
# Runs the main example for a few steps: it must finish, print a progress line
# per step with a falling loss, and the table of collectives.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
output=$(examples/train_llama --steps 4 --seed 1)
echo "$output"
losses=$(grep -o 'loss [0-9.]*' <<<"$output" | awk '{print $2}')
[[ $(wc -l <<<"$losses") -eq 4 ]] || { echo "expected 4 loss values"; exit 1; }
first=$(head -1 <<<"$losses")
last=$(tail -1 <<<"$losses")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
  { echo "loss did not fall: $first -> $last"; exit 1; }
grep -q 'all_reduce' <<<"$output" || { echo "no collectives table"; exit 1; }
# Bad flags: one line on stderr, non-zero exit.
if examples/train_llama --steps zero 2>/dev/null; then
  echo "bad --steps accepted"; exit 1
fi
echo "PASS"
