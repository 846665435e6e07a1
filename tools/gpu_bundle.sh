#!/usr/bin/env bash
# Builds, on this machine, with --config=cuda, every GPU test (tag `gpu`), the
# GPU benchmarks, overlap_bench, train_llama and dtrun, and packs them into one folder with the
# shared libraries a bare CUDA machine lacks (resolved from ldd: Abseil,
# OpenBLAS, Gloo, GoogleTest, Benchmark, ...). The CUDA runtime is linked in
# statically; cuBLAS and NCCL are NOT packed: run.sh takes them from the
# target machine's Python environment (the nvidia-* wheels under
# site-packages/nvidia/), and says which library is missing when it cannot.
#
#   tools/gpu_bundle.sh [OUT_DIR]    (default: gpu_bundle/ in the repo root)
#
# The programs and libraries travel compressed (payload.tar.xz, xz -9: gzip
# no longer fits 64 MiB; OpenBLAS alone
# is 36 MB unpacked); run.sh unpacks them beside itself. Fails when the folder
# exceeds 64 MiB. On the GPU machine: `OUT_DIR/run.sh` runs everything and
# writes OUT_DIR/summary.txt (or $1/summary.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-gpu_bundle}
limit_bytes=$((64 * 1024 * 1024))

mapfile -t tests < <(./bazelw query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
# overlap_bench is a CPU benchmark: the GPU machine's 16 cores show the
# overlap that the 2-core VM cannot (docs/performance.md).
benches=(//bench:gpu_bench //bench:overlap_bench)
# The op family tests, run again with DTENSOR_TEST_DEVICE=cuda: every op's
# layouts and strategies on CUDA DTensors (in-process ranks sharing the GPU).
suites=(//tests/ops:cast_ops_test //tests/ops:elementwise_ops_test
  //tests/ops:join_ops_test //tests/ops:matmul_ops_test
  //tests/ops:nn_ops_test //tests/ops:norm_ops_test //tests/ops:reduction_ops_test
  //tests/ops:slice_ops_test //tests/ops:view_ops_test
  //tests/ops:vocab_ops_test //tests/ops:loss_parallel_test
  //tests/ops:cross_entropy_nd_test)
targets=("${tests[@]}" "${suites[@]}" "${benches[@]}" //examples:train_llama
  //tools:dtrun)
# Programs the tests start by their workspace path. The bundle lays them out,
# with the data files below, as Bazel's runfiles: runfiles/dtensor/<path>;
# run.sh runs the tests there, with TEST_SRCDIR pointing at runfiles/.
data=(//tests/collectives:collective_worker)
./bazelw build --config=cuda "${targets[@]}" "${data[@]}"

rm -rf "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out" "$stage/bin" "$stage/lib"
# The output path of a label: //pkg:name -> pkg/name.
label_path() {
  local path=${1#//}
  echo "${path/://}"
}
bin_dir=$(./bazelw info --config=cuda bazel-bin 2>/dev/null)
for target in "${targets[@]}"; do
  path=$(label_path "$target")
  cp "$bin_dir/$path" "$stage/bin/$(basename "$path")"
done
# Files train_llama and the tests read, by their workspace path.
data_files=(examples/data/corpus.txt bench/peer/empty.json
  bench/configs/llama_1b_*layers.json parallel/plans/*.json)
for file in "${data_files[@]}"; do
  mkdir -p "$stage/runfiles/dtensor/$(dirname "$file")"
  cp "$file" "$stage/runfiles/dtensor/$file"
done
for target in "${data[@]}"; do
  path=$(label_path "$target")
  mkdir -p "$stage/runfiles/dtensor/$(dirname "$path")"
  cp "$bin_dir/$path" "$stage/runfiles/dtensor/$path"
done
printf '%s\n' "${tests[@]}" | xargs -n1 basename | sed 's/.*://' >"$stage/tests.txt"
printf '%s\n' "${suites[@]}" | sed 's/.*://' >"$stage/suites.txt"

# Libraries the target machine provides: the C/C++ runtime and the loader,
# the driver, and cuBLAS/NCCL (from its Python environment).
provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libcublas|libcublasLt|libnccl)'
for binary in "$stage"/bin/* "$stage"/runfiles/dtensor/tests/collectives/*; do
  ldd "$binary" | awk '/=>/ { print $1, $3 }' | while read -r name file; do
    if [[ "$name" =~ $provided ]]; then continue; fi
    if [[ "$file" == "not" || ! -f "$file" ]]; then
      echo "gpu_bundle: $binary needs $name, which is not found here" >&2
      exit 1
    fi
    cp -n "$file" "$stage/lib/$name"
  done
done
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* \
  "$stage"/runfiles/dtensor/tests/collectives/* 2>/dev/null || true
tar -cf - -C "$stage" bin lib runfiles tests.txt suites.txt |
  xz -9 -T0 >"$out/payload.tar.xz"

cp tools/gpu_bundle_run.sh "$out/run.sh"
cp bench/peer/gpu_torch.py "$out/"
chmod +x "$out/run.sh"

size=$(du -sb "$out" | cut -f1)
echo "gpu_bundle: $out holds $(ls "$stage/bin" | wc -l) programs and" \
  "$(ls "$stage/lib" | wc -l) libraries, $size bytes"
if ((size > limit_bytes)); then
  echo "gpu_bundle: $size bytes exceed the limit of $limit_bytes" >&2
  exit 1
fi
