// One training step of a 2-layer Llama on 2 in-process ranks, tensor
// parallel (tp=2, the Megatron plan): through the DTensor runtime
// (BM_TpStepDTensor) and written by hand on local shards with the same
// kernels and the same collectives issued directly (BM_TpStepHandWritten).
//
// Before timing, both steps run 3 times from the same shards (once per
// process): their losses, final parameter shards and collective counts must
// agree, else both benchmarks are skipped with the mismatch. Timings: wall
// time per step (rank 0 drives the loop) and the CPU time of the whole
// process (both ranks). Figures and a profile in docs/performance.md.
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/inprocess/local_cluster.h"
#include "dtensor/comm_counter.h"
#include "dtensor/dtensor.h"
#include "dtensor/mesh/device_mesh.h"
#include "dtensor/nn/autograd.h"
#include "dtensor/nn/llama.h"
#include "dtensor/nn/optim_adamw.h"
#include "dtensor/ops/view_ops.h"
#include "dtensor/ops/vocab_ops.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/plan.h"
#include "dtensor/runtime.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/matmul.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/reduction.h"

namespace dtensor {
namespace {

constexpr int64_t kRanks = 2;
constexpr int64_t kBatch = 4;
constexpr int64_t kSeq = 64;
constexpr uint64_t kSeed = 7;
constexpr double kLearningRate = 3e-3;

nn::LlamaConfig ModelConfig() {
  nn::LlamaConfig config;
  config.dim = 256;
  config.n_layers = 2;
  config.n_heads = 8;
  config.n_kv_heads = 4;
  config.vocab_size = 256;
  config.multiple_of = 64;
  config.max_seq_len = kSeq;
  return config;
}

// Megatron's block plan on a tp-only mesh: the layer entries of
// parallel/plans/tp_dp.json (which also shards the embedding and the
// output projection by vocabulary; the hand-written step keeps those
// replicated).
constexpr char kTpPlan[] = R"({
  "tp": {
    "layers.*.attention.wq": "colwise",
    "layers.*.attention.wk": "colwise",
    "layers.*.attention.wv": "colwise",
    "layers.*.attention.wo": "rowwise",
    "layers.*.feed_forward.w1": "colwise",
    "layers.*.feed_forward.w3": "colwise",
    "layers.*.feed_forward.w2": "rowwise"
  },
  "dp": "none"
})";

// Tokens [batch, seq] and next-token targets [batch * seq], the same on every
// rank.
struct Batch {
  Tensor tokens;
  Tensor targets;
};

absl::StatusOr<Batch> MakeBatch() {
  Generator generator(kSeed);
  const int64_t vocab = ModelConfig().vocab_size;
  std::vector<int64_t> stream(kBatch * (kSeq + 1));
  for (int64_t& token : stream) token = generator.NextU32() % vocab;
  std::vector<int64_t> tokens, targets;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t i = 0; i < kSeq; ++i) {
      tokens.push_back(stream[b * (kSeq + 1) + i]);
      targets.push_back(stream[b * (kSeq + 1) + i + 1]);
    }
  }
  Batch batch;
  DT_ASSIGN_OR_RETURN(batch.tokens, Tensor::FromVector(tokens, {kBatch, kSeq}));
  DT_ASSIGN_OR_RETURN(batch.targets,
                      Tensor::FromVector(targets, {kBatch * kSeq}));
  return batch;
}

absl::StatusOr<DeviceMesh> TpMesh() {
  return DeviceMesh::Create({kRanks}, {"tp"});
}

// ---- The DTensor step. ----

class DTensorTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<DTensorTrainer>> Create(
      ProcessGroups& groups) {
    DT_ASSIGN_OR_RETURN(DeviceMesh mesh, TpMesh());
    std::unique_ptr<DTensorTrainer> trainer(
        new DTensorTrainer(Runtime::ForRank(groups), std::move(mesh)));
    nn::InitOptions init;
    init.seed = kSeed;
    DT_ASSIGN_OR_RETURN(
        trainer->model_,
        nn::BuildLlama(ModelConfig(), trainer->runtime_, trainer->mesh_, init));
    DT_ASSIGN_OR_RETURN(parallel::Plan plan, parallel::ParsePlan(kTpPlan));
    DT_RETURN_IF_ERROR(
        parallel::ParallelizeModule(*trainer->model_, trainer->mesh_, plan));
    for (const nn::NamedSlot& named : trainer->model_->NamedParameters()) {
      trainer->names_.push_back(named.name);
      trainer->params_.push_back(named.slot->value);
    }
    nn::AdamWOptions adamw;
    adamw.learning_rate = kLearningRate;
    DT_ASSIGN_OR_RETURN(trainer->optimizer_,
                        nn::AdamW::Create(trainer->params_, adamw));
    DT_ASSIGN_OR_RETURN(Batch batch, MakeBatch());
    const std::vector<Placement> replicate = {Placement::Replicate()};
    DT_ASSIGN_OR_RETURN(trainer->tokens_,
                        DTensor::FromLocal(trainer->runtime_, batch.tokens,
                                           trainer->mesh_, replicate));
    DT_ASSIGN_OR_RETURN(trainer->targets_,
                        DTensor::FromLocal(trainer->runtime_, batch.targets,
                                           trainer->mesh_, replicate));
    return trainer;
  }

  // One step: forward, loss, backward, AdamW.
  absl::Status Step() {
    nn::GradientTape tape;
    {
      nn::GradientTape::Scope scope(tape);
      DT_ASSIGN_OR_RETURN(DTensor logits, (*model_)(tokens_));
      DT_ASSIGN_OR_RETURN(
          logits,
          ops::Reshape(logits, {kBatch * kSeq, ModelConfig().vocab_size}));
      DT_ASSIGN_OR_RETURN(loss_, ops::CrossEntropy(logits, targets_));
    }
    DT_ASSIGN_OR_RETURN(std::vector<DTensor> grads,
                        tape.Gradient(loss_, params_));
    return optimizer_->Step(grads);
  }

  absl::StatusOr<double> loss() const { return loss_.ToLocal().Item(); }
  // Names and local shards of the parameters, in NamedParameters order.
  const std::vector<std::string>& names() const { return names_; }
  std::vector<Tensor> LocalParams() const {
    std::vector<Tensor> locals;
    for (const DTensor& p : params_) locals.push_back(p.ToLocal());
    return locals;
  }

 private:
  DTensorTrainer(std::shared_ptr<Runtime> runtime, DeviceMesh mesh)
      : runtime_(std::move(runtime)), mesh_(std::move(mesh)) {}

  std::shared_ptr<Runtime> runtime_;
  DeviceMesh mesh_;
  std::unique_ptr<nn::Transformer> model_;
  std::vector<std::string> names_;
  std::vector<DTensor> params_;
  std::unique_ptr<nn::AdamW> optimizer_;
  DTensor tokens_;
  DTensor targets_;
  DTensor loss_;
};

// ---- The hand-written step. ----

// The local kernels of each op's backward definition (dtensor/ops/), called on
// plain local shards: the same arithmetic as the DTensor step without dispatch,
// propagation or the tape.

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
struct AdamWState {
  Tensor m;
  Tensor v;
  int64_t steps = 0;
};
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

// The parameters of one block (local shards; wq, wk, wv, w1, w3 hold rows of
// the output features, wo, w2 columns of the input features).
enum BlockParam {
  kWq,
  kWk,
  kWv,
  kWo,
  kW1,
  kW2,
  kW3,
  kAttentionNorm,
  kFfnNorm,
  kBlockParams
};
// NamedParameters order: tok_embeddings, the blocks, norm, output.
constexpr int64_t kEmbeddingParam = 0;
int64_t BlockParamIndex(int64_t layer, BlockParam p) {
  return 1 + layer * kBlockParams + p;
}
int64_t NormParamIndex() { return 1 + ModelConfig().n_layers * kBlockParams; }
int64_t OutputParamIndex() { return NormParamIndex() + 1; }

// What one block's backward needs from its forward.
struct BlockActivations {
  // `out`: the attention's [batch, kv heads, group, seq, head dim].
  Tensor x, n1, q, k, v, out, attended, h, n2, gate_in, gate, up, hidden;
};

