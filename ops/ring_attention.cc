#include "dtensor/ops/ring_attention.h"

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/ring_attention_internal.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace ops {
namespace {

using internal::Ring;

constexpr char kOp[] = "RingAttention";

// `t` is Shard(seq) on the cp dim, and Replicate or a sharded batch dim on
// the others.
absl::Status CheckPlacements(const DTensor& t, const char* name,
                             const Ring& ring) {
  const std::vector<Placement> placements = t.placements();
  for (int64_t m = 0; m < static_cast<int64_t>(placements.size()); ++m) {
    const Placement& p = placements[m];
    const bool ok =
        m == ring.options.mesh_dim
            ? p.is_shard() && p.dim() == ring.seq
            : p.is_replicate() || (p.is_shard() && p.dim() < ring.seq);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": ", name, " is ", t.spec().ToString(), "; it needs Shard(",
          ring.seq, ") (the sequence) on the cp mesh dim ",
          ring.options.mesh_dim,
          " and Replicate or a sharded batch dim on the others"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

absl::StatusOr<Ring> RingOf(const DTensor& q, const DTensor& k,
                            const DTensor& v,
                            const RingAttentionOptions& options) {
  const DeviceMesh& mesh = q.mesh();
  if (k.mesh() != mesh || v.mesh() != mesh) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": q, k and v are on different meshes"));
  }
  if (options.mesh_dim < 0 || options.mesh_dim >= mesh.ndim()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": cp mesh dim ", options.mesh_dim,
                     " is not a dim of a ", mesh.ndim(), "-D mesh"));
  }
  const int64_t ndim = static_cast<int64_t>(q.shape().size());
  if (ndim < 2 || static_cast<int64_t>(k.shape().size()) != ndim ||
      static_cast<int64_t>(v.shape().size()) != ndim) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": q, k and v need the same number (>= 2) of dims, got ",
        ShapeToString(q.shape()), ", ", ShapeToString(k.shape()), ", ",
        ShapeToString(v.shape())));
  }
  Ring ring;
  ring.options = options;
  ring.seq = ndim - 2;
  DT_RETURN_IF_ERROR(CheckPlacements(q, "q", ring));
  DT_RETURN_IF_ERROR(CheckPlacements(k, "k", ring));
  DT_RETURN_IF_ERROR(CheckPlacements(v, "v", ring));
  if (k.placements() != q.placements() || v.placements() != q.placements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": q, k and v need the same placements, got ", q.spec().ToString(),
        ", ", k.spec().ToString(), ", ", v.spec().ToString()));
  }
  ring.mesh_shape = mesh.shape();
  ring.cp = ring.mesh_shape[options.mesh_dim];
  DT_ASSIGN_OR_RETURN(const std::vector<int64_t> coord,
                      mesh.CoordinateOf(q.runtime()->rank()));
  ring.member = coord[options.mesh_dim];
  ring.lq = q.shape()[ring.seq];
  ring.lk = k.shape()[ring.seq];
  for (const int64_t length : {ring.lq, ring.lk}) {
    DT_RETURN_IF_ERROR(
        SequencePositions(length, ring.cp, options.order).status());
  }
  ring.scale = AttentionScale(options.scale, q.shape().back());
  if (!q.runtime()->metadata_only()) {
    DT_ASSIGN_OR_RETURN(ring.comm, q.runtime()->groups()->ForMeshDims(
                                       mesh, {options.mesh_dim}));
  }
  for (int64_t i = 0; i < ring.cp; ++i) {
    ring.next.push_back({i, (i + 1) % ring.cp});
  }
  ring.cost_model = q.runtime()->CostModelFor(mesh);
  return ring;
}

void CountTransfer(const Ring& ring, const Shape& shape, DType dtype,
                   const char* what) {
  CommCounter::RecordOnThread(CommCounter::Estimated(
      *ring.cost_model, CommKind::kPermute, {ring.options.mesh_dim},
      ring.mesh_shape,
      static_cast<double>(NumElements(shape) * ElementSize(dtype)),
      absl::StrCat("ring attention ", what)));
}

absl::StatusOr<Transfer> StartTransfer(const Ring& ring, const Tensor& send,
                                       Shape shape, const char* what) {
  CountTransfer(ring, shape, send.dtype(), what);
  Transfer t;
  DT_ASSIGN_OR_RETURN(
      t.received, Tensor::Empty(std::move(shape), send.dtype(), send.device()));
  t.work = ring.comm->PermuteAsync(send, t.received, ring.next);
  return t;
}

