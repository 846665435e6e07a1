// The log-sum-exp forms of attention (dtensor/tensor/attention.h) that ring
// attention is built from: the rows' lse against float64, attention over key
// blocks merged by MergeAttentionBlock against attention over all keys, and
// the backward given the whole attention's out and lse, block by block,
// against the float64 gradients.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/attention.h"
#include "dtensor/tensor/elementwise.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/reference_attention.h"

namespace dtensor {
namespace {

using testing::ExpectClose;
using testing::Layout;
using testing::RandomTensor;
using testing::Tolerance;
using testing::ToleranceFor;

// The lse of each row of attention over q [b, lq, e], k [b, lk, e] in double,
// with the causal mask aligned to the end (query i sees j <= i + lk - lq).
std::vector<double> ReferenceLse(const Tensor& q, const Tensor& k, bool causal,
                                 double scale) {
  const std::vector<double> qv = q.ToVector<double>().value();
  const std::vector<double> kv = k.ToVector<double>().value();
  const int64_t b = q.size(0), lq = q.size(1), lk = k.size(1), e = q.size(2);
  std::vector<double> lse;
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t visible = causal ? std::min(lk, i + lk - lq + 1) : lk;
      double max = -std::numeric_limits<double>::infinity();
      std::vector<double> scores;
      for (int64_t j = 0; j < visible; ++j) {
        double s = 0;
        for (int64_t c = 0; c < e; ++c) {
          s += qv[(n * lq + i) * e + c] * kv[(n * lk + j) * e + c];
        }
        scores.push_back(s * scale);
        max = std::max(max, s * scale);
      }
      double sum = 0;
      for (const double s : scores) sum += std::exp(s - max);
      lse.push_back(scores.empty() ? max : max + std::log(sum));
    }
  }
  return lse;
}

struct Operands {
  Tensor q, k, v, dout;
};

Operands Draw(DType dtype, int64_t lq, int64_t lk, std::mt19937& rng) {
  constexpr int64_t kBatch = 2, kE = 8, kEv = 4;
  return {RandomTensor({kBatch, lq, kE}, dtype, Layout::kContiguous, rng),
          RandomTensor({kBatch, lk, kE}, dtype, Layout::kContiguous, rng),
          RandomTensor({kBatch, lk, kEv}, dtype, Layout::kContiguous, rng),
          RandomTensor({kBatch, lq, kEv}, dtype, Layout::kContiguous, rng)};
}

// Key blocks [start, end) cutting [0, lk) at random points.
std::vector<std::pair<int64_t, int64_t>> KeyBlocks(int64_t lk,
                                                   std::mt19937& rng) {
  std::vector<int64_t> cuts = {0, lk};
  for (int i = 0; i < 2; ++i) {
    cuts.push_back(std::uniform_int_distribution<int64_t>(0, lk)(rng));
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    blocks.push_back({cuts[i], cuts[i + 1]});
  }
  return blocks;
}

TEST(AttentionLseTest, LseMatchesFloat64IncludingRowsThatSeeNoKey) {
  std::mt19937 rng(1);
  for (const DType dtype : testing::kFloatDTypes) {
    for (const bool causal : {false, true}) {
      // lq > lk with causal: the first rows see no key (lse -inf).
      for (const auto [lq, lk] : {std::pair{5, 5}, {7, 3}, {3, 9}}) {
        const Operands o = Draw(dtype, lq, lk, rng);
        const std::string what =
            absl::StrCat(std::string(DTypeName(dtype)),
                         causal ? " causal " : " ", lq, "x", lk);
        const absl::StatusOr<AttentionWithLse> got =
            ScaledDotProductAttentionWithLse(o.q, o.k, o.v, causal);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->lse.dtype(), AttentionLseDType(dtype));
        ExpectClose(got->lse, {2, lq},
                    ReferenceLse(o.q, o.k, causal, 1 / std::sqrt(8.0)),
                    ToleranceFor(AttentionLseDType(dtype)), what + " lse");
        const testing::AttentionReference ref =
            testing::ReferenceAttention(o.q, o.k, o.v, o.dout, causal, 0);
        ExpectClose(got->out, ref.out_shape, ref.out, ToleranceFor(dtype),
                    what + " out");
      }
    }
  }
}

