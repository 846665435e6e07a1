#!/usr/bin/env bash
# Builds, on this machine, with --config=cuda, every GPU test (tag `gpu`), the
# GPU benchmarks and train_llama, and packs them into one folder with the
# shared libraries a bare CUDA machine lacks (resolved from ldd: Abseil,
# OpenBLAS, Gloo, GoogleTest, Benchmark, ...). The CUDA runtime is linked in
# statically; cuBLAS and NCCL are NOT packed: run.sh takes them from the
# target machine's Python environment (the nvidia-* wheels under
# site-packages/nvidia/), and says which library is missing when it cannot.
#
#   tools/gpu_bundle.sh [OUT_DIR]    (default: gpu_bundle/ in the repo root)
#
# Fails when the folder exceeds 64 MiB. On the GPU machine: `OUT_DIR/run.sh`
# runs everything and writes OUT_DIR/summary.txt (or $1/summary.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-gpu_bundle}
limit_bytes=$((64 * 1024 * 1024))

mapfile -t tests < <(./bazelw query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
benches=(//bench:gpu_bench)
targets=("${tests[@]}" "${benches[@]}" //examples:train_llama)
./bazelw build --config=cuda "${targets[@]}"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bin_dir=$(./bazelw info --config=cuda bazel-bin 2>/dev/null)
for target in "${targets[@]}"; do
  path=${target#//}
  path=${path/://}
  cp "$bin_dir/$path" "$out/bin/$(basename "$path")"
done
printf '%s\n' "${tests[@]}" | xargs -n1 basename | sed 's/.*://' >"$out/tests.txt"

# Libraries the target machine provides: the C/C++ runtime and the loader,
# the driver, and cuBLAS/NCCL (from its Python environment).
provided='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libcublas|libcublasLt|libnccl)'
for binary in "$out"/bin/*; do
  ldd "$binary" | awk '/=>/ { print $1, $3 }' | while read -r name file; do
    if [[ "$name" =~ $provided ]]; then continue; fi
    if [[ "$file" == "not" || ! -f "$file" ]]; then
      echo "gpu_bundle: $binary needs $name, which is not found here" >&2
      exit 1
    fi
    cp -n "$file" "$out/lib/$name"
  done
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/* 2>/dev/null || true

cp tools/gpu_bundle_run.sh "$out/run.sh"
chmod +x "$out/run.sh"

size=$(du -sb "$out" | cut -f1)
echo "gpu_bundle: $out holds $(ls "$out/bin" | wc -l) programs and" \
  "$(ls "$out/lib" | wc -l) libraries, $size bytes"
if ((size > limit_bytes)); then
  echo "gpu_bundle: $size bytes exceed the limit of $limit_bytes" >&2
  exit 1
fi
