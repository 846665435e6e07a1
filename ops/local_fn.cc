#include "dtensor/ops/local_fn.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::Status WithOpName(absl::string_view op, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(op, ": ", status.message()));
}

absl::StatusOr<DType> ProbeDType(absl::string_view op, const LocalFn& fn,
                                 absl::Span<const DTensorSpec* const> inputs,
                                 const OpArgs& args) {
  std::vector<Tensor> probes(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    absl::StatusOr<Tensor> ones =
        Tensor::Ones(Shape(inputs[i]->ndim(), 1), inputs[i]->dtype());
    if (!ones.ok()) return WithOpName(op, ones.status());
    probes[i] = *std::move(ones);
  }
  absl::StatusOr<Tensor> result = fn(probes, args);
  if (!result.ok()) return WithOpName(op, result.status());
  return result->dtype();
}

KernelFn LocalKernel(LocalFn fn) {
  return [fn = std::move(fn)](
             const KernelContext& ctx,
             absl::Span<const Tensor> inputs) -> absl::StatusOr<OpLocals> {
    DT_ASSIGN_OR_RETURN(Tensor out, fn(inputs, ctx.args()));
    return OpLocals{std::move(out)};
  };
}

}  // namespace dtensor
