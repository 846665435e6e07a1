#include "dtensor/collectives/functional.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/argument_checks.h"

namespace dtensor {
namespace {

// The i64 metadata `values` as a 1-d tensor on the communicator's device.
absl::StatusOr<Tensor> MetadataTensor(const Communicator& comm,
                                      const std::vector<int64_t>& values) {
  DT_ASSIGN_OR_RETURN(
      Tensor host,
      Tensor::FromVector(values, {static_cast<int64_t>(values.size())}));
  return host.To(comm.device());
}

// An uninitialized i64 metadata tensor of `count` values.
absl::StatusOr<Tensor> EmptyMetadata(const Communicator& comm, int64_t count) {
  return Tensor::Empty({count}, DType::kI64, comm.device());
}

// The values of a metadata tensor, `count` of them.
absl::StatusOr<std::vector<int64_t>> MetadataValues(const Tensor& tensor,
                                                    size_t count) {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> values, tensor.ToVector<int64_t>());
  if (values.size() != count) {
    return absl::InternalError(absl::StrCat("could not read ", count,
                                            " metadata values back from ",
                                            tensor.device().ToString()));
  }
  return values;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> AllGatherValues(
    Communicator& comm, const std::vector<int64_t>& values,
    const CollectiveOptions& options) {
  const int64_t count = static_cast<int64_t>(values.size());
  DT_ASSIGN_OR_RETURN(Tensor mine, MetadataTensor(comm, values));
  DT_ASSIGN_OR_RETURN(Tensor all, EmptyMetadata(comm, comm.size() * count));
  DT_RETURN_IF_ERROR(comm.AllGather(mine, all, 0, {}, options));
  return MetadataValues(all, comm.size() * count);
}

absl::StatusOr<std::vector<int64_t>> BroadcastValues(
    Communicator& comm, const std::vector<int64_t>& values, int64_t root,
    const CollectiveOptions& options) {
  DT_ASSIGN_OR_RETURN(Tensor tensor, MetadataTensor(comm, values));
  DT_RETURN_IF_ERROR(comm.Broadcast(tensor, root, options));
  return MetadataValues(tensor, values.size());
}

namespace {

// A dtype sent as metadata, back; an error for a value that names none.
absl::StatusOr<DType> DTypeFromCode(int64_t code, absl::string_view op) {
  if (code < static_cast<int64_t>(DType::kF32) ||
      code > static_cast<int64_t>(DType::kBool)) {
    return absl::InternalError(
        absl::StrCat(op, ": received an invalid dtype code ", code));
  }
  return static_cast<DType>(code);
}

// `dim` of `input` normalized, once `input` is checked to be a tensor on the
// communicator's device.
absl::StatusOr<int64_t> InputDim(const Communicator& comm, const Tensor& input,
                                 int64_t dim, absl::string_view op) {
  DT_RETURN_IF_ERROR(CheckTensor(input, "input", comm.device(), op));
  return NormalizeCollectiveDim(dim, input.dim(), op);
}

// An uninitialized output on the communicator's device: `shape` with `size`
// along `dim`.
absl::StatusOr<Tensor> EmptyOutput(const Communicator& comm, const Shape& shape,
                                   int64_t dim, int64_t size, DType dtype) {
  return Tensor::Empty(WithDimSize(shape, dim, size), dtype, comm.device());
}

}  // namespace

absl::StatusOr<Tensor> AllGather(Communicator& comm, const Tensor& input,
                                 int64_t dim, absl::Span<const int64_t> sizes,
                                 const CollectiveOptions& options) {
  constexpr absl::string_view kOp = "all_gather";
  DT_ASSIGN_OR_RETURN(dim, InputDim(comm, input, dim, kOp));
  std::vector<int64_t> pieces(sizes.begin(), sizes.end());
  if (pieces.empty()) {
    DT_ASSIGN_OR_RETURN(pieces,
                        AllGatherValues(comm, {input.size(dim)}, options));
  } else {
    DT_ASSIGN_OR_RETURN(pieces, CompletePieceSizes(sizes, comm.size(), 0, kOp));
  }
  DT_ASSIGN_OR_RETURN(Tensor output, EmptyOutput(comm, input.shape(), dim,
                                                 SumOf(pieces), input.dtype()));
  DT_RETURN_IF_ERROR(comm.AllGather(input, output, dim, pieces, options));
  return output;
}

absl::StatusOr<Tensor> ReduceScatter(Communicator& comm, const Tensor& input,
                                     int64_t dim, ReduceOp op,
                                     absl::Span<const int64_t> sizes,
                                     const CollectiveOptions& options) {
  constexpr absl::string_view kOp = "reduce_scatter";
  DT_ASSIGN_OR_RETURN(dim, InputDim(comm, input, dim, kOp));
  DT_ASSIGN_OR_RETURN(
      std::vector<int64_t> pieces,
      SplitPieceSizes(sizes, input.size(dim), comm.size(), kOp));
  DT_ASSIGN_OR_RETURN(Tensor output,
                      EmptyOutput(comm, input.shape(), dim, pieces[comm.rank()],
                                  input.dtype()));
  DT_RETURN_IF_ERROR(
      comm.ReduceScatter(input, output, dim, op, pieces, options));
  return output;
}

absl::StatusOr<Tensor> AllToAll(Communicator& comm, const Tensor& input,
                                int64_t split_dim, int64_t concat_dim,
                                absl::Span<const int64_t> split_sizes,
                                const CollectiveOptions& options) {
  constexpr absl::string_view kOp = "all_to_all";
  DT_ASSIGN_OR_RETURN(split_dim, InputDim(comm, input, split_dim, kOp));
  DT_ASSIGN_OR_RETURN(concat_dim,
                      NormalizeCollectiveDim(concat_dim, input.dim(), kOp));
  DT_ASSIGN_OR_RETURN(
      std::vector<int64_t> sends,
      SplitPieceSizes(split_sizes, input.size(split_dim), comm.size(), kOp));
  // Tell each rank the size of its piece along the split and concat dims.
  std::vector<int64_t> header;
  for (int64_t size : sends) {
    header.push_back(size);
    header.push_back(split_dim == concat_dim ? size : input.size(concat_dim));
  }
  DT_ASSIGN_OR_RETURN(Tensor sent_header, MetadataTensor(comm, header));
  DT_ASSIGN_OR_RETURN(Tensor received_header,
                      EmptyMetadata(comm, 2 * comm.size()));
  DT_RETURN_IF_ERROR(
      comm.AllToAll(sent_header, received_header, 0, 0, {}, {}, options));
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> received,
                      MetadataValues(received_header, 2 * comm.size()));
  std::vector<int64_t> receives;
  for (int64_t r = 0; r < comm.size(); ++r)
    receives.push_back(received[2 * r + 1]);
  Shape shape = input.shape();
  // Along the split dim (when it is not the concat dim) the pieces agree;
  // the communicator reports a rank whose piece does not.
  if (split_dim != concat_dim) shape[split_dim] = received[0];
  shape[concat_dim] = SumOf(receives);
  DT_ASSIGN_OR_RETURN(Tensor output,
                      Tensor::Empty(shape, input.dtype(), comm.device()));
  DT_RETURN_IF_ERROR(comm.AllToAll(input, output, split_dim, concat_dim, sends,
                                   receives, options));
  return output;
}

absl::StatusOr<Tensor> Scatter(Communicator& comm, const Tensor& input,
                               int64_t dim, int64_t root,
                               absl::Span<const int64_t> sizes,
                               const CollectiveOptions& options) {
  constexpr absl::string_view kOp = "scatter";
  DT_RETURN_IF_ERROR(CheckGroupRank(root, comm.size(), "root", kOp));
  const bool is_root = comm.rank() == root;
  // The root tells everyone the dtype and rank, then the shape and sizes.
  std::vector<int64_t> head(2, 0);
  std::vector<int64_t> body;
  if (is_root) {
    DT_ASSIGN_OR_RETURN(int64_t root_dim, InputDim(comm, input, dim, kOp));
    DT_ASSIGN_OR_RETURN(
        std::vector<int64_t> pieces,
        SplitPieceSizes(sizes, input.size(root_dim), comm.size(), kOp));
    head = {static_cast<int64_t>(input.dtype()), input.dim()};
    body = input.shape();
    body.insert(body.end(), pieces.begin(), pieces.end());
  }
  DT_ASSIGN_OR_RETURN(head, BroadcastValues(comm, head, root, options));
  DT_ASSIGN_OR_RETURN(DType dtype, DTypeFromCode(head[0], kOp));
  const int64_t ndim = head[1];
  if (!is_root) body.assign(ndim + comm.size(), 0);
  DT_ASSIGN_OR_RETURN(body, BroadcastValues(comm, body, root, options));
  const Shape root_shape(body.begin(), body.begin() + ndim);
  const std::vector<int64_t> pieces(body.begin() + ndim, body.end());
  DT_ASSIGN_OR_RETURN(dim, NormalizeCollectiveDim(dim, ndim, kOp));
  DT_ASSIGN_OR_RETURN(Tensor output, EmptyOutput(comm, root_shape, dim,
                                                 pieces[comm.rank()], dtype));
  DT_RETURN_IF_ERROR(comm.Scatter(input, output, dim, root, pieces, options));
  return output;
}

absl::StatusOr<Tensor> Gather(Communicator& comm, const Tensor& input,
                              int64_t dim, int64_t root,
                              const CollectiveOptions& options) {
  constexpr absl::string_view kOp = "gather";
  DT_RETURN_IF_ERROR(CheckGroupRank(root, comm.size(), "root", kOp));
  DT_ASSIGN_OR_RETURN(dim, InputDim(comm, input, dim, kOp));
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                      AllGatherValues(comm, {input.size(dim)}, options));
  Tensor output;
  if (comm.rank() == root) {
    DT_ASSIGN_OR_RETURN(output, EmptyOutput(comm, input.shape(), dim,
                                            SumOf(sizes), input.dtype()));
  }
  DT_RETURN_IF_ERROR(comm.Gather(input, output, dim, root, sizes, options));
  return output;
}

