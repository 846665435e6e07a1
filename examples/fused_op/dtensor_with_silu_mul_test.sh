#!/bin/bash
# The dtensor tool linked with the example op finds it by name: propagate
# names its strategy and --list lists it.
set -euo pipefail
tool="examples/fused_op/dtensor_with_silu_mul"
out="$("$tool" propagate --mesh 4 --op silu_mul --in "8x6:S(0)" --in 8x6:R --json)"
expected='"output":{"shape":[8,6],"placements":"S(0)"}'
if [[ "$out" != *"$expected"* ]]; then
  echo "propagate gave: $out" >&2
  exit 1
fi
list="$("$tool" propagate --list)"
grep -q '^silu_mul ' <<<"$list" || {
  echo "silu_mul is not listed" >&2
  exit 1
}
echo PASS
