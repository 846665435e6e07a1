#!/usr/bin/env bash
# Whole-job faults: train_llama over Gloo, one process per rank under dtrun,
# with a short collective deadline. A rank killed mid-step, a rank stopped
# (SIGSTOP) past the deadline, and ranks started with different plans or
# meshes: every process and dtrun end with a clear error within the deadline
# (plus dtrun's 3 s kill grace). A save interrupted at random points leaves
# the last committed checkpoint, which resumes with the same losses.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"
deadline=4
# The longest a fault may take to end the job: the deadline, dtrun's grace
# and start-up slack.
limit=$((deadline + 12))
train=(examples/train_llama --backend gloo --deadline "$deadline")
log="$TEST_TMPDIR/job.log"
RANDOM=16  # Seeded: the same fault points on every run.

fail() { echo "FAIL: $*"; cat "$log" 2>/dev/null; exit 1; }

# Starts a long job in the background; returns while it trains (2 s after
# rank 0's header: the progress line has no newline until the last step).
start_job() {
  tools/dtrun --nproc 4 -- "${train[@]}" --steps 100000 "$@" >"$log" 2>&1 &
  job=$!
  for _ in $(seq 600); do
    grep -q 'training a' "$log" && { sleep 2; return 0; }
    sleep 0.1
  done
  fail "no start within 60 s"
}

# A rank of the job: the n-th child of dtrun.
rank_pid() { pgrep -P "$job" | sed -n "$(($1 + 1))p"; }

# Waits for the job to end; fails unless it failed with `pattern` in its
# output within `limit` seconds.
expect_job_error() {
  local pattern=$1 waited=0
  while kill -0 "$job" 2>/dev/null; do
    ((waited < limit * 10)) || { kill -9 "$job"; fail "job still running after ${limit}s"; }
    sleep 0.1
    waited=$((waited + 1))
  done
  if wait "$job"; then fail "the job succeeded"; fi
  grep -q "$pattern" "$log" || fail "no '$pattern' in the output"
  echo "job ended in $((waited / 10)).$((waited % 10))s: $(grep -m1 "$pattern" "$log")"
  faults=$((faults + 1))
}
faults=0

echo "--- a rank killed mid-step"
start_job
kill -9 "$(rank_pid 2)"
expect_job_error 'dtrun: rank [0-9] failed'

echo "--- a rank stopped past the deadline"
start_job
kill -STOP "$(rank_pid 1)"
expect_job_error 'DEADLINE_EXCEEDED\|did not arrive\|within'

echo "--- ranks started with different plans"
rank1_differs() {  # rank1_differs <flag> <value>: rank 1 gets another one.
  tools/dtrun --nproc 4 -- /bin/sh -c \
    'if [ "$RANK" = 1 ]; then exec "$@" '"$1 $2"'; else exec "$@"; fi' sh \
    "${train[@]}" --steps 3 >"$log" 2>&1 &
  job=$!
}
rank1_differs --plan parallel/plans/tp_sp_fsdp.json
expect_job_error 'train_llama: '
echo "--- ranks started with different meshes"
rank1_differs --mesh dp=4,tp=1
expect_job_error 'train_llama: '

echo "--- a save interrupted at random points"
losses() { grep -o 'loss [0-9.]*' | awk '{print $2}'; }
checkpoint="$TEST_TMPDIR/checkpoint"
straight=$(tools/dtrun --nproc 4 -- "${train[@]}" --steps 6 --seed 3 | losses)
tools/dtrun --nproc 4 -- "${train[@]}" --steps 2 --seed 3 --save \
  "$checkpoint" >/dev/null
for trial in 1 2 3 4; do
  # Resume at the last committed step, train to step 4 and save over it; a
  # rank is killed at a random point of the run (often inside the save).
  tools/dtrun --nproc 4 -- "${train[@]}" --steps 4 --seed 3 --resume \
    "$checkpoint" --save "$checkpoint" >"$log" 2>&1 &
  job=$!
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
  victim=$(rank_pid $((RANDOM % 4)) || true)
  [[ -n "$victim" ]] && kill -9 "$victim" 2>/dev/null || true
  wait "$job" && echo "trial $trial: the job finished first" ||
    { echo "trial $trial: killed"; faults=$((faults + 1)); }
  # Whatever committed last loads and continues the straight curve.
  resumed_output=$(tools/dtrun --nproc 4 -- "${train[@]}" --steps 6 --seed 3 \
    --resume "$checkpoint") || fail "the last committed checkpoint did not load"
  step=$(grep -o 'after step [0-9]*' <<<"$resumed_output" | awk '{print $3}')
  [[ "$step" == 2 || "$step" == 4 ]] || fail "resumed after step '$step'"
  resumed=$(losses <<<"$resumed_output")
  expected=$(tail -n $((6 - step)) <<<"$straight")
  [[ $(wc -l <<<"$resumed") -eq $((6 - step)) ]] ||
    fail "trial $trial: expected $((6 - step)) resumed steps: $resumed"
  paste <(echo "$resumed") <(echo "$expected") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) bad = 1 } END { exit bad }' ||
    fail "trial $trial resumed after step $step: $resumed vs $expected"
  echo "trial $trial: resumed after step $step with the same losses"
done
echo "PASS ($faults faults injected, 0 hangs)"