absl::StatusOr<Tensor> Permute(Communicator& comm, const Tensor& input,
                               absl::Span<const PermutePair> pairs,
                               const CollectiveOptions& options) {
  constexpr absl::string_view kOp = "permute";
  bool sends = false;
  bool receives = false;
  for (const PermutePair& pair : pairs) {
    sends |= pair.src == comm.rank();
    receives |= pair.dst == comm.rank();
  }
  if (sends) {
    DT_RETURN_IF_ERROR(CheckTensor(input, "input", comm.device(), kOp));
  }
  // Senders tell their receivers the dtype and rank, then the shape.
  Tensor head_in;
  Tensor head_out;
  if (sends) {
    DT_ASSIGN_OR_RETURN(
        head_in, MetadataTensor(
                     comm, {static_cast<int64_t>(input.dtype()), input.dim()}));
  }
  if (receives) {
    DT_ASSIGN_OR_RETURN(head_out, EmptyMetadata(comm, 2));
  }
  DT_RETURN_IF_ERROR(comm.Permute(head_in, head_out, pairs, options));
  Tensor shape_in;
  Tensor shape_out;
  std::vector<int64_t> head;
  if (sends) {
    DT_ASSIGN_OR_RETURN(shape_in, MetadataTensor(comm, input.shape()));
  }
  if (receives) {
    DT_ASSIGN_OR_RETURN(head, MetadataValues(head_out, 2));
    DT_ASSIGN_OR_RETURN(shape_out, EmptyMetadata(comm, head[1]));
  }
  DT_RETURN_IF_ERROR(comm.Permute(shape_in, shape_out, pairs, options));
  Tensor output;
  if (receives) {
    DT_ASSIGN_OR_RETURN(DType dtype, DTypeFromCode(head[0], kOp));
    DT_ASSIGN_OR_RETURN(Shape shape, MetadataValues(shape_out, head[1]));
    DT_ASSIGN_OR_RETURN(output,
                        Tensor::Empty(std::move(shape), dtype, comm.device()));
  }
  DT_RETURN_IF_ERROR(comm.Permute(input, output, pairs, options));
  return output;
}

absl::Status AllReduceAnywhere(Communicator& comm, const Tensor& tensor,
                               ReduceOp op) {
  if (comm.device() == tensor.device()) return comm.AllReduce(tensor, op);
  DT_ASSIGN_OR_RETURN(Tensor staged, tensor.To(comm.device()));
  DT_RETURN_IF_ERROR(comm.AllReduce(staged, op));
  Tensor target = tensor;
  return target.CopyFrom(staged);
}

}  // namespace dtensor
