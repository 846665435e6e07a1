#ifndef DTENSOR_TENSOR_TENSOR_H_
#define DTENSOR_TENSOR_TENSOR_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dtensor/base/debug_check.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/storage.h"

namespace dtensor {

// Sizes of a tensor's dims, outermost first.
using Shape = std::vector<int64_t>;
// Element strides of a tensor's dims (in elements, not bytes).
using Strides = std::vector<int64_t>;

// Number of elements of a shape (1 for a 0-d shape).
int64_t NumElements(absl::Span<const int64_t> shape);
// Row-major strides of a shape.
Strides ContiguousStrides(absl::Span<const int64_t> shape);
// "[2, 3]".
std::string ShapeToString(absl::Span<const int64_t> shape);
// Normalises a possibly negative dim into [0, ndim).
// Errors: `dim` outside [-ndim, ndim) (InvalidArgument, naming it and ndim).
absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t ndim);

// A strided view over shared storage: the local tensor of one rank.
//
// A Tensor is a value type with reference semantics for its data: copying a
// Tensor copies the view (shape, strides, offset) and shares the storage, so
// views alias their base, as in NumPy and PyTorch. Operations that can fail
// (bad dims, mismatched shapes, unsupported dtypes) return absl::StatusOr with
// a message naming the offending values; none of them aborts.
//
// A default-constructed Tensor is undefined (`defined()` is false).
// Errors: every operation that returns a status reports an undefined tensor,
// a dim out of range and a size that does not fit (InvalidArgument).
class Tensor {
 public:
  Tensor() = default;

  // ---- Creation. Shapes may contain zeros.
  // Errors: a negative size, an element count that overflows int64
  // (InvalidArgument); no memory (ResourceExhausted); a CUDA device in a
  // build or on a machine without one (FailedPrecondition). ----
  static absl::StatusOr<Tensor> Empty(Shape shape, DType dtype,
                                      Device device = Device::CPU());
  static absl::StatusOr<Tensor> Zeros(Shape shape, DType dtype,
                                      Device device = Device::CPU());
  static absl::StatusOr<Tensor> Ones(Shape shape, DType dtype,
                                     Device device = Device::CPU());
  static absl::StatusOr<Tensor> Full(Shape shape, double value, DType dtype,
                                     Device device = Device::CPU());
  // 1-D [start, end) by step, like torch.arange.
  // Errors: a non-finite start, end or step; step 0; a step that goes away
  // from `end`; too many elements.
  static absl::StatusOr<Tensor> Arange(double start, double end, double step,
                                       DType dtype);
  // Uniform in [low, high) and normal(mean, stddev), drawn in row-major order
  // from `generator`: the same seed gives the same values on every machine.
  static absl::StatusOr<Tensor> Uniform(Shape shape, double low, double high,
                                        Generator& generator,
                                        DType dtype = DType::kF32);
  static absl::StatusOr<Tensor> Normal(Shape shape, double mean, double stddev,
                                       Generator& generator,
                                       DType dtype = DType::kF32);
  // A contiguous CPU tensor holding `values` (row-major) with `shape`.
  // Errors: values.size() != the element count of `shape`.
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(const std::vector<T>& values,
                                           Shape shape);
  // A 0-d tensor.
  static Tensor Scalar(double value, DType dtype = DType::kF32);

