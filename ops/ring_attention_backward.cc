// RingAttentionBackward (ring_attention.h): the key/value blocks go around
// the ring with their gradients, each rank adding its queries' share; after
// cp steps every block's gradients are back with its owner, complete.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/ops/ring_attention.h"
#include "dtensor/ops/ring_attention_internal.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace ops {
namespace {

using internal::BlockShape;
using internal::Ring;
using internal::RingOf;
using internal::Rows;
using internal::StartTransfer;

// What the backward reads of this rank's queries: q, out, grad_out, lse.
struct QueryRows {
  Tensor q;
  Tensor out;
  Tensor grad_out;
  Tensor lse;
};

// Adds `grad` into rows [begin, begin + grad rows) of `acc` (in place).
absl::Status AddRows(const Ring& ring, Tensor& acc, int64_t begin,
                     const Tensor& grad) {
  DT_ASSIGN_OR_RETURN(Tensor view,
                      Rows(ring, acc, begin, begin + grad.size(ring.seq)));
  DT_ASSIGN_OR_RETURN(const Tensor converted, grad.To(acc.dtype()));
  DT_ASSIGN_OR_RETURN(const Tensor sum, Add(view, converted));
  return view.CopyFrom(sum);
}

// Adds this rank's share of the gradients of the block of member `holder`
// (keys, values) into dq and the block's dk, dv.
absl::Status DifferentiateBlock(const Ring& ring, const QueryRows& in,
                                const Tensor& keys, const Tensor& values,
                                int64_t holder, Tensor& dq, Tensor& dk,
                                Tensor& dv) {
  for (const SequenceSegment& qs : ring.QuerySegments()) {
    for (const SequenceSegment& ks : ring.KeySegments(holder)) {
      for (const BlockCall& call :
           BlockCalls(qs, ks, ring.lk - ring.lq, ring.options.causal)) {
        const int64_t first = qs.local + call.row_begin;
        const int64_t end = qs.local + call.row_end;
        QueryRows rows;
        for (auto [from, to] : {std::pair{&in.q, &rows.q},
                                {&in.out, &rows.out},
                                {&in.grad_out, &rows.grad_out},
                                {&in.lse, &rows.lse}}) {
          DT_ASSIGN_OR_RETURN(*to, Rows(ring, *from, first, end));
        }
        DT_ASSIGN_OR_RETURN(const Tensor kb,
                            Rows(ring, keys, ks.local, ks.local + call.keys));
        DT_ASSIGN_OR_RETURN(const Tensor vb,
                            Rows(ring, values, ks.local, ks.local + call.keys));
        DT_ASSIGN_OR_RETURN(const AttentionGrads grads,
                            ScaledDotProductAttentionBackwardWithLse(
                                rows.q, kb, vb, rows.out, rows.grad_out,
                                rows.lse, call.causal, ring.scale));
        DT_RETURN_IF_ERROR(AddRows(ring, dq, first, grads.dq));
        DT_RETURN_IF_ERROR(AddRows(ring, dk, ks.local, grads.dk));
        DT_RETURN_IF_ERROR(AddRows(ring, dv, ks.local, grads.dv));
      }
    }
  }
  return absl::OkStatus();
}

// out, grad_out and lse are those of the forward of q, k, v.
absl::Status CheckForwardTensors(const DTensor& q, const DTensor& k,
                                 const DTensor& v, const DTensor& out,
                                 const Tensor& lse, const DTensor& grad_out) {
  DT_ASSIGN_OR_RETURN(const Shape expected,
                      AttentionOutputShape(q.shape(), k.shape(), v.shape(),
                                           "RingAttentionBackward"));
  const Shape& local_out = out.ToLocal().shape();
  const Shape local_lse(local_out.begin(), local_out.end() - 1);
  if (out.shape() != expected || grad_out.shape() != expected ||
      grad_out.ToLocal().shape() != local_out || lse.shape() != local_lse) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RingAttentionBackward: out ", ShapeToString(out.shape()),
        ", grad_out ", ShapeToString(grad_out.shape()), " and local lse ",
        ShapeToString(lse.shape()), " do not match the forward's out ",
        ShapeToString(expected), " (local lse ", ShapeToString(local_lse),
        ")"));
  }
  return absl::OkStatus();
}