absl::StatusOr<KeyValueTransfer> PassKeysAndValues(const Ring& ring,
                                                   int64_t step,
                                                   const Tensor& keys,
                                                   const Tensor& values) {
  KeyValueTransfer t;
  if (step + 1 >= ring.cp) return t;
  const int64_t next = ring.HolderAt(step + 1);
  DT_ASSIGN_OR_RETURN(
      t.keys,
      StartTransfer(ring, keys, BlockShape(ring, keys.shape(), next), "keys"));
  DT_ASSIGN_OR_RETURN(
      t.values,
      StartTransfer(ring, values, BlockShape(ring, values.shape(), next),
                    "values"));
  return t;
}

absl::Status Receive(KeyValueTransfer& t, Tensor& keys, Tensor& values) {
  if (t.keys.work == nullptr) return absl::OkStatus();
  // Both finish before either error returns.
  absl::Status status = t.keys.work->Wait();
  status.Update(t.values.work->Wait());
  DT_RETURN_IF_ERROR(status);
  keys = std::move(t.keys.received);
  values = std::move(t.values.received);
  return absl::OkStatus();
}

absl::StatusOr<Shape> LocalShape(const DTensor& t) {
  if (t.ToLocal().defined()) return t.ToLocal().shape();
  DT_ASSIGN_OR_RETURN(const ShardBlock block, t.LocalBlock());
  return block.shape;
}

Shape BlockShape(const Ring& ring, const Shape& local, int64_t holder) {
  Shape shape = local;
  shape[ring.seq] = 0;
  for (const SequenceSegment& s : ring.KeySegments(holder)) {
    shape[ring.seq] += s.length;
  }
  return shape;
}

absl::StatusOr<Tensor> Rows(const Ring& ring, const Tensor& t, int64_t begin,
                            int64_t end) {
  return t.Slice(ring.seq, begin, end);
}

}  // namespace internal

namespace {

using internal::BlockShape;
using internal::Ring;
using internal::RingOf;
using internal::Rows;
using internal::StartTransfer;
using internal::Transfer;

// `t` with `before` and `after` rows of `value` added around its dim `dim`.
absl::StatusOr<Tensor> PadRows(const Tensor& t, int64_t dim, int64_t before,
                               int64_t after, double value) {
  std::vector<Tensor> parts;
  for (const int64_t rows : {before, int64_t{-1}, after}) {
    if (rows == -1) {
      parts.push_back(t);
      continue;
    }
    if (rows == 0) continue;
    Shape shape = t.shape();
    shape[dim < 0 ? shape.size() + dim : dim] = rows;
    DT_ASSIGN_OR_RETURN(Tensor fill,
                        Tensor::Full(shape, value, t.dtype(), t.device()));
    parts.push_back(std::move(fill));
  }
  if (parts.size() == 1) return t;
  return Cat(parts, dim);
}

// Folds into acc[i] the attention of query segment i over the block of
// member `holder` (keys, values).
absl::Status AttendBlock(const Ring& ring, const Tensor& q, const Tensor& keys,
                         const Tensor& values, int64_t holder,
                         const std::vector<SequenceSegment>& q_segments,
                         std::vector<AttentionWithLse>& acc) {
  const DType acc_dtype = AttentionLseDType(q.dtype());
  const double no_key = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < q_segments.size(); ++i) {
    const SequenceSegment& qs = q_segments[i];
    for (const SequenceSegment& ks : ring.KeySegments(holder)) {
      for (const BlockCall& call :
           BlockCalls(qs, ks, ring.lk - ring.lq, ring.options.causal)) {
        DT_ASSIGN_OR_RETURN(
            const Tensor qb,
            Rows(ring, q, qs.local + call.row_begin, qs.local + call.row_end));
        DT_ASSIGN_OR_RETURN(const Tensor kb,
                            Rows(ring, keys, ks.local, ks.local + call.keys));
        DT_ASSIGN_OR_RETURN(const Tensor vb,
                            Rows(ring, values, ks.local, ks.local + call.keys));
        DT_ASSIGN_OR_RETURN(AttentionWithLse part,
                            ScaledDotProductAttentionWithLse(
                                qb, kb, vb, call.causal, ring.scale));
        const int64_t after = qs.length - call.row_end;
        DT_ASSIGN_OR_RETURN(part.out, part.out.To(acc_dtype));
        DT_ASSIGN_OR_RETURN(
            part.out, PadRows(part.out, ring.seq, call.row_begin, after, 0.0));
        DT_ASSIGN_OR_RETURN(part.lse, PadRows(part.lse, ring.seq,
                                              call.row_begin, after, no_key));
        DT_RETURN_IF_ERROR(MergeAttentionBlock(acc[i], part));
      }
    }
  }
  return absl::OkStatus();
}

