// MergeAttentionBlock (attention.h): the log-sum-exp merge of two attentions
// of the same queries over disjoint keys, with elementwise ops so that it runs
// wherever the tensors live.
#include <string>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"

namespace dtensor {
namespace {

// A finite stand-in for the -inf lse of a row that sees no key, so that the
// weights below never compute inf - inf: exp(kNoKeys - m) is 0 beside any
// real score, and two rows that see no key get weights 1 on outputs of 0.
constexpr double kNoKeys = -1e30;

absl::Status CheckMergeable(const AttentionWithLse& acc,
                            const AttentionWithLse& block) {
  if (acc.out.shape() != block.out.shape() ||
      acc.lse.shape() != block.lse.shape() ||
      acc.lse.dtype() != block.lse.dtype() ||
      acc.out.device() != block.out.device()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MergeAttentionBlock: the accumulated attention (out ",
                     ShapeToString(acc.out.shape()), ", lse ",
                     std::string(DTypeName(acc.lse.dtype())), " ",
                     ShapeToString(acc.lse.shape()), ") and the block (out ",
                     ShapeToString(block.out.shape()), ", lse ",
                     std::string(DTypeName(block.lse.dtype())), " ",
                     ShapeToString(block.lse.shape()), ") differ"));
  }
  return absl::OkStatus();
}

// `weight` [..., Lq] as a factor of out [..., Lq, Ev] in `dtype`.
absl::StatusOr<Tensor> RowFactor(const Tensor& weight, DType dtype) {
  DT_ASSIGN_OR_RETURN(const Tensor column, weight.Unsqueeze(-1));
  return column.To(dtype);
}

}  // namespace

absl::Status MergeAttentionBlock(AttentionWithLse& acc,
                                 const AttentionWithLse& block) {
  if (!acc.out.defined()) {
    acc = block;
    return absl::OkStatus();
  }
  DT_RETURN_IF_ERROR(CheckMergeable(acc, block));
  DT_ASSIGN_OR_RETURN(
      const Tensor floor,
      Tensor::Full({}, kNoKeys, acc.lse.dtype(), acc.lse.device()));
  DT_ASSIGN_OR_RETURN(const Tensor a, Maximum(acc.lse, floor));
  DT_ASSIGN_OR_RETURN(const Tensor b, Maximum(block.lse, floor));
  DT_ASSIGN_OR_RETURN(const Tensor m, Maximum(a, b));
  DT_ASSIGN_OR_RETURN(const Tensor a_shift, Sub(a, m));
  DT_ASSIGN_OR_RETURN(const Tensor b_shift, Sub(b, m));
  DT_ASSIGN_OR_RETURN(const Tensor wa, Exp(a_shift));
  DT_ASSIGN_OR_RETURN(const Tensor wb, Exp(b_shift));
  DT_ASSIGN_OR_RETURN(const Tensor total, Add(wa, wb));
  // out = (wa out_a + wb out_b) / (wa + wb), lse = m + log(wa + wb).
  const DType out_dtype = acc.out.dtype();
  DT_ASSIGN_OR_RETURN(const Tensor fa, Div(wa, total));
  DT_ASSIGN_OR_RETURN(const Tensor fb, Div(wb, total));
  DT_ASSIGN_OR_RETURN(const Tensor fa_rows, RowFactor(fa, out_dtype));
  DT_ASSIGN_OR_RETURN(const Tensor fb_rows, RowFactor(fb, out_dtype));
  DT_ASSIGN_OR_RETURN(const Tensor block_out, block.out.To(out_dtype));
  DT_ASSIGN_OR_RETURN(const Tensor out_a, Mul(acc.out, fa_rows));
  DT_ASSIGN_OR_RETURN(const Tensor out_b, Mul(block_out, fb_rows));
  DT_ASSIGN_OR_RETURN(Tensor out, Add(out_a, out_b));
  DT_ASSIGN_OR_RETURN(const Tensor log_total, Log(total));
  DT_ASSIGN_OR_RETURN(const Tensor lse, Add(m, log_total));
  // Rows that saw no key in either keep lse -inf.
  DT_ASSIGN_OR_RETURN(const Tensor none, Le(m, kNoKeys));
  DT_ASSIGN_OR_RETURN(Tensor merged_lse, Where(none, acc.lse, lse));
  acc.out = std::move(out);
  acc.lse = std::move(merged_lse);
  return absl::OkStatus();
}

}  // namespace dtensor
