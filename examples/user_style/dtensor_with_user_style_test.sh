#!/bin/bash
# A plan file naming the user style: the dtensor tool linked with its
# registration explains it (w1's weight S(0), its output all-gathered to R:
# one all-gather in forward);
# the plain tool does not know the name and says so.
set -euo pipefail
plan="examples/user_style/colwise_gathered_plan.json"
out="$(examples/user_style/dtensor_with_user_style explain --config tiny \
  --plan "$plan" --mesh tp=2 --json)"
w1="$(grep -o '"name":"layers.0.feed_forward.w1","type".\{0,700\}' <<<"$out" || true)"
for expected in '"layout":"S(0)","local_shape":[352,256]' \
  '"output":{"shape":[1,128,704],"dtype":"bf16","layout":"R"' \
  '"forward":[{"kind":"all_gather"'; do
  if [[ "$w1" != *"$expected"* ]]; then
    echo "w1 lacks $expected: $w1" >&2
    exit 1
  fi
done
if plain="$(tools/dtensor explain --config tiny --plan "$plan" --mesh tp=2 2>&1)"; then
  echo "the plain tool accepted the user style" >&2
  exit 1
fi
grep -q 'unknown style "colwise_gathered"' <<<"$plain" || {
  echo "the plain tool's error: $plain" >&2
  exit 1
}
echo PASS
