// Tensor::ToString: NumPy-style text.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {
namespace {

// Dims longer than this print their first and last kEdgeItems entries.
constexpr int64_t kMaxItems = 6;
constexpr int64_t kEdgeItems = 3;
// Stands for the elided middle of a dim in the list of printed indices.
constexpr int64_t kEllipsis = -1;

std::vector<int64_t> PrintedIndices(int64_t size) {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < size; ++i) {
    if (size > kMaxItems && i == kEdgeItems) {
      indices.push_back(kEllipsis);
      i = size - kEdgeItems;
    }
    indices.push_back(i);
  }
  return indices;
}

template <typename T>
std::string FormatElement(T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return absl::StrCat(value);
  } else {
    return absl::StrFormat("%g", static_cast<double>(value));
  }
}

// Lays out the printed elements of a CPU tensor: first collects their text in
// order (to find the column width), then nests them in brackets.
class Printer {
 public:
  explicit Printer(const Tensor& tensor) : tensor_(tensor) {
    CollectElements(0, 0);
    for (const std::string& element : elements_) {
      width_ = std::max(width_, element.size());
    }
  }

  // The bracketed elements; continuation lines are indented by `indent`.
  std::string Layout(size_t indent) {
    std::string text;
    next_element_ = 0;
    Append(0, 0, indent, &text);
    return text;
  }

 private:
  void CollectElements(int64_t dim, int64_t offset) {
    if (dim == tensor_.dim()) {
      DispatchDType(tensor_.dtype(), [&](auto tag) {
        using T = decltype(tag);
        elements_.push_back(FormatElement(tensor_.data<T>()[offset]));
      });
      return;
    }
    for (int64_t i : PrintedIndices(tensor_.shape()[dim])) {
      if (i != kEllipsis) {
        CollectElements(dim + 1, offset + i * tensor_.strides()[dim]);
      }
    }
  }

  void Append(int64_t dim, int64_t offset, size_t indent, std::string* text) {
    if (dim == tensor_.dim()) {
      const std::string& element = elements_[next_element_++];
      text->append(width_ - element.size(), ' ');
      text->append(element);
      return;
    }
    // As NumPy: rows of the last dim on one line, outer dims separated by
    // one newline per dim below them.
    const int64_t inner_dims = tensor_.dim() - dim - 1;
    const std::string separator = inner_dims == 0
                                      ? ", "
                                      : "," + std::string(inner_dims, '\n') +
                                            std::string(indent + dim + 1, ' ');
    text->push_back('[');
    bool first = true;
    for (int64_t i : PrintedIndices(tensor_.shape()[dim])) {
      if (!first) text->append(separator);
      first = false;
      if (i == kEllipsis) {
        text->append("...");
      } else {
        Append(dim + 1, offset + i * tensor_.strides()[dim], indent, text);
      }
    }
    text->push_back(']');
  }

  const Tensor& tensor_;
  std::vector<std::string> elements_;
  size_t width_ = 0;
  size_t next_element_ = 0;
};

}  // namespace

std::string Tensor::ToString() const {
  if (!defined()) return "tensor(undefined)";
  auto host = To(Device::CPU());
  if (!host.ok()) {
    return absl::StrCat("tensor(<", host.status().message(), ">)");
  }
  constexpr absl::string_view kPrefix = "tensor(";
  std::string text(kPrefix);
  if (numel() == 0) {
    absl::StrAppend(&text, "[], shape=", ShapeToString(shape_));
  } else {
    absl::StrAppend(&text, Printer(*host).Layout(kPrefix.size()));
  }
  absl::StrAppend(&text, ", dtype=", std::string(DTypeName(dtype_)));
  if (!device().is_cpu())
    absl::StrAppend(&text, ", device=", device().ToString());
  text.push_back(')');
  return text;
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) {
  return os << tensor.ToString();
}

}  // namespace dtensor
