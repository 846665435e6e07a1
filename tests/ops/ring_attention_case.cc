#include "tests/ops/ring_attention_case.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/comm_counter.h"
#include "dtensor/ops/ring_attention.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/indexing.h"
#include "dtensor/tensor/nn_functional.h"
#include "dtensor/tensor/reduction.h"

namespace dtensor::ops::testing {
namespace {

// q, k, v and the output's gradient over the whole sequence.
struct Full {
  Tensor q, k, v, dout;
};

Full Draw(int64_t length, uint64_t seed) {
  Generator gen(seed);
  const auto draw = [&](Shape shape) {
    return *Tensor::Normal(std::move(shape), 0.0, 1.0, gen, DType::kF64);
  };
  return {draw({2, 2, 2, length, 8}), draw({2, 2, 1, length, 8}),
          draw({2, 2, 1, length, 4}), draw({2, 2, 2, length, 4})};
}

// `t` with its sequence dim (3) in `order` over `cp` (or back, `inverse`).
absl::StatusOr<Tensor> Reordered(const Tensor& t, int64_t cp,
                                 SequenceOrder order, bool inverse) {
  DT_ASSIGN_OR_RETURN(std::vector<int64_t> positions,
                      SequencePositions(t.size(3), cp, order));
  if (inverse) {
    std::vector<int64_t> back(positions.size());
    for (size_t i = 0; i < positions.size(); ++i) back[positions[i]] = i;
    positions = back;
  }
  DT_ASSIGN_OR_RETURN(const Tensor index,
                      Tensor::FromVector<int64_t>(
                          positions, {static_cast<int64_t>(positions.size())}));
  return IndexSelect(t, 3, index);
}

absl::Status ExpectClose(const Tensor& got, const Tensor& want,
                         const std::string& what) {
  DT_ASSIGN_OR_RETURN(const Tensor diff, Sub(got, want));
  DT_ASSIGN_OR_RETURN(const Tensor abs, Abs(diff));
  DT_ASSIGN_OR_RETURN(const Tensor worst, Max(abs, {}));
  DT_ASSIGN_OR_RETURN(const double error, worst.Item());
  if (!(error < 1e-10)) {
    return absl::InternalError(absl::StrCat(what, ": off by ", error));
  }
  return absl::OkStatus();
}

// k and v pass cp - 1 times forward; in backward k, v cp - 1 times and
// their gradients cp times.
absl::Status ExpectRingCounts(const RingCase& c, const CommCounter& forward,
                              const CommCounter& backward) {
  const int64_t cp = c.mesh.back();
  const int64_t want_forward = cp == 1 ? 0 : 2 * (cp - 1);
  const int64_t want_backward = cp == 1 ? 0 : 2 * (cp - 1) + 2 * cp;
  if (forward.count(CommKind::kPermute) != want_forward ||
      forward.total_collectives() != want_forward ||
      backward.count(CommKind::kPermute) != want_backward ||
      backward.total_collectives() != want_backward) {
    return absl::InternalError(
        absl::StrCat(c.Name(), ": ", forward.total_collectives(), " and ",
                     backward.total_collectives(), " collectives, expected ",
                     want_forward, " and ", want_backward));
  }
  return absl::OkStatus();
}

}  // namespace

std::string RingCase::Name() const {
  return absl::StrCat(
      mesh.size() == 1 ? "cp=" : "dp=", mesh[0],
      mesh.size() == 1 ? "" : absl::StrCat(",cp=", mesh[1]),
      order == SequenceOrder::kBalanced ? " balanced" : " contiguous",
      causal ? " causal" : "", " L=", length);
}

std::vector<RingCase> RingCases(int64_t world_size) {
  std::vector<std::vector<int64_t>> meshes;
  if (world_size == 2) meshes = {{2}};
  if (world_size == 4) meshes = {{4}, {2, 2}};
  std::vector<RingCase> cases;
  for (const std::vector<int64_t>& mesh : meshes) {
    for (const SequenceOrder order :
         {SequenceOrder::kContiguous, SequenceOrder::kBalanced}) {
      for (const bool causal : {false, true}) {
        cases.push_back({mesh, order, causal, 16});
      }
    }
  }
  if (world_size != 4) return cases;
  for (const int64_t length : {7, 9, 3}) {
    for (const bool causal : {false, true}) {
      cases.push_back({{4}, SequenceOrder::kContiguous, causal, length});
    }
  }
  return cases;
}

absl::Status CheckRingCase(ProcessGroups& groups, const RingCase& c) {
  const DeviceMesh mesh = *DeviceMesh::Create(c.mesh);
  if (groups.world_size() != mesh.size()) {
    return absl::InvalidArgumentError(absl::StrCat(c.Name(), ": needs ",
                                                   mesh.size(), " ranks, got ",
                                                   groups.world_size()));
  }
  const Full full = Draw(c.length, 11 + c.length);
  DT_ASSIGN_OR_RETURN(
      const Tensor ref_out,
      ScaledDotProductAttention(full.q, full.k, full.v, c.causal));
  DT_ASSIGN_OR_RETURN(
      const AttentionGrads ref,
      ScaledDotProductAttentionBackward(full.q, full.k, full.v, ref_out,
                                        full.dout, c.causal));
  const int64_t cp_dim = static_cast<int64_t>(c.mesh.size()) - 1;
  const int64_t cp = c.mesh.back();
  std::vector<Placement> placements(c.mesh.size(), Placement::Shard(0));
  placements[cp_dim] = Placement::Shard(3);
  const RingAttentionOptions options{cp_dim, c.order, c.causal};
  auto runtime = Runtime::ForRank(groups);
  std::vector<DTensor> in;
  for (const Tensor* t : {&full.q, &full.k, &full.v, &full.dout}) {
    DT_ASSIGN_OR_RETURN(const Tensor ordered,
                        Reordered(*t, cp, c.order, false));
    DT_ASSIGN_OR_RETURN(
        DTensor d, DTensor::Distribute(runtime, ordered, mesh, placements));
    in.push_back(std::move(d));
  }
  CommCounter forward_count, backward_count;
  absl::StatusOr<RingAttentionResult> out;
  {
    CommCounter::Scope scope(forward_count);
    out = RingAttention(in[0], in[1], in[2], options);
  }
  DT_RETURN_IF_ERROR(out.status());
  absl::StatusOr<std::vector<DTensor>> grads;
  {
    CommCounter::Scope scope(backward_count);
    grads = RingAttentionBackward(in[0], in[1], in[2], out->out, out->lse,
                                  in[3], options);
  }
  DT_RETURN_IF_ERROR(grads.status());
  const std::pair<const DTensor*, const Tensor*> checks[] = {
      {&out->out, &ref_out},
      {&(*grads)[0], &ref.dq},
      {&(*grads)[1], &ref.dk},
      {&(*grads)[2], &ref.dv}};
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) {
    DT_ASSIGN_OR_RETURN(const Tensor gathered, checks[i].first->FullTensor());
    DT_ASSIGN_OR_RETURN(const Tensor got,
                        Reordered(gathered, cp, c.order, true));
    DT_RETURN_IF_ERROR(
        ExpectClose(got, *checks[i].second, c.Name() + " " + names[i]));
  }
  return ExpectRingCounts(c, forward_count, backward_count);
}

}  // namespace dtensor::ops::testing