class HandWrittenTrainer {
 public:
  // `params`: the local shards in NamedParameters order (copied).
  static absl::StatusOr<std::unique_ptr<HandWrittenTrainer>> Create(
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

  absl::Status Step() {
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
    DT_ASSIGN_OR_RETURN(Tensor normed,
                        RmsNorm(x, norm_weight, config.norm_eps));
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
    DT_ASSIGN_OR_RETURN(NormGrads norm, RmsNormBackward(x, norm_weight, out.dx,
                                                        config.norm_eps));
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

  absl::StatusOr<double> loss() const { return loss_.Item(); }
  const std::vector<Tensor>& LocalParams() const { return params_; }
  int64_t collectives() const { return collectives_; }

 private:
  HandWrittenTrainer(int64_t rank, std::shared_ptr<Communicator> comm)
      : rank_(rank), comm_(std::move(comm)) {}

  const Tensor& Param(int64_t layer, BlockParam p) const {
    return params_[BlockParamIndex(layer, p)];
  }

  absl::Status AllReduce(const Tensor& t) {
    ++collectives_;
    return comm_->AllReduce(t, ReduceOp::kSum);
  }

  absl::StatusOr<Tensor> BlockForward(int64_t l, const Tensor& x,
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
    DT_ASSIGN_OR_RETURN(a.n2,
                        RmsNorm(a.h, Param(l, kFfnNorm), config.norm_eps));
    DT_ASSIGN_OR_RETURN(a.gate_in, Linear(a.n2, Param(l, kW1), none));
    DT_ASSIGN_OR_RETURN(a.gate, Silu(a.gate_in));
    DT_ASSIGN_OR_RETURN(a.up, Linear(a.n2, Param(l, kW3), none));
    DT_ASSIGN_OR_RETURN(a.hidden, Mul(a.gate, a.up));
    DT_ASSIGN_OR_RETURN(Tensor f, Linear(a.hidden, Param(l, kW2), none));
    DT_RETURN_IF_ERROR(AllReduce(f));
    return Add(a.h, f);
  }

  // The gradient of the block's input from that of its output `dy`
  // (partial: a per-rank term of a sum over ranks, else complete).
  absl::StatusOr<Tensor> BlockBackward(int64_t l, const BlockActivations& a,
                                       const Tensor& dy, bool partial,
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
    DT_ASSIGN_OR_RETURN(Tensor dn2_up,
                        LinearInputGrad(l, kW3, a.n2, dup, grads));
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
                        ScaledDotProductAttentionBackward(
                            a.q, a.k, a.v, a.out, dout, /*causal=*/true));
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

  // Backward of block `l`'s linear `p` applied to `x`, from its output's
  // gradient `g`: records the weight's gradient in `grads` and returns the
  // input's.
  absl::StatusOr<Tensor> LinearInputGrad(int64_t l, BlockParam p,
                                         const Tensor& x, const Tensor& g,
                                         std::vector<Tensor>& grads) const {
    DT_ASSIGN_OR_RETURN(LinearGrads linear, LinearBackward(x, Param(l, p), g));
    grads[BlockParamIndex(l, p)] = linear.dw;
    return linear.dx;
  }

  // Backward of block `l`'s norm `p` applied to `x`, likewise.
  absl::StatusOr<Tensor> NormInputGrad(int64_t l, BlockParam p, const Tensor& x,
                                       const Tensor& g,
                                       std::vector<Tensor>& grads) const {
    DT_ASSIGN_OR_RETURN(
        NormGrads norm,
        RmsNormBackward(x, Param(l, p), g, ModelConfig().norm_eps));
    grads[BlockParamIndex(l, p)] = norm.dweight;
    return norm.dx;
  }

  // Backward of block `l`'s q or k projection `p`, likewise; its output was
  // rotated: `d`, the gradient of the rotated heads [batch, seq, heads,
  // head_dim], is rotated back first.
  absl::StatusOr<Tensor> RotaryProjectionInputGrad(
      int64_t l, BlockParam p, const Tensor& x, const Tensor& d,
      std::vector<Tensor>& grads) const {
    DT_ASSIGN_OR_RETURN(Tensor g, RotaryEmbedding(d, reversed_positions_,
                                                  ModelConfig().rope_theta));
    DT_ASSIGN_OR_RETURN(g, g.Reshape({kBatch, kSeq, d.size(2) * d.size(3)}));
    return LinearInputGrad(l, p, x, g, grads);
  }

  int64_t rank_;
  std::shared_ptr<Communicator> comm_;
  std::vector<Tensor> params_;
  std::vector<AdamWState> adamw_;
  Tensor tokens_;
  Tensor targets_;
  Tensor classes_;
  Tensor reversed_positions_;
  Tensor loss_;
  int64_t collectives_ = 0;
};

// ---- Verification. ----

// What rank 0 saw of both steps.
struct Comparison {
  std::vector<double> dtensor_losses;
  std::vector<double> hand_losses;
  int64_t dtensor_collectives = 0;
  int64_t dtensor_all_reduces = 0;
  int64_t hand_collectives = 0;
  double max_param_diff = 0;
  std::string worst_param;
};

constexpr int kVerifySteps = 3;

absl::Status CompareRank(ProcessGroups& groups, Comparison& out) {
  DT_ASSIGN_OR_RETURN(auto dtensor, DTensorTrainer::Create(groups));
  DT_ASSIGN_OR_RETURN(
      auto hand, HandWrittenTrainer::Create(groups, dtensor->LocalParams()));
  Comparison c;
  CommCounter counter;
  for (int step = 0; step < kVerifySteps; ++step) {
    {
      CommCounter::Scope scope(counter);
      DT_RETURN_IF_ERROR(dtensor->Step());
    }
    if (step == 0) {
      c.dtensor_collectives = counter.total_collectives();
      c.dtensor_all_reduces = counter.count(CommKind::kAllReduce);
    }
    DT_ASSIGN_OR_RETURN(double loss, dtensor->loss());
    c.dtensor_losses.push_back(loss);
  }
  for (int step = 0; step < kVerifySteps; ++step) {
    DT_RETURN_IF_ERROR(hand->Step());
    if (step == 0) c.hand_collectives = hand->collectives();
    DT_ASSIGN_OR_RETURN(double loss, hand->loss());
    c.hand_losses.push_back(loss);
  }
  const std::vector<Tensor> a = dtensor->LocalParams();
  const std::vector<Tensor>& b = hand->LocalParams();
  for (size_t i = 0; i < a.size(); ++i) {
    DT_ASSIGN_OR_RETURN(Tensor diff, Sub(a[i], b[i]));
    DT_ASSIGN_OR_RETURN(diff, Abs(diff));
    DT_ASSIGN_OR_RETURN(Tensor max, Max(diff));
    DT_ASSIGN_OR_RETURN(double value, max.Item());
    if (value >= c.max_param_diff) {
      c.max_param_diff = value;
      c.worst_param = dtensor->names()[i];
    }
  }
  if (groups.rank() == 0) out = c;
  return absl::OkStatus();
}

// Runs both steps for a few steps from the same shards and checks that they
// agree: losses and parameters within f32 tolerance, and equal numbers of
// collectives (all all-reduces). OK, or why not.
absl::Status Verify() {
  Comparison c;
  LocalCluster cluster(kRanks);
  DT_RETURN_IF_ERROR(cluster.Run(
      [&](ProcessGroups& groups) { return CompareRank(groups, c); }));
  std::string report;
  for (int step = 0; step < kVerifySteps; ++step) {
    absl::StrAppend(&report, "step ", step + 1, " loss ",
                    c.dtensor_losses[step], " vs ", c.hand_losses[step], "; ");
  }
  absl::StrAppend(&report, "collectives ", c.dtensor_collectives, " vs ",
                  c.hand_collectives, "; max param diff ", c.max_param_diff,
                  " (", c.worst_param, ")");
  std::fprintf(stderr, "tp_step_bench verification: %s\n", report.c_str());
  bool agree = c.dtensor_collectives == c.hand_collectives &&
               c.dtensor_all_reduces == c.hand_collectives &&
               c.max_param_diff < 1e-4;
  for (int step = 0; step < kVerifySteps; ++step) {
    agree = agree && std::abs(c.dtensor_losses[step] - c.hand_losses[step]) <
                         1e-4 * std::abs(c.dtensor_losses[step]);
  }
  if (!agree) return absl::InternalError(absl::StrCat("mismatch: ", report));
  return absl::OkStatus();
}

const absl::Status& VerifiedOnce() {
  static const absl::Status* status = new absl::Status(Verify());
  return *status;
}

// ---- The benchmarks. ----

// Rank 0 runs the benchmark loop and tells rank 1 to take each step (or to
// stop); the step's collectives keep the ranks together.
class StepSignal {
 public:
  void Post(bool go) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(go);
    cv_.notify_one();
  }
  bool Next() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return next_ < queue_.size(); });
    return queue_[next_++];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> queue_;
  size_t next_ = 0;
};

