# Sourced by the train_llama tests: the losses train_llama prints, and a
# step-by-step comparison of two runs' losses.

# The loss values in train_llama's output $1, one a line.
losses() { grep -o 'loss [0-9.]*' <<<"$1" | awk '{print $2}'; }

# compare REFERENCE OTHER TOLERANCE WHAT STEPS: succeeds when OTHER's output
# has STEPS losses, each within TOLERANCE of REFERENCE's at the same step;
# else prints each step that is off (named WHAT) and fails.
compare() {
  paste <(losses "$1") <(losses "$2") |
    awk -v tol="$3" -v what="$4" -v steps="$5" '
    { n++; d = $1 - $2; if (d < 0) d = -d;
      if (d > tol) { print what " step " n ": " $1 " vs " $2; bad = 1 } }
    END { if (n != steps) {
            print what ": expected " steps " losses, got " n; bad = 1 };
          exit bad }'
}