  // ---- Metadata. ----
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const;
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  // Size of `dim` (negative dims count from the end); -1 for a dim out of
  // range.
  int64_t size(int64_t dim) const;
  int64_t numel() const { return NumElements(shape_); }
  int64_t storage_offset() const { return storage_offset_; }
  size_t nbytes() const { return numel() * ElementSize(dtype_); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // ---- Data access (CPU). `data<T>()` points at element [0,...,0].
  // Requires: T is the type stored for dtype() (CppToDType<T>() == dtype()),
  // checked by DT_DCHECK. ----
  template <typename T>
  T* data() const;
  void* raw_data() const;
  // The element at `index` converted to double (any dtype, any device); for
  // tests and printing, not for hot loops. NaN for an index of the wrong
  // length or out of range.
  double At(absl::Span<const int64_t> index) const;
  // The single element of a 1-element tensor, as double.
  // Errors: numel() != 1.
  absl::StatusOr<double> Item() const;
  // All elements in row-major order, converted to T (any device). A CUDA
  // tensor's copy waits for its device's stream.
  // Errors: an undefined tensor (InvalidArgument); a failed copy or
  // conversion (its status: a CUDA device in a build without CUDA is
  // FailedPrecondition).
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const;

  // ---- Views: share storage, never copy. ----
  // Elements [start, start + length) of `dim`.
  absl::StatusOr<Tensor> Narrow(int64_t dim, int64_t start,
                                int64_t length) const;
  // Python-style slice [start, end) with step > 0; start/end are clamped.
  absl::StatusOr<Tensor> Slice(int64_t dim, int64_t start, int64_t end,
                               int64_t step = 1) const;
  // Removes `dim`, taking element `index` (negative counts from the end).
  absl::StatusOr<Tensor> Select(int64_t dim, int64_t index) const;
  absl::StatusOr<Tensor> Transpose(int64_t dim0, int64_t dim1) const;
  // Errors: `dims` not a permutation of 0..dim()-1 (negatives allowed).
  absl::StatusOr<Tensor> Permute(absl::Span<const int64_t> dims) const;
  // Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a size.
  absl::StatusOr<Tensor> Expand(absl::Span<const int64_t> shape) const;
  // Removes all size-1 dims / the given size-1 dim (a no-op if not size 1).
  Tensor Squeeze() const;
  absl::StatusOr<Tensor> Squeeze(int64_t dim) const;
  // Inserts a size-1 dim at `dim` in [-(dim()+1), dim()].
  absl::StatusOr<Tensor> Unsqueeze(int64_t dim) const;
  // A view with `shape` (one -1 entry is inferred).
  // Errors: a shape of another element count, more than one -1, strides
  // that do not allow a view.
  absl::StatusOr<Tensor> View(absl::Span<const int64_t> shape) const;
  // Like View, but copies when strides forbid a view.
  absl::StatusOr<Tensor> Reshape(absl::Span<const int64_t> shape) const;
  // Merges dims [start_dim, end_dim] into one (copy only when needed).
  absl::StatusOr<Tensor> Flatten(int64_t start_dim = 0,
                                 int64_t end_dim = -1) const;
  // torch.chunk: `chunks` pieces of size ceil(n / chunks) along `dim`; the
  // last non-empty piece may be smaller. Like torch.chunk this returns fewer
  // than `chunks` pieces when n does not fill them; ChunkExact always returns
  // `chunks` pieces, the trailing ones empty (the placement rule of DTensor).
  absl::StatusOr<std::vector<Tensor>> Chunk(int64_t chunks, int64_t dim) const;
  absl::StatusOr<std::vector<Tensor>> ChunkExact(int64_t chunks,
                                                 int64_t dim) const;
  // Pieces of `split_size` (the last may be smaller), or of explicit sizes.
  // Errors: split_size < 1; explicit sizes that do not add up to size(dim).
  absl::StatusOr<std::vector<Tensor>> Split(int64_t split_size,
                                            int64_t dim) const;
  absl::StatusOr<std::vector<Tensor>> Split(absl::Span<const int64_t> sizes,
                                            int64_t dim) const;

  // ---- Copies. ----
  // This tensor if already contiguous, else a contiguous copy. Works on any
  // device; an undefined Tensor if the copy fails (out of memory).
  Tensor Contiguous() const;
  // A contiguous copy with its own storage (undefined if the copy fails).
  Tensor Clone() const;
  // Copies `src` into this tensor's elements, broadcasting `src` to shape()
  // and converting dtypes. Writes through views.
  // Errors: `src` does not broadcast to shape(); either tensor undefined.
  absl::Status CopyFrom(const Tensor& src);
  // A copy converted to `dtype` (this tensor itself when dtype matches).
  absl::StatusOr<Tensor> To(DType dtype) const;
  // A copy on `device` (this tensor itself when already there).
  absl::StatusOr<Tensor> To(Device device) const;

  // ---- In place. ----
  absl::Status Fill(double value);
  absl::Status Zero() { return Fill(0.0); }

  // NumPy-like text, elided with "..." when a dim has more than 6 elements.
  std::string ToString() const;

  // A view of `storage` (no checks beyond bounds); the building block of all
  // views.
  // Errors: null storage, shape and strides of different lengths, a negative
  // size, stride or offset (InvalidArgument); a view reaching past the end of
  // the storage (OutOfRange).
  static absl::StatusOr<Tensor> FromStorage(std::shared_ptr<Storage> storage,
                                            DType dtype, Shape shape,
                                            Strides strides,
                                            int64_t storage_offset);

 private:
  // A view of this tensor's storage with another layout; unchecked, because
  // the views derived from a valid tensor stay inside its storage.
  Tensor MakeView(Shape shape, Strides strides, int64_t storage_offset) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Strides strides_;
  int64_t storage_offset_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// Concatenates along `dim`.
// Errors: no tensors; other dims, dtypes or devices that differ.
absl::StatusOr<Tensor> Cat(absl::Span<const Tensor> tensors, int64_t dim);
// Stacks tensors along a new dim.
// Errors: no tensors; shapes that differ; what Cat reports.
absl::StatusOr<Tensor> Stack(absl::Span<const Tensor> tensors, int64_t dim);

// |a - b| <= atol + rtol * |b| elementwise, shapes equal (no broadcasting);
// NaNs compare equal to NaNs. False when shapes differ or either tensor cannot
// be read (undefined, a failed device copy): a predicate for tests, never
// true without values to compare.
bool AllClose(const Tensor& a, const Tensor& b, double rtol = 1e-5,
              double atol = 1e-8);

// ---- Template definitions. ----

template <typename T>
T* Tensor::data() const {
  DT_DCHECK(!defined() || CppToDType<T>() == dtype_);
  return static_cast<T*>(raw_data());
}

template <typename T>
absl::StatusOr<Tensor> Tensor::FromVector(const std::vector<T>& values,
                                          Shape shape) {
  auto tensor = Empty(std::move(shape), CppToDType<T>());
  if (!tensor.ok()) return tensor.status();
  if (static_cast<int64_t>(values.size()) != tensor->numel()) {
    return absl::InvalidArgumentError(
        "FromVector: " + std::to_string(values.size()) +
        " values do not fill shape " + ShapeToString(tensor->shape()));
  }
  std::copy(values.begin(), values.end(), tensor->template data<T>());
  return tensor;
}

template <typename T>
absl::StatusOr<std::vector<T>> Tensor::ToVector() const {
  if (!defined()) {
    return absl::InvalidArgumentError("ToVector: undefined tensor");
  }
  absl::StatusOr<Tensor> host = To(Device::CPU());
  if (!host.ok()) return host.status();
  absl::StatusOr<Tensor> converted = host->To(CppToDType<T>());
  if (!converted.ok()) return converted.status();
  const Tensor contiguous = converted->Contiguous();
  if (!contiguous.defined()) {
    return absl::ResourceExhaustedError(
        "ToVector: no memory for a contiguous copy");
  }
  const T* begin = contiguous.data<T>();
  return std::vector<T>(begin, begin + contiguous.numel());
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_TENSOR_H_