// Runs `Trainer::Step` under `state` on every rank, after building the
// trainers with `make`.
template <typename MakeTrainer>
void RunSteps(benchmark::State& state, MakeTrainer make) {
  if (!VerifiedOnce().ok()) {
    state.SkipWithError(VerifiedOnce().ToString().c_str());
    return;
  }
  StepSignal signal;
  LocalCluster cluster(kRanks);
  const absl::Status status =
      cluster.Run([&](ProcessGroups& groups) -> absl::Status {
        DT_ASSIGN_OR_RETURN(auto trainer, make(groups));
        // One untimed step: optimizer state, caches.
        DT_RETURN_IF_ERROR(trainer->Step());
        if (groups.rank() != 0) {
          while (signal.Next()) DT_RETURN_IF_ERROR(trainer->Step());
          return absl::OkStatus();
        }
        absl::Status failed;
        for (auto _ : state) {
          signal.Post(true);
          failed = trainer->Step();
          if (!failed.ok()) break;
        }
        signal.Post(false);
        return failed;
      });
  if (!status.ok()) state.SkipWithError(status.ToString().c_str());
}

void BM_TpStepDTensor(benchmark::State& state) {
  RunSteps(state, [](ProcessGroups& groups) {
    return DTensorTrainer::Create(groups);
  });
}

void BM_TpStepHandWritten(benchmark::State& state) {
  RunSteps(state,
           [](ProcessGroups& groups)
               -> absl::StatusOr<std::unique_ptr<HandWrittenTrainer>> {
             // The same initial shards as the DTensor model's.
             DT_ASSIGN_OR_RETURN(auto dtensor, DTensorTrainer::Create(groups));
             return HandWrittenTrainer::Create(groups, dtensor->LocalParams());
           });
}

// Wall time over both ranks' threads; CPU time of the whole process (both
// ranks).
BENCHMARK(BM_TpStepDTensor)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_TpStepHandWritten)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace dtensor
