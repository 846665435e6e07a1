// The CUDA tensor kernels when dtensor is built without --config=cuda: no
// CUDA tensor can exist then, so these only report it.
#include "dtensor/tensor/cuda_backend.h"
#include "dtensor/tensor/cuda_backend_ops.h"

namespace dtensor::cuda {

absl::StatusOr<Tensor> UnaryOnDevice(UnaryOp, absl::string_view,
                                     const Tensor&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> BinaryOnDevice(BinaryOp, absl::string_view,
                                      const Tensor&, const Tensor&) {
  return NotBuilt();
}
absl::Status CopyOnDevice(const Tensor&, const Tensor&) { return NotBuilt(); }
absl::Status CopyOnStream(const Tensor&, const Tensor&, void*) {
  return NotBuilt();
}
absl::StatusOr<Tensor> MatmulOnDevice(const Tensor&, const Tensor&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> SoftmaxOnDevice(const Tensor&, int64_t, bool) {
  return NotBuilt();
}
absl::StatusOr<Tensor> RmsNormOnDevice(const Tensor&, const Tensor&, double) {
  return NotBuilt();
}
absl::StatusOr<Tensor> LayerNormOnDevice(const Tensor&, const Tensor&,
                                         const Tensor&, double) {
  return NotBuilt();
}
absl::StatusOr<Tensor> ReduceOnDevice(ReduceOp, bool, absl::string_view,
                                      const Tensor&, absl::Span<const int64_t>,
                                      bool) {
  return NotBuilt();
}
absl::StatusOr<Tensor> EmbeddingOnDevice(const Tensor&, const Tensor&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> WhereOnDevice(const Tensor&, const Tensor&,
                                     const Tensor&, const Shape&) {
  return NotBuilt();
}
absl::Status MaskedSoftmaxOnDevice(const Tensor&, int64_t, int64_t, bool,
                                   double) {
  return NotBuilt();
}
absl::StatusOr<Tensor> RotaryOnDevice(const Tensor&, const std::vector<double>&,
                                      const std::vector<double>&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> CrossEntropyRowsOnDevice(const Tensor&, const Tensor&,
                                                int64_t) {
  return NotBuilt();
}
absl::StatusOr<Tensor> IndexSelectOnDevice(const Tensor&, int64_t,
                                           const std::vector<int64_t>&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> GatherOnDevice(const Tensor&, int64_t, const Shape&,
                                      const std::vector<int64_t>&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> ScatterAddOnDevice(const Tensor&, int64_t, const Shape&,
                                          const std::vector<int64_t>&,
                                          const Tensor&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> EmbeddingBackwardOnDevice(const Tensor&,
                                                 const std::vector<int64_t>&,
                                                 int64_t, int64_t) {
  return NotBuilt();
}
absl::StatusOr<Tensor> DropoutOnDevice(const Tensor&, double, uint64_t,
                                       uint64_t, const Strides&) {
  return NotBuilt();
}
absl::Status AdamWStepOnDevice(const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&,
                               const AdamWCoefficients<double>&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> CrossEntropyOnDevice(const Tensor&, const Tensor&,
                                            Reduction, int64_t) {
  return NotBuilt();
}
absl::StatusOr<NormGrads> NormBackwardOnDevice(const Tensor&, const Tensor&,
                                               const Tensor&, double, bool,
                                               bool) {
  return NotBuilt();
}
absl::StatusOr<Tensor> LossShardMaxOnDevice(const Tensor&) {
  return NotBuilt();
}
absl::StatusOr<Tensor> LossShardSumsOnDevice(const Tensor&, const Tensor&,
                                             const Tensor&, int64_t) {
  return NotBuilt();
}
absl::StatusOr<Tensor> LossShardFinishOnDevice(const Tensor&, const Tensor&,
                                               const Tensor&, int64_t) {
  return NotBuilt();
}
absl::StatusOr<Tensor> AttentionForwardOnDevice(const Tensor&, const Tensor&,
                                                const Tensor&, const Shape&,
                                                bool, double) {
  return NotBuilt();
}
absl::StatusOr<AttentionGrads> AttentionBackwardOnDevice(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
    const Shape&, bool, double) {
  return NotBuilt();
}

}  // namespace dtensor::cuda