// Attention over all keys is the merge of the attentions over key blocks,
// and its backward the sum (dq) and concatenation (dk, dv) of the blocks'
// backwards given the whole out and lse.
TEST(AttentionLseTest, KeyBlocksMergeAndDifferentiateToTheWhole) {
  std::mt19937 rng(2);
  for (const DType dtype : {DType::kF32, DType::kF64, DType::kBF16}) {
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t lq = std::uniform_int_distribution<int64_t>(1, 9)(rng);
      const int64_t lk = std::uniform_int_distribution<int64_t>(1, 12)(rng);
      const Operands o = Draw(dtype, lq, lk, rng);
      const std::string what =
          absl::StrCat(std::string(DTypeName(dtype)), " ", lq, "x", lk);
      AttentionWithLse merged;
      std::vector<std::pair<int64_t, int64_t>> blocks = KeyBlocks(lk, rng);
      for (const auto& [start, end] : blocks) {
        const Tensor kb = *o.k.Slice(1, start, end);
        const Tensor vb = *o.v.Slice(1, start, end);
        absl::StatusOr<AttentionWithLse> part =
            ScaledDotProductAttentionWithLse(o.q, kb, vb, false);
        ASSERT_TRUE(part.ok()) << what << ": " << part.status();
        part->out = *part->out.To(AttentionLseDType(dtype));
        ASSERT_TRUE(MergeAttentionBlock(merged, *part).ok()) << what;
      }
      const testing::AttentionReference ref =
          testing::ReferenceAttention(o.q, o.k, o.v, o.dout, false, 0);
      // Each block's out was rounded to `dtype`.
      ExpectClose(merged.out, ref.out_shape, ref.out, ToleranceFor(dtype),
                  what + " merged");
      ExpectClose(merged.lse, {2, lq},
                  ReferenceLse(o.q, o.k, false, 1 / std::sqrt(8.0)),
                  ToleranceFor(AttentionLseDType(dtype)), what + " lse");
      const Tensor out = *merged.out.To(dtype);
      Tensor dq;
      std::vector<Tensor> dks, dvs;
      for (const auto& [start, end] : blocks) {
        const absl::StatusOr<AttentionGrads> g =
            ScaledDotProductAttentionBackwardWithLse(
                o.q, *o.k.Slice(1, start, end), *o.v.Slice(1, start, end), out,
                o.dout, merged.lse, false);
        ASSERT_TRUE(g.ok()) << what << ": " << g.status();
        const Tensor g_dq = *g->dq.To(DType::kF64);
        dq = dq.defined() ? *Add(dq, g_dq) : g_dq;
        dks.push_back(g->dk);
        dvs.push_back(g->dv);
      }
      const Tolerance tolerance = {4 * ToleranceFor(dtype).atol,
                                   4 * ToleranceFor(dtype).rtol};
      ExpectClose(dq, o.q.shape(), ref.dq, tolerance, what + " dq");
      ExpectClose(*Cat(dks, 1), o.k.shape(), ref.dk, tolerance, what + " dk");
      ExpectClose(*Cat(dvs, 1), o.v.shape(), ref.dv, tolerance, what + " dv");
    }
  }
}

TEST(AttentionLseTest, BackwardRejectsAnLseOfTheWrongShapeOrDType) {
  std::mt19937 rng(3);
  const Operands o = Draw(DType::kF32, 4, 4, rng);
  const AttentionWithLse f =
      *ScaledDotProductAttentionWithLse(o.q, o.k, o.v, false);
  const absl::StatusOr<AttentionGrads> wrong_shape =
      ScaledDotProductAttentionBackwardWithLse(o.q, o.k, o.v, f.out, o.dout,
                                               *f.lse.Slice(1, 0, 3), false);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("[2, 3]"), std::string::npos)
      << wrong_shape.status();
  const absl::StatusOr<AttentionGrads> wrong_dtype =
      ScaledDotProductAttentionBackwardWithLse(o.q, o.k, o.v, f.out, o.dout,
                                               *f.lse.To(DType::kF64), false);
  ASSERT_FALSE(wrong_dtype.ok());
  EXPECT_NE(wrong_dtype.status().message().find("f64"), std::string::npos)
      << wrong_dtype.status();
}

TEST(AttentionLseTest, MergeRejectsBlocksOfOtherQueries) {
  std::mt19937 rng(4);
  const Operands a = Draw(DType::kF32, 4, 4, rng);
  const Operands b = Draw(DType::kF32, 3, 4, rng);
  AttentionWithLse acc =
      *ScaledDotProductAttentionWithLse(a.q, a.k, a.v, false);
  const AttentionWithLse other =
      *ScaledDotProductAttentionWithLse(b.q, b.k, b.v, false);
  EXPECT_FALSE(MergeAttentionBlock(acc, other).ok());
}

}  // namespace
}  // namespace dtensor
