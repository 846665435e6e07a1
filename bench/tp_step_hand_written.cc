#include "bench/tp_step_hand_written.h"

#include <cmath>
#include <utility>

#include "bench/tp_step_model.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/optim.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/reduction.h"

namespace dtensor::bench {
namespace {

// The backward definitions of the ops the step uses, on local tensors.

// linear: dx = g W; dW = g_rows^T x_rows.
struct LinearGrads {
  Tensor dx;
  Tensor dw;
};
absl::StatusOr<LinearGrads> LinearBackward(const Tensor& x, const Tensor& w,
                                           const Tensor& g) {
  LinearGrads grads;
  DT_ASSIGN_OR_RETURN(grads.dx, Matmul(g, w));
  DT_ASSIGN_OR_RETURN(Tensor g_rows, g.Flatten(0, g.dim() - 2));
  DT_ASSIGN_OR_RETURN(Tensor x_rows, x.Flatten(0, x.dim() - 2));
  DT_ASSIGN_OR_RETURN(Tensor g_cols, g_rows.Transpose(0, 1));
  DT_ASSIGN_OR_RETURN(grads.dw, Matmul(g_cols, x_rows));
  return grads;
}

// Mean cross entropy: (softmax(logits) - onehot(target)) / count.
absl::StatusOr<Tensor> CrossEntropyBackward(const Tensor& logits,
                                            const Tensor& targets,
                                            const Tensor& classes) {
  const int64_t last[] = {-1};
  DT_ASSIGN_OR_RETURN(Tensor max, Max(logits, last, /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(Tensor shifted, Sub(logits, max));
  DT_ASSIGN_OR_RETURN(Tensor e, Exp(shifted));
  DT_ASSIGN_OR_RETURN(Tensor total, Sum(e, last, /*keepdim=*/true));
  DT_ASSIGN_OR_RETURN(Tensor p, Div(e, total));
  DT_ASSIGN_OR_RETURN(Tensor column, targets.Unsqueeze(-1));
  DT_ASSIGN_OR_RETURN(Tensor onehot, Eq(column, classes));
  DT_ASSIGN_OR_RETURN(onehot, onehot.To(DType::kF32));
  DT_ASSIGN_OR_RETURN(Tensor dlogits, Sub(p, onehot));
  DT_ASSIGN_OR_RETURN(Tensor counted, Ne(targets, -100.0));
  DT_ASSIGN_OR_RETURN(counted, counted.To(DType::kF32));
  DT_ASSIGN_OR_RETURN(Tensor count, Sum(counted));
  DT_ASSIGN_OR_RETURN(Tensor weight, Div(counted, count));
  DT_ASSIGN_OR_RETURN(weight, weight.Unsqueeze(-1));
  return Mul(dlogits, weight);
}

// AdamW on one local shard, the arithmetic of nn::AdamW::Update.
absl::Status AdamWUpdate(const Tensor& p, const Tensor& grad,
                         AdamWState& state) {
  const nn::AdamWOptions options;
  if (!state.m.defined()) {
    DT_ASSIGN_OR_RETURN(state.m, Tensor::Zeros(p.shape(), p.dtype()));
    DT_ASSIGN_OR_RETURN(state.v, Tensor::Zeros(p.shape(), p.dtype()));
  }
  const double t = static_cast<double>(++state.steps);
  const double lr = kLearningRate;
  const double b1 = options.beta1, b2 = options.beta2;
  DT_ASSIGN_OR_RETURN(Tensor m_kept, Mul(state.m, b1));
  DT_ASSIGN_OR_RETURN(Tensor m_added, Mul(grad, 1 - b1));
  DT_ASSIGN_OR_RETURN(Tensor m_next, Add(m_kept, m_added));
  DT_RETURN_IF_ERROR(nn::Assign(state.m, m_next));
  DT_ASSIGN_OR_RETURN(Tensor v_kept, Mul(state.v, b2));
  DT_ASSIGN_OR_RETURN(Tensor g2, Mul(grad, grad));
  DT_ASSIGN_OR_RETURN(Tensor v_added, Mul(g2, 1 - b2));
  DT_ASSIGN_OR_RETURN(Tensor v_next, Add(v_kept, v_added));
  DT_RETURN_IF_ERROR(nn::Assign(state.v, v_next));
  DT_ASSIGN_OR_RETURN(Tensor denom, Sqrt(state.v));
  DT_ASSIGN_OR_RETURN(denom, Div(denom, std::sqrt(1 - std::pow(b2, t))));
  DT_ASSIGN_OR_RETURN(denom, Add(denom, options.eps));
  DT_ASSIGN_OR_RETURN(Tensor step, Div(state.m, denom));
  DT_ASSIGN_OR_RETURN(step, Mul(step, lr / (1 - std::pow(b1, t))));
  DT_ASSIGN_OR_RETURN(Tensor decayed, Mul(p, 1 - lr * options.weight_decay));
  DT_ASSIGN_OR_RETURN(Tensor updated, Sub(decayed, step));
  return nn::Assign(p, updated);
}

// NamedParameters order: tok_embeddings, the blocks, norm, output.
constexpr int64_t kEmbeddingParam = 0;
int64_t BlockParamIndex(int64_t layer, BlockParam p) {
  return 1 + layer * kBlockParams + p;
}
int64_t NormParamIndex() { return 1 + ModelConfig().n_layers * kBlockParams; }
int64_t OutputParamIndex() { return NormParamIndex() + 1; }

}  // namespace

absl::StatusOr<std::unique_ptr<HandWrittenTrainer>> HandWrittenTrainer::Create(
    ProcessGroups& groups, const std::vector<Tensor>& params) {
  DT_ASSIGN_OR_RETURN(DeviceMesh mesh, TpMesh());
  const int64_t tp_dim[] = {0};
  DT_ASSIGN_OR_RETURN(std::shared_ptr<Communicator> comm,
                      groups.ForMeshDims(mesh, tp_dim));
  std::unique_ptr<HandWrittenTrainer> trainer(
      new HandWrittenTrainer(groups.rank(), std::move(comm)));
  for (const Tensor& p : params) trainer->params_.push_back(p.Clone());
  trainer->adamw_.resize(params.size());
  DT_ASSIGN_OR_RETURN(Batch batch, MakeBatch());
  trainer->tokens_ = batch.tokens;
  trainer->targets_ = batch.targets;
  DT_ASSIGN_OR_RETURN(
      trainer->classes_,
      Tensor::Arange(0, static_cast<double>(ModelConfig().vocab_size), 1,
                     DType::kI64));
  DT_ASSIGN_OR_RETURN(
      trainer->reversed_positions_,
      Tensor::Arange(0, -static_cast<double>(kSeq), -1, DType::kI64));
  return trainer;
}

absl::Status HandWrittenTrainer::Step() {
  const nn::LlamaConfig config = ModelConfig();
  const int64_t layers = config.n_layers;
  std::vector<BlockActivations> saved(layers);
  // Forward.
  DT_ASSIGN_OR_RETURN(Tensor x, Embedding(tokens_, params_[kEmbeddingParam]));
  for (int64_t l = 0; l < layers; ++l) {
    DT_ASSIGN_OR_RETURN(x, BlockForward(l, x, saved[l]));
  }
  const Tensor& norm_weight = params_[NormParamIndex()];
  const Tensor& output_weight = params_[OutputParamIndex()];
  DT_ASSIGN_OR_RETURN(Tensor normed, RmsNorm(x, norm_weight, config.norm_eps));
  DT_ASSIGN_OR_RETURN(Tensor logits, Linear(normed, output_weight, Tensor()));
  DT_ASSIGN_OR_RETURN(Tensor logit_rows,
                      logits.Reshape({kBatch * kSeq, config.vocab_size}));
  DT_ASSIGN_OR_RETURN(loss_, CrossEntropy(logit_rows, targets_));

  // Backward. The residual stream's gradient is complete (replicated)
  // above the last block and partial (summed over ranks) below it, where
  // each block adds its norm's partial input gradient, as in the DTensor
  // step.
  std::vector<Tensor> grads(params_.size());
  DT_ASSIGN_OR_RETURN(Tensor dlogits,
                      CrossEntropyBackward(logit_rows, targets_, classes_));
  DT_ASSIGN_OR_RETURN(dlogits, dlogits.Reshape(logits.shape()));
  DT_ASSIGN_OR_RETURN(LinearGrads out,
                      LinearBackward(normed, output_weight, dlogits));
  grads[OutputParamIndex()] = out.dw;
  DT_ASSIGN_OR_RETURN(NormGrads norm,
                      RmsNormBackward(x, norm_weight, out.dx, config.norm_eps));
  grads[NormParamIndex()] = norm.dweight;
  Tensor dx = norm.dx;
  bool partial = false;
  for (int64_t l = layers; l-- > 0;) {
    DT_ASSIGN_OR_RETURN(dx, BlockBackward(l, saved[l], dx, partial, grads));
    partial = true;
  }
  DT_ASSIGN_OR_RETURN(grads[kEmbeddingParam],
                      EmbeddingBackward(tokens_, dx, classes_.numel()));
  // The partial gradients of replicated parameters, completed.
  DT_RETURN_IF_ERROR(AllReduce(grads[kEmbeddingParam]));
  for (int64_t l = 0; l < layers; ++l) {
    DT_RETURN_IF_ERROR(AllReduce(grads[BlockParamIndex(l, kAttentionNorm)]));
    DT_RETURN_IF_ERROR(AllReduce(grads[BlockParamIndex(l, kFfnNorm)]));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    DT_RETURN_IF_ERROR(AdamWUpdate(params_[i], grads[i], adamw_[i]));
  }
  return absl::OkStatus();
}

const Tensor& HandWrittenTrainer::Param(int64_t layer, BlockParam p) const {
  return params_[BlockParamIndex(layer, p)];
}

absl::Status HandWrittenTrainer::AllReduce(const Tensor& t) {
  ++collectives_;
  return comm_->AllReduce(t, ReduceOp::kSum);
}

absl::StatusOr<Tensor> HandWrittenTrainer::BlockForward(int64_t l,
                                                        const Tensor& x,
                                                        BlockActivations& a) {
  const nn::LlamaConfig config = ModelConfig();
  const int64_t heads = config.n_heads / kRanks;
  const int64_t kv_heads = config.kv_heads() / kRanks;
  const int64_t hd = config.head_dim();
  const Tensor none;
  a.x = x;
  DT_ASSIGN_OR_RETURN(a.n1,
                      RmsNorm(x, Param(l, kAttentionNorm), config.norm_eps));
  DT_ASSIGN_OR_RETURN(Tensor q, Linear(a.n1, Param(l, kWq), none));
  DT_ASSIGN_OR_RETURN(q, q.View({kBatch, kSeq, heads, hd}));
  DT_ASSIGN_OR_RETURN(q, RotaryEmbedding(q, none, config.rope_theta));
  DT_ASSIGN_OR_RETURN(Tensor k, Linear(a.n1, Param(l, kWk), none));
  DT_ASSIGN_OR_RETURN(k, k.View({kBatch, kSeq, kv_heads, hd}));
  DT_ASSIGN_OR_RETURN(k, RotaryEmbedding(k, none, config.rope_theta));
  DT_ASSIGN_OR_RETURN(Tensor v, Linear(a.n1, Param(l, kWv), none));
  DT_ASSIGN_OR_RETURN(v, v.View({kBatch, kSeq, kv_heads, hd}));
  DT_ASSIGN_OR_RETURN(q,
                      q.View({kBatch, kSeq, kv_heads, heads / kv_heads, hd}));
  DT_ASSIGN_OR_RETURN(a.q, q.Permute({0, 2, 3, 1, 4}));
  DT_ASSIGN_OR_RETURN(k, k.Permute({0, 2, 1, 3}));
  DT_ASSIGN_OR_RETURN(a.k, k.Unsqueeze(2));
  DT_ASSIGN_OR_RETURN(v, v.Permute({0, 2, 1, 3}));
  DT_ASSIGN_OR_RETURN(a.v, v.Unsqueeze(2));
  DT_ASSIGN_OR_RETURN(
      a.out, ScaledDotProductAttention(a.q, a.k, a.v, /*causal=*/true));
  DT_ASSIGN_OR_RETURN(Tensor out, a.out.Permute({0, 3, 1, 2, 4}));
  DT_ASSIGN_OR_RETURN(a.attended, out.Reshape({kBatch, kSeq, heads * hd}));
  // Rowwise wo: a partial sum, all-reduced.
  DT_ASSIGN_OR_RETURN(Tensor o, Linear(a.attended, Param(l, kWo), none));
  DT_RETURN_IF_ERROR(AllReduce(o));
  DT_ASSIGN_OR_RETURN(a.h, Add(x, o));
  DT_ASSIGN_OR_RETURN(a.n2, RmsNorm(a.h, Param(l, kFfnNorm), config.norm_eps));
  DT_ASSIGN_OR_RETURN(a.gate_in, Linear(a.n2, Param(l, kW1), none));
  DT_ASSIGN_OR_RETURN(a.gate, Silu(a.gate_in));
  DT_ASSIGN_OR_RETURN(a.up, Linear(a.n2, Param(l, kW3), none));
  DT_ASSIGN_OR_RETURN(a.hidden, Mul(a.gate, a.up));
  DT_ASSIGN_OR_RETURN(Tensor f, Linear(a.hidden, Param(l, kW2), none));
  DT_RETURN_IF_ERROR(AllReduce(f));
  return Add(a.h, f);
}

absl::StatusOr<Tensor> HandWrittenTrainer::BlockBackward(
    int64_t l, const BlockActivations& a, const Tensor& dy, bool partial,
    std::vector<Tensor>& grads) {
  const nn::LlamaConfig config = ModelConfig();
  const int64_t heads = config.n_heads / kRanks;
  const int64_t kv_heads = config.kv_heads() / kRanks;
  const int64_t hd = config.head_dim();
  // Feed-forward: the rowwise w2's output gradient must be complete.
  Tensor df = dy;
  if (partial) {
    df = dy.Clone();
    DT_RETURN_IF_ERROR(AllReduce(df));
  }
  DT_ASSIGN_OR_RETURN(Tensor dhidden,
                      LinearInputGrad(l, kW2, a.hidden, df, grads));
  DT_ASSIGN_OR_RETURN(Tensor dgate, Mul(dhidden, a.up));
  DT_ASSIGN_OR_RETURN(Tensor dup, Mul(dhidden, a.gate));
  DT_ASSIGN_OR_RETURN(Tensor dn2_up, LinearInputGrad(l, kW3, a.n2, dup, grads));
  DT_ASSIGN_OR_RETURN(Tensor dgate_in, SiluBackward(dgate, a.gate_in));
  DT_ASSIGN_OR_RETURN(Tensor dn2_gate,
                      LinearInputGrad(l, kW1, a.n2, dgate_in, grads));
  DT_ASSIGN_OR_RETURN(Tensor dn2, Add(dn2_up, dn2_gate));
  // dh = dy + the norm's partial gradient: a complete dy is counted once,
  // on rank 0.
  DT_ASSIGN_OR_RETURN(Tensor dh, NormInputGrad(l, kFfnNorm, a.h, dn2, grads));
  if (partial || rank_ == 0) {
    DT_ASSIGN_OR_RETURN(dh, Add(dy, dh));
  }
  // Attention: the rowwise wo's output gradient, completed.
  Tensor da = dh.Clone();
  DT_RETURN_IF_ERROR(AllReduce(da));
  DT_ASSIGN_OR_RETURN(Tensor dattended,
                      LinearInputGrad(l, kWo, a.attended, da, grads));
  DT_ASSIGN_OR_RETURN(Tensor dout, dattended.Reshape({kBatch, kSeq, kv_heads,
                                                      heads / kv_heads, hd}));
  DT_ASSIGN_OR_RETURN(dout, dout.Permute({0, 2, 3, 1, 4}));
  DT_ASSIGN_OR_RETURN(AttentionGrads attention,
                      ScaledDotProductAttentionBackward(a.q, a.k, a.v, a.out,
                                                        dout, /*causal=*/true));
  DT_ASSIGN_OR_RETURN(Tensor dk,
                      attention.dk.Reshape({kBatch, kv_heads, kSeq, hd}));
  DT_ASSIGN_OR_RETURN(dk, dk.Permute({0, 2, 1, 3}));
  DT_ASSIGN_OR_RETURN(Tensor dv,
                      attention.dv.Reshape({kBatch, kv_heads, kSeq, hd}));
  DT_ASSIGN_OR_RETURN(dv, dv.Permute({0, 2, 1, 3}));
  DT_ASSIGN_OR_RETURN(Tensor dq, attention.dq.Permute({0, 3, 1, 2, 4}));
  DT_ASSIGN_OR_RETURN(dq, dq.Reshape({kBatch, kSeq, heads, hd}));
  DT_ASSIGN_OR_RETURN(dv, dv.Reshape({kBatch, kSeq, kv_heads * hd}));
  DT_ASSIGN_OR_RETURN(Tensor dn1_v, LinearInputGrad(l, kWv, a.n1, dv, grads));
  DT_ASSIGN_OR_RETURN(Tensor dn1_k,
                      RotaryProjectionInputGrad(l, kWk, a.n1, dk, grads));
  DT_ASSIGN_OR_RETURN(Tensor dn1, Add(dn1_v, dn1_k));
  DT_ASSIGN_OR_RETURN(Tensor dn1_q,
                      RotaryProjectionInputGrad(l, kWq, a.n1, dq, grads));
  DT_ASSIGN_OR_RETURN(dn1, Add(dn1, dn1_q));
  DT_ASSIGN_OR_RETURN(Tensor dx,
                      NormInputGrad(l, kAttentionNorm, a.x, dn1, grads));
  return Add(dh, dx);
}

absl::StatusOr<Tensor> HandWrittenTrainer::LinearInputGrad(
    int64_t l, BlockParam p, const Tensor& x, const Tensor& g,
    std::vector<Tensor>& grads) const {
  DT_ASSIGN_OR_RETURN(LinearGrads linear, LinearBackward(x, Param(l, p), g));
  grads[BlockParamIndex(l, p)] = linear.dw;
  return linear.dx;
}

absl::StatusOr<Tensor> HandWrittenTrainer::NormInputGrad(
    int64_t l, BlockParam p, const Tensor& x, const Tensor& g,
    std::vector<Tensor>& grads) const {
  DT_ASSIGN_OR_RETURN(NormGrads norm, RmsNormBackward(x, Param(l, p), g,
                                                      ModelConfig().norm_eps));
  grads[BlockParamIndex(l, p)] = norm.dweight;
  return norm.dx;
}

absl::StatusOr<Tensor> HandWrittenTrainer::RotaryProjectionInputGrad(
    int64_t l, BlockParam p, const Tensor& x, const Tensor& d,
    std::vector<Tensor>& grads) const {
  DT_ASSIGN_OR_RETURN(Tensor g, RotaryEmbedding(d, reversed_positions_,
                                                ModelConfig().rope_theta));
  DT_ASSIGN_OR_RETURN(g, g.Reshape({kBatch, kSeq, d.size(2) * d.size(3)}));
  return LinearInputGrad(l, p, x, g, grads);
}

}  // namespace dtensor::bench
