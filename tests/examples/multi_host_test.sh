#!/usr/bin/env bash
# Two hosts: two network namespaces joined by a veth pair (10.213.0.1 and
# 10.213.0.2), each running `dtrun --nnodes 2` with two ranks of train_llama
# over Gloo (docs/reliability.md, "Several hosts"). Checks that the 4 ranks on
# two hosts give the single-host losses; that a rank killed on one host and a
# host whose link goes down mid-step each end the whole job, on both hosts,
# within the collective deadline with an error naming the lost ranks and their
# host; and that a checkpoint saved across the hosts resumes on one host.
# Needs root and iproute2 (`ip netns`); skips with a message otherwise.
set -euo pipefail
cd "${TEST_SRCDIR}/dtensor"

# Unique names: parallel runs of this test (and other jobs) must not collide.
# Interface names stay within Linux's 15 characters.
tag="dt$$$((RANDOM % 1000))"
host_a="${tag}a" host_b="${tag}b"
cleanup() {
  ip netns pids "$host_a" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns pids "$host_b" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$host_a" 2>/dev/null || true
  ip netns del "$host_b" 2>/dev/null || true
}
trap cleanup EXIT

skip() { echo "SKIP: $* (this test needs root and iproute2's network namespaces)"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip "not root"
command -v ip >/dev/null || skip "no ip command"
ip netns add "$host_a" 2>/dev/null || skip "ip netns add failed"
ip netns add "$host_b" || skip "ip netns add failed"
ip link add "${tag}va" netns "$host_a" type veth peer name "${tag}vb" \
  netns "$host_b" || skip "no veth pair"
ip -n "$host_a" addr add 10.213.0.1/24 dev "${tag}va"
ip -n "$host_b" addr add 10.213.0.2/24 dev "${tag}vb"
for host in "$host_a" "$host_b"; do ip -n "$host" link set lo up; done
ip -n "$host_a" link set "${tag}va" up
ip -n "$host_b" link set "${tag}vb" up

# The job's store secret, the same on both hosts (a multi-node dtrun needs it).
export DTENSOR_STORE_SECRET
DTENSOR_STORE_SECRET=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
deadline=4
# The longest a fault may take to end the job on every host: the deadline,
# dtrun's 3 s kill grace and start-up slack (as train_llama_faults_test).
limit=$((deadline + 12))
# A small step: the test checks the job across hosts, not the model.
shape=(--batch 2 --seq 32)
train=(examples/train_llama --backend gloo --deadline "$deadline" "${shape[@]}")
log_a="$TEST_TMPDIR/host_a.log" log_b="$TEST_TMPDIR/host_b.log"
port=29500

fail() {
  echo "FAIL: $*"
  echo "--- host A"; cat "$log_a" 2>/dev/null || true
  echo "--- host B"; cat "$log_b" 2>/dev/null || true
  exit 1
}
losses() { grep -o 'loss [0-9.]*' | awk '{print $2}'; }

# start_hosts <train_llama arguments...>: node 0 on host A (the master),
# node 1 on host B, in the background; their dtrun pids in job_a and job_b.
start_hosts() {
  port=$((port + 1))  # A fresh port: the last job's may linger in TIME_WAIT.
  local run=(tools/dtrun --nproc 2 --nnodes 2 --master-addr 10.213.0.1
    --master-port "$port")
  ip netns exec "$host_a" "${run[@]}" --node-rank 0 -- "${train[@]}" "$@" \
    >"$log_a" 2>&1 &
  job_a=$!
  ip netns exec "$host_b" "${run[@]}" --node-rank 1 -- "${train[@]}" "$@" \
    >"$log_b" 2>&1 &
  job_b=$!
}

# Waits for both hosts' jobs; returns non-zero if either failed.
wait_hosts() {
  local rc=0
  wait "$job_a" || rc=1
  wait "$job_b" || rc=1
  return $rc
}

# Returns once the job trains (2 s after rank 0's header: mid-step).
await_training() {
  for _ in $(seq 600); do
    grep -q 'training a' "$log_a" && { sleep 2; return 0; }
    sleep 0.1
  done
  fail "no start within 60 s"
}

# expect_both_fail <pattern_a> <pattern_b>: both hosts' jobs end within
# `limit` seconds, failed, host A's output matching pattern_a and host B's
# pattern_b.
expect_both_fail() {
  local waited=0
  while kill -0 "$job_a" 2>/dev/null || kill -0 "$job_b" 2>/dev/null; do
    ((waited < limit * 10)) || fail "the job still runs after ${limit}s"
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "the job ended on both hosts in $((waited / 10)).$((waited % 10))s"
  if wait "$job_a"; then fail "host A's job succeeded"; fi
  if wait "$job_b"; then fail "host B's job succeeded"; fi
  grep -q -- "$1" "$log_a" || fail "no '$1' in host A's output"
  grep -q -- "$2" "$log_b" || fail "no '$2' in host B's output"
  echo "  host A: $(grep -m1 -- "$1" "$log_a")"
  echo "  host B: $(grep -m1 -- "$2" "$log_b")"
}

checkpoint="$TEST_TMPDIR/checkpoint"
echo "--- 4 ranks on two hosts train as on one, and save (at ${SECONDS}s)"
one_host=$(examples/train_llama --steps 4 --seed 3 "${shape[@]}" | losses)
start_hosts --steps 2 --seed 3 --save "$checkpoint"
wait_hosts || fail "the two-host job failed"
two_hosts=$(losses <"$log_a")
[[ "$two_hosts" == "$(head -n 2 <<<"$one_host")" ]] ||
  fail "two-host losses differ: $two_hosts vs $(head -n 2 <<<"$one_host")"
grep -q "Gloo listens on 10.213.0.2" "$log_b" ||
  fail "host B's ranks did not take the address toward the master"
echo "losses: $(echo $two_hosts)"

echo "--- the checkpoint saved across the hosts resumes on one host (at ${SECONDS}s)"
resumed=$(tools/dtrun --nproc 4 -- "${train[@]}" --steps 4 --seed 3 \
  --resume "$checkpoint" | losses)
[[ "$resumed" == "$(tail -n 2 <<<"$one_host")" ]] ||
  fail "resumed on one host: $resumed vs $(tail -n 2 <<<"$one_host")"
echo "resumed losses: $(echo $resumed)"

echo "--- a rank killed on host B (at ${SECONDS}s)"
start_hosts --steps 100000
await_training
kill -9 "$(pgrep -P "$job_b" | head -n 1)"
# Host B's dtrun then ends rank 3: a rank of host A that notices after that
# names both (the killed rank is always named).
expect_both_fail 'ranks \[2\(, 3\)\?\] exited (on host .* at 10\.213\.0\.2)' \
  'dtrun: rank 2 failed'

echo "--- host B's link set down mid-step (at ${SECONDS}s)"
start_hosts --steps 100000
await_training
ip -n "$host_b" link set "${tag}vb" down
# Which ranks a rank names depends on where each stood when the link went down
# (a bucket all-reduce over all four waits on both of host B's ranks; host B's
# ranks may also wait on each other): host A must name host B's address, and
# host B host A's and the unreachable store.
expect_both_fail \
  'ranks \[[0-3, ]*\] did not arrive within 4s (on hosts\? .*at 10\.213\.0\.2[^)]*)' \
  'ranks \[[0-3, ]*\] did not arrive within 4s (on hosts\? .*at 10\.213\.0\.1[^)]*), and the store .* is unreachable'
echo "PASS (at ${SECONDS}s)"
