#ifndef DTENSOR_OPS_LOCAL_FN_H_
#define DTENSOR_OPS_LOCAL_FN_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/ops/op_args.h"
#include "dtensor/ops/op_def.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// An op's computation on local tensors (the tensor layer's kernel), for ops
// whose kernel is the same function on shards as on whole tensors.
using LocalFn = std::function<absl::StatusOr<Tensor>(
    absl::Span<const Tensor> inputs, const OpArgs& args)>;

// The dtype `fn` returns for inputs of the specs' dtypes and ranks (it runs
// on tensors of ones with every size 1; absent inputs stay undefined). Lets
// an InferFn reject under a metadata-only runtime exactly the dtypes the
// kernel rejects.
// Errors: what `fn` reports for them, prefixed with `op`.
absl::StatusOr<DType> ProbeDType(absl::string_view op, const LocalFn& fn,
                                 absl::Span<const DTensorSpec* const> inputs,
                                 const OpArgs& args);

// A KernelFn that runs `fn` on the local shards: one output.
KernelFn LocalKernel(LocalFn fn);

// `status` with its message prefixed by "<op>: ".
absl::Status WithOpName(absl::string_view op, const absl::Status& status);

}  // namespace dtensor

#endif  // DTENSOR_OPS_LOCAL_FN_H_
