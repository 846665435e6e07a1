#!/usr/bin/env bash
# run.sh of the GPU bundle (tools/gpu_bundle.sh): runs every GPU test, the GPU
# benchmarks and a short train_llama, and writes one summary file:
#
#   ./run.sh [SUMMARY]      (default: summary.txt beside this script)
#
# Device time is short: PARTS (default "tests suites bench overlap torch
# train") chooses what runs, in that order, e.g. PARTS="tests bench" first and
# the rest in a second call (with another SUMMARY); TEST_FILTER (an extended
# regex over the test names) narrows tests and suites, BENCH_FILTER (a
# --benchmark_filter regex) gpu_bench. Each test has TEST_TIMEOUT seconds
# (default 180): a hung kernel fails its test, not the whole run. The part
# "sanitize" (not run unless named) runs SANITIZE_TESTS (a regex; default the
# attention, fused norm and embedding backward tests) under compute-sanitizer's
# memcheck and racecheck.
#
# cuBLAS and NCCL come from this machine's Python environment (the nvidia-*
# wheels, e.g. site-packages/nvidia/cu13/lib or nvidia/cublas/lib).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
summary=${1:-$here/summary.txt}
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# The programs, their libraries and tests.txt, packed by tools/gpu_bundle.sh.
# Python's lzma where the machine has no xz program.
tar -xJf "$here/payload.tar.xz" -C "$here" 2>/dev/null ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$here/payload.tar.xz" "$here" || {
  say "FAIL: cannot unpack $here/payload.tar.xz"
  exit 2
}

# The folders holding `name` under the Python environment's nvidia/ package.
find_lib() {
  local name=$1 roots
  roots=$(python3 -c 'import nvidia, os; print(*[p for p in nvidia.__path__])' 2>/dev/null)
  for root in $roots /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    [[ -d "$root" ]] || continue
    find "$root" -name "$name" -print -quit 2>/dev/null
  done | head -n1
}

lib_path=$here/lib
for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  file=$(find_lib "$lib")
  if [[ -z "$file" ]]; then
    say "MISSING: $lib (expected in the Python environment's nvidia-* wheels," \
      "e.g. pip install nvidia-cublas nvidia-nccl-cu13)"
    exit 2
  fi
  lib_path=$lib_path:$(dirname "$file")
done
export LD_LIBRARY_PATH=$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)"

parts=" ${PARTS:-tests suites bench overlap torch train} "
part() { [[ "$parts" == *" $1 "* ]]; }

failed=0
run_test() {  # run_test <program> <log name> [VAR=value...]
  local test=$1 log=$2 status=0
  shift 2
  (cd "$here/runfiles/dtensor" &&
    timeout "${TEST_TIMEOUT:-180}" env TEST_SRCDIR="$here/runfiles" "$@" \
      ${wrapper[@]+"${wrapper[@]}"} "$here/bin/$test") >"$here/$log.log" 2>&1 ||
    status=$?
  if ((status == 0)); then
    say "PASS $log ($(grep -c '\[  SKIPPED \]' "$here/$log.log") skipped lines)"
  else
    say "FAIL $log$( ((status == 124)) && echo " (timed out)")"
    tail -n 40 "$here/$log.log" >>"$summary"
    failed=1
  fi
}
if part tests; then
  while read -r test; do
    [[ -n "$test" ]] && run_test "$test" "$test"
  done < <(grep -E "${TEST_FILTER:-.}" "$here/tests.txt")
fi
if part suites; then
  while read -r test; do
    [[ -n "$test" ]] && run_test "$test" "$test.cuda" DTENSOR_TEST_DEVICE=cuda
  done < <(grep -E "${TEST_FILTER:-.}" "$here/suites.txt")
fi

# Not in the default PARTS (slow): the kernels that only a device can check
# for out-of-bounds accesses and shared-memory races, under compute-sanitizer
# where this machine has it (CUDA toolkit or the nvidia-cuda-sanitizer wheel).
if part sanitize; then
  sanitizer=$(command -v compute-sanitizer || find_lib compute-sanitizer)
  if [[ -z "$sanitizer" ]]; then
    say "sanitize: no compute-sanitizer on this machine"
  else
    for tool in memcheck racecheck; do
      wrapper=("$sanitizer" --tool "$tool" --error-exitcode 1)
      while read -r test; do
        [[ -n "$test" ]] && run_test "$test" "$test.$tool"
      done < <(grep -E "${SANITIZE_TESTS:-attention_cuda_test|fused_norm_cuda_test|embedding_backward_cuda_test}" \
        "$here/tests.txt")
      unset wrapper
    done
  fi
fi

if part bench; then
  say "=== gpu_bench"
  "$here/bin/gpu_bench" --benchmark_min_time=0.2 \
    --benchmark_filter="${BENCH_FILTER:-.}" 2>&1 |
    tee -a "$summary" >/dev/null || failed=1
fi

