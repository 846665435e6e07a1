#ifndef DTENSOR_TENSOR_CUDA_MMA_SYNC_CUH_
#define DTENSOR_TENSOR_CUDA_MMA_SYNC_CUH_

// Device wrappers of the warp-level tensor-core instructions (sm_80 and
// later) that register-resident kernels are built from: the m16n8k16 product
// with f32 accumulators, ldmatrix (shared memory to fragments, optionally
// transposed) and cp.async (global to shared memory without registers,
// zero-filling what lies outside the operand). Which lane holds which element
// is in mma_fragments.h. Only nvcc compiles this file.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "dtensor/tensor/cuda/mma_fragments.h"

namespace dtensor::cuda {

// The 16-bit input type of a product: __nv_bfloat16 or __half.
template <typename H>
struct MmaInput;

template <>
struct MmaInput<__nv_bfloat16> {
  // Two floats rounded to nearest into one register, `lo` in the low bits.
  __device__ static uint32_t Pack(float lo, float hi) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  // d += a b (MmaAElement, MmaBElement, MmaCElement say where the lanes'
  // elements are).
  __device__ static void Mma(float (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <>
struct MmaInput<__half> {
  __device__ static uint32_t Pack(float lo, float hi) {
    const __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  __device__ static void Mma(float (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

__device__ inline uint32_t SharedAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Four 8x8 matrices of 16-bit elements from shared memory: this lane gives
// `row`, the address (16-byte aligned) of row lane % 8 of matrix lane / 8.
__device__ inline void LdMatrixX4(uint32_t (&r)[4], const void* row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(SharedAddress(row)));
}

// LdMatrixX4 with each matrix transposed (LdMatrixElement's `trans`).
__device__ inline void LdMatrixX4Trans(uint32_t (&r)[4], const void* row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(SharedAddress(row)));
}

// 16 bytes from global `source` to shared `target` (both 16-byte aligned),
// asynchronously; with `valid` false the target gets zeros and nothing is
// read (`source` must still be a mapped address: pass the operand's base).
__device__ inline void CpAsync16(void* target, const void* source, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   SharedAddress(target)),
               "l"(source), "r"(valid ? 16 : 0));
}

// Closes the group of the cp.async calls issued since the last commit.
__device__ inline void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `kPending` committed groups are still in flight (the
// calling thread's; a __syncthreads after it makes them the block's).
template <int kPending>
__device__ inline void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace dtensor::cuda

#endif  // DTENSOR_TENSOR_CUDA_MMA_SYNC_CUH_
