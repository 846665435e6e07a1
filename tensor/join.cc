// Cat and Stack.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

absl::StatusOr<Tensor> Cat(absl::Span<const Tensor> tensors, int64_t dim) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Cat: no tensors to concatenate");
  }
  const Tensor& first = tensors[0];
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Cat: tensor ", i, " is undefined"));
    }
  }
  DT_ASSIGN_OR_RETURN(const int64_t d, NormalizeDim(dim, first.dim()));
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i];
    if (tensor.dtype() != first.dtype() || tensor.device() != first.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cat: tensor ", i, " is ", std::string(DTypeName(tensor.dtype())),
          " on ", tensor.device().ToString(), ", tensor 0 is ",
          std::string(DTypeName(first.dtype())), " on ",
          first.device().ToString()));
    }
    bool matches = tensor.dim() == first.dim();
    for (int64_t j = 0; matches && j < first.dim(); ++j) {
      matches = j == d || tensor.shape()[j] == first.shape()[j];
    }
    if (!matches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cat: tensor ", i, " has shape ", ShapeToString(tensor.shape()),
          ", tensor 0 has ", ShapeToString(first.shape()),
          ": they may differ in dim ", dim, " only"));
    }
    shape[d] += tensor.shape()[d];
  }
  DT_ASSIGN_OR_RETURN(Tensor result,
                      Tensor::Empty(shape, first.dtype(), first.device()));
  int64_t start = 0;
  for (const Tensor& tensor : tensors) {
    DT_ASSIGN_OR_RETURN(Tensor slot,
                        result.Narrow(d, start, tensor.shape()[d]));
    DT_RETURN_IF_ERROR(slot.CopyFrom(tensor));
    start += tensor.shape()[d];
  }
  return result;
}

absl::StatusOr<Tensor> Stack(absl::Span<const Tensor> tensors, int64_t dim) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("Stack: no tensors to stack");
  }
  std::vector<Tensor> unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors[0].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Stack: tensor ", i, " has shape ", ShapeToString(tensors[i].shape()),
          ", tensor 0 has ", ShapeToString(tensors[0].shape())));
    }
    DT_ASSIGN_OR_RETURN(Tensor piece, tensors[i].Unsqueeze(dim));
    unsqueezed.push_back(std::move(piece));
  }
  return Cat(unsqueezed, dim);
}

}  // namespace dtensor