# run_logged <log name> <program and flags...>: run in the runfiles tree, the
# tail of its output (tail_lines lines, 14 unless set) into the summary.
run_logged() {
  local log=$1
  shift
  say "=== $(basename "$1") ${*:2}"
  if (cd "$here/runfiles/dtensor" && timeout 300 "$@") \
    >"$here/$log.log" 2>&1; then
    tr '\r' '\n' <"$here/$log.log" | grep -v '^$' |
      tail -n "${tail_lines:-14}" >>"$summary"
  else
    say "FAIL $(basename "$1") ${*:2}"
    tr '\r' '\n' <"$here/$log.log" | tail -n 20 >>"$summary"
    failed=1
  fi
}
run_train() {  # run_train <log name> <train_llama flags...>
  local log=$1
  shift
  run_logged "$log" "$here/bin/train_llama" "$@"
}

if part overlap; then
  say "=== overlap_bench (CPU: compute with an all-reduce overlapped)"
  for mib in 4 16 64; do
    "$here/bin/overlap_bench" --mib "$mib" 2>&1 | tee -a "$summary" >/dev/null ||
      failed=1
    timeout 120 "$here/bin/dtrun" --nproc 2 -- "$here/bin/overlap_bench" \
      --backend gloo --mib "$mib" 2>&1 | tail -n 1 | tee -a "$summary" \
      >/dev/null || failed=1
  done
fi

llama_batch=4
llama_seq=1024
# The issue's second shape: eight 1B-shaped layers at batch 8 x seq 2048.
big_layers=8
big_batch=8
big_seq=2048
if part torch; then
  say "=== PyTorch on the same device (bench/peer/gpu_torch.py)"
  timeout 300 python3 "$here/gpu_torch.py" --llama_batch "$llama_batch" \
    --llama_seq "$llama_seq" --big_layers "$big_layers" --big_batch \
    "$big_batch" --big_seq "$big_seq" 2>&1 | tee -a "$summary" >/dev/null ||
    failed=1
fi

# A step of the shipped tiny model on one GPU, then two 1B-shaped layers in
# bf16 (bench/configs/llama_1b_2layers.json) at the shape gpu_torch.py's
# llama figure uses.
single_gpu=(--device cuda --mesh dp=1 --plan bench/peer/empty.json)
if part train; then
  run_train train_tiny "${single_gpu[@]}" --steps 20
  # The same run replaying a CUDA graph of the step after the first: its
  # losses should match train_tiny's to about 4 digits.
  run_train train_tiny_graph "${single_gpu[@]}" --steps 20 --cuda-graph
  # Four in-process ranks (dp=2, tp=2) sharing the GPU, collectives through
  # the host; then one rank saves a checkpoint on the GPU that the CPU and the
  # GPU resume.
  run_train train_tp_dp --device cuda --steps 6
  run_train train_save "${single_gpu[@]}" --steps 3 --save "$here/ckpt"
  run_train train_resume_cpu --mesh dp=1 --plan bench/peer/empty.json \
    --steps 5 --resume "$here/ckpt"
  run_train train_resume_gpu "${single_gpu[@]}" --steps 5 --resume "$here/ckpt"
  # One process under dtrun with the NCCL backend: the rank's GPU comes from
  # its communicators.
  run_logged train_nccl "$here/bin/dtrun" --nproc 1 -- "$here/bin/train_llama" \
    --backend nccl "${single_gpu[@]}" --steps 5
  # --profile: the op table of the steps after the first (docs/profiling.md),
  # hence the longer tail.
  tail_lines=50 run_train train_1b "${single_gpu[@]}" \
    --config bench/configs/llama_1b_2layers.json --dtype bf16 \
    --batch "$llama_batch" --seq "$llama_seq" --steps 4 --profile \
    --profile-trace "$here/train_1b_trace.json"
  # The same step replayed as a CUDA graph (forward and backward): what the
  # host's launches cost it.
  tail_lines=4 run_train train_1b_graph "${single_gpu[@]}" \
    --config bench/configs/llama_1b_2layers.json --dtype bf16 \
    --batch "$llama_batch" --seq "$llama_seq" --steps 6 --cuda-graph
  # The steady-state line (median step, tokens/s, peak device memory) beside
  # gpu_torch.py's llama_l8 figures.
  tail_lines=4 run_train train_1b_8layers "${single_gpu[@]}" \
    --config "bench/configs/llama_1b_${big_layers}layers.json" --dtype bf16 \
    --batch "$big_batch" --seq "$big_seq" --steps 6
fi
# Every log (and the 1B step's trace) in one archive beside the summary: the
# whole record is two files.
logs=$(dirname "$summary")/logs.tar.gz
(cd "$here" && shopt -s nullglob && tar -czf "$logs" -- *.log *_trace.json) ||
  say "could not pack the logs into $logs"
say "logs: $logs"
say "result: $([[ $failed == 0 ]] && echo PASS || echo FAIL)"
exit $failed
