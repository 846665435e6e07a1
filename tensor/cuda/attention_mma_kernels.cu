// Which problems the tensor-core attention takes (attention_mma_kernels.h);
// its forward is attention_fa2_forward.cu, its backward
// attention_fa2_backward.cu.
#include <stdint.h>

#include "dtensor/tensor/cuda/attention_mma_kernels.h"
#include "dtensor/tensor/cuda/mma_fragments.h"

namespace dtensor::cuda {
namespace {

bool Aligned16(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

}  // namespace

bool AttentionMmaSupports(ScalarType type, const AttentionLaunch& a,
                          const void* q, const void* k, const void* v,
                          const void* out) {
  if (type != ScalarType::kBF16 && type != ScalarType::kF16) return false;
  if (a.e != a.ev || a.e % kMmaK != 0 || a.e <= 0 || a.e > 128) return false;
  // Every row of every entry starts 16-byte aligned (8 halves).
  for (int operand = 0; operand < 3; ++operand) {
    for (int d = 0; d < a.batch.ndim; ++d) {
      if (a.batch.strides[operand][d] % 8 != 0) return false;
    }
  }
  return Aligned16(q) && Aligned16(k) && Aligned16(v) &&
         (out == nullptr || Aligned16(out));
}

}  // namespace dtensor::cuda