// The backward under a metadata-only runtime: the gradients' specs and the
// ring's transfers counted.
absl::StatusOr<std::vector<DTensor>> MetadataOnly(const Ring& ring,
                                                  const DTensor& q,
                                                  const DTensor& k,
                                                  const DTensor& v) {
  DT_ASSIGN_OR_RETURN(const Shape k_local, internal::LocalShape(k));
  DT_ASSIGN_OR_RETURN(const Shape v_local, internal::LocalShape(v));
  const DType acc_dtype = AttentionLseDType(q.dtype());
  for (int64_t step = 0; step < ring.cp && ring.cp > 1; ++step) {
    const int64_t next = ring.HolderAt(step + 1);
    if (step + 1 < ring.cp) {
      internal::CountTransfer(ring, BlockShape(ring, k_local, next), k.dtype(),
                              "keys");
      internal::CountTransfer(ring, BlockShape(ring, v_local, next), v.dtype(),
                              "values");
    }
    internal::CountTransfer(ring, BlockShape(ring, k_local, next), acc_dtype,
                            "key gradients");
    internal::CountTransfer(ring, BlockShape(ring, v_local, next), acc_dtype,
                            "value gradients");
  }
  std::vector<DTensor> grads;
  for (const DTensor* input : {&q, &k, &v}) {
    DT_ASSIGN_OR_RETURN(DTensor grad,
                        DTensor::FromSpec(input->runtime(), input->spec()));
    grads.push_back(std::move(grad));
  }
  return grads;
}

}  // namespace

absl::StatusOr<std::vector<DTensor>> RingAttentionBackward(
    const DTensor& q, const DTensor& k, const DTensor& v, const DTensor& out,
    const Tensor& lse, const DTensor& grad_out,
    const RingAttentionOptions& options) {
  DT_ASSIGN_OR_RETURN(const Ring ring, RingOf(q, k, v, options));
  if (q.runtime()->metadata_only()) return MetadataOnly(ring, q, k, v);
  DT_RETURN_IF_ERROR(CheckForwardTensors(q, k, v, out, lse, grad_out));
  const QueryRows in{q.ToLocal(), out.ToLocal(), grad_out.ToLocal(), lse};
  const DType acc_dtype = AttentionLseDType(q.dtype());
  Tensor keys = k.ToLocal();
  Tensor values = v.ToLocal();
  DT_ASSIGN_OR_RETURN(Tensor dq,
                      Tensor::Zeros(in.q.shape(), acc_dtype, in.q.device()));
  DT_ASSIGN_OR_RETURN(Tensor dk,
                      Tensor::Zeros(keys.shape(), acc_dtype, keys.device()));
  DT_ASSIGN_OR_RETURN(Tensor dv,
                      Tensor::Zeros(values.shape(), acc_dtype, keys.device()));
  for (int64_t step = 0; step < ring.cp; ++step) {
    const int64_t next = ring.HolderAt(step + 1);
    DT_ASSIGN_OR_RETURN(internal::KeyValueTransfer next_blocks,
                        internal::PassKeysAndValues(ring, step, keys, values));
    DT_RETURN_IF_ERROR(DifferentiateBlock(ring, in, keys, values,
                                          ring.HolderAt(step), dq, dk, dv));
    if (ring.cp == 1) break;
    // The block's gradients go on with it; the last step brings each home.
    internal::KeyValueTransfer next_grads;
    DT_ASSIGN_OR_RETURN(
        next_grads.keys,
        StartTransfer(ring, dk, BlockShape(ring, dk.shape(), next),
                      "key gradients"));
    DT_ASSIGN_OR_RETURN(
        next_grads.values,
        StartTransfer(ring, dv, BlockShape(ring, dv.shape(), next),
                      "value gradients"));
    // Every transfer finishes before the first error returns.
    absl::Status status = internal::Receive(next_blocks, keys, values);
    status.Update(internal::Receive(next_grads, dk, dv));
    DT_RETURN_IF_ERROR(status);
  }
  std::vector<DTensor> grads;
  const DTensor* inputs[] = {&q, &k, &v};
  Tensor* locals[] = {&dq, &dk, &dv};
  for (int i = 0; i < 3; ++i) {
    DT_ASSIGN_OR_RETURN(Tensor local, locals[i]->To(inputs[i]->dtype()));
    grads.push_back(DTensor::WrapUnchecked(
        inputs[i]->runtime(), inputs[i]->spec_ptr(), std::move(local)));
  }
  return grads;
}

}  // namespace ops
}  // namespace dtensor
