#!/usr/bin/env bash
# The GPU bundle's run.sh (tools/gpu_bundle_run.sh) over a fake bundle on a
# machine without a GPU: programs that pass, fail, hang and echo their flags
# stand in for the real ones, so what is checked is run.sh's own logic:
# PARTS/TEST_FILTER/BENCH_FILTER/SANITIZE_TESTS choose what runs,
# TEST_TIMEOUT fails a hung test without stopping the run, and the logs come
# back as one archive beside the summary.
set -euo pipefail
run_sh="${TEST_SRCDIR}/dtensor/tools/gpu_bundle_run.sh"
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/gpu_bundle_run.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

stage=$work/stage
mkdir -p "$stage/bin" "$stage/lib" "$stage/runfiles/dtensor"
printf '#!/bin/sh\necho "device=${DTENSOR_TEST_DEVICE:-none}"\n' >"$stage/bin/good_test"
printf '#!/bin/sh\necho broken; exit 3\n' >"$stage/bin/bad_test"
printf '#!/bin/sh\nsleep 30\n' >"$stage/bin/hung_test"
printf '#!/bin/sh\necho "gpu_bench $*"\n' >"$stage/bin/gpu_bench"
chmod +x "$stage"/bin/*
printf 'good_test\nbad_test\nhung_test\n' >"$stage/tests.txt"
printf 'good_test\n' >"$stage/suites.txt"
bundle=$work/bundle
mkdir -p "$bundle"
tar -cf - -C "$stage" bin lib runfiles tests.txt suites.txt |
  xz >"$bundle/payload.tar.xz"
cp "$run_sh" "$bundle/run.sh"

# A fake nvidia package holding the three libraries run.sh looks for.
mkdir -p "$work/site/nvidia/lib"
touch "$work/site/nvidia/__init__.py"
for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  touch "$work/site/nvidia/lib/$lib"
done
export PYTHONPATH=$work/site

summary=$work/out/summary.txt
mkdir -p "$work/out"
status=0
PARTS="tests suites bench" TEST_TIMEOUT=2 BENCH_FILTER=Attention \
  bash "$bundle/run.sh" "$summary" >/dev/null 2>&1 || status=$?
cat "$summary"
((status == 1)) || fail "a failing test must make run.sh exit 1, got $status"
grep -qx 'PASS good_test (0 skipped lines)' "$summary" || fail "good_test"
grep -qx 'FAIL bad_test' "$summary" || fail "bad_test not reported"
grep -qx 'broken' "$summary" || fail "bad_test's log tail not in the summary"
grep -qx 'FAIL hung_test (timed out)' "$summary" || fail "hung_test"
grep -qx 'PASS good_test.cuda (0 skipped lines)' "$summary" || fail "suite"
grep -q 'device=cuda' "$bundle/good_test.cuda.log" ||
  fail "suites run without DTENSOR_TEST_DEVICE=cuda"
grep -qx 'gpu_bench --benchmark_min_time=0.2 --benchmark_filter=Attention' \
  "$summary" || fail "BENCH_FILTER did not reach gpu_bench"
! grep -q 'PyTorch\|train_llama' "$summary" || fail "parts not chosen ran"
grep -qx 'result: FAIL' "$summary" || fail "result line"
tar -tzf "$work/out/logs.tar.gz" | grep -qx 'hung_test.log' ||
  fail "the logs archive lacks hung_test.log"

# TEST_FILTER: only the tests it matches; all passing, exit 0.
status=0
PARTS="tests suites" TEST_FILTER='^good' bash "$bundle/run.sh" \
  "$work/out/filtered.txt" >/dev/null 2>&1 || status=$?
cat "$work/out/filtered.txt"
((status == 0)) || fail "filtered run: exit $status, expected 0"
! grep -q 'bad_test\|hung_test\|gpu_bench' "$work/out/filtered.txt" ||
  fail "TEST_FILTER or PARTS let other tests run"
grep -qx 'result: PASS' "$work/out/filtered.txt" || fail "filtered result"
# PARTS=sanitize: the chosen tests under compute-sanitizer's two tools (a
# fake one on PATH that says which tool it is and runs the program).
mkdir -p "$work/sanitizer"
printf '#!/bin/sh\necho "sanitizer $2"\nshift 4\nexec "$@"\n' \
  >"$work/sanitizer/compute-sanitizer"
chmod +x "$work/sanitizer/compute-sanitizer"
status=0
PATH=$work/sanitizer:$PATH PARTS=sanitize SANITIZE_TESTS='^good' \
  bash "$bundle/run.sh" "$work/out/sanitize.txt" >/dev/null 2>&1 || status=$?
cat "$work/out/sanitize.txt"
((status == 0)) || fail "sanitize run: exit $status, expected 0"
for tool in memcheck racecheck; do
  grep -qx "PASS good_test.$tool (0 skipped lines)" "$work/out/sanitize.txt" ||
    fail "good_test under $tool not reported"
  grep -qx "sanitizer $tool" "$bundle/good_test.$tool.log" ||
    fail "good_test did not run under the sanitizer's $tool"
done
! grep -q 'bad_test\|hung_test' "$work/out/sanitize.txt" ||
  fail "SANITIZE_TESTS let other tests run"
echo "PASS"