// This rank's out and lse from the merged segments; a segment no key reached
// gets zeros and -inf.
absl::StatusOr<AttentionWithLse> Concatenated(
    const Ring& ring, const Tensor& q, const Shape& local_out,
    const std::vector<SequenceSegment>& q_segments,
    std::vector<AttentionWithLse>& acc) {
  const DType acc_dtype = AttentionLseDType(q.dtype());
  std::vector<Tensor> outs, lses;
  for (size_t i = 0; i < q_segments.size(); ++i) {
    if (!acc[i].out.defined()) {
      Shape out_shape = local_out;
      out_shape[ring.seq] = q_segments[i].length;
      Shape lse_shape(out_shape.begin(), out_shape.end() - 1);
      DT_ASSIGN_OR_RETURN(acc[i].out,
                          Tensor::Zeros(out_shape, acc_dtype, q.device()));
      DT_ASSIGN_OR_RETURN(
          acc[i].lse,
          Tensor::Full(lse_shape, -std::numeric_limits<double>::infinity(),
                       acc_dtype, q.device()));
    }
    outs.push_back(acc[i].out);
    lses.push_back(acc[i].lse);
  }
  AttentionWithLse result;
  DT_ASSIGN_OR_RETURN(const Tensor out, Cat(outs, ring.seq));
  DT_ASSIGN_OR_RETURN(result.out, out.To(q.dtype()));
  DT_ASSIGN_OR_RETURN(result.lse, Cat(lses, ring.seq));
  return result;
}

// RingAttention under a metadata-only runtime: the output's spec and the
// ring's transfers counted.
absl::StatusOr<RingAttentionResult> MetadataOnly(const Ring& ring,
                                                 const DTensor& q,
                                                 const DTensor& k,
                                                 const DTensor& v,
                                                 const Shape& out_shape) {
  DT_ASSIGN_OR_RETURN(const Shape k_local, internal::LocalShape(k));
  DT_ASSIGN_OR_RETURN(const Shape v_local, internal::LocalShape(v));
  for (int64_t step = 0; step + 1 < ring.cp; ++step) {
    const int64_t next = ring.HolderAt(step + 1);
    internal::CountTransfer(ring, BlockShape(ring, k_local, next), k.dtype(),
                            "keys");
    internal::CountTransfer(ring, BlockShape(ring, v_local, next), v.dtype(),
                            "values");
  }
  DT_ASSIGN_OR_RETURN(
      DTensorSpec spec,
      DTensorSpec::Create(q.mesh(), q.placements(), out_shape, q.dtype()));
  RingAttentionResult result;
  DT_ASSIGN_OR_RETURN(result.out, DTensor::FromSpec(q.runtime(), spec));
  return result;
}

}  // namespace

absl::StatusOr<RingAttentionResult> RingAttention(
    const DTensor& q, const DTensor& k, const DTensor& v,
    const RingAttentionOptions& options) {
  DT_ASSIGN_OR_RETURN(const Ring ring, RingOf(q, k, v, options));
  DT_ASSIGN_OR_RETURN(
      const Shape out_shape,
      AttentionOutputShape(q.shape(), k.shape(), v.shape(), kOp));
  if (q.runtime()->metadata_only()) {
    return MetadataOnly(ring, q, k, v, out_shape);
  }
  const Tensor& local_q = q.ToLocal();
  Tensor keys = k.ToLocal();
  Tensor values = v.ToLocal();
  DT_ASSIGN_OR_RETURN(
      const Shape local_out,
      AttentionOutputShape(local_q.shape(), keys.shape(), values.shape(), kOp));
  const std::vector<SequenceSegment> q_segments = ring.QuerySegments();
  std::vector<AttentionWithLse> acc(q_segments.size());
  for (int64_t step = 0; step < ring.cp; ++step) {
    DT_ASSIGN_OR_RETURN(internal::KeyValueTransfer next,
                        internal::PassKeysAndValues(ring, step, keys, values));
    DT_RETURN_IF_ERROR(AttendBlock(ring, local_q, keys, values,
                                   ring.HolderAt(step), q_segments, acc));
    DT_RETURN_IF_ERROR(internal::Receive(next, keys, values));
  }
  DT_ASSIGN_OR_RETURN(AttentionWithLse local,
                      Concatenated(ring, local_q, local_out, q_segments, acc));
  FromLocalOptions from_local;
  from_local.global_shape = out_shape;
  RingAttentionResult result;
  DT_ASSIGN_OR_RETURN(result.out,
                      DTensor::FromLocal(q.runtime(), std::move(local.out),
                                         q.mesh(), q.placements(), from_local));
  result.lse = std::move(local.lse);
  return result;
}

}  // namespace ops
}  // namespace dtensor
