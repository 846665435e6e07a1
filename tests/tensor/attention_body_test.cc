// The host forms of the tiled attention's bodies
// (dtensor/tensor/cuda/attention_body.h, attention_blocks.h): the tile product
// split among any number of workers, the online softmax over key tiles, and the
// device kernels' blocks run one after another on one host worker (lanes = 1,
// no barrier), against products and attention in double.
#include "dtensor/tensor/cuda/attention_body.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/attention_blocks.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"
#include "tests/tensor/reference_attention.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::testing::ExpectClose;
using ::dtensor::testing::Layout;
using ::dtensor::testing::Pick;
using ::dtensor::testing::RandomTensor;
using ::dtensor::testing::Tolerance;
using ::dtensor::testing::ToleranceFor;

struct NoSync {
  void operator()() const {}
};
constexpr Lanes<NoSync> kOneWorker{0, 1, NoSync()};

std::vector<double> Uniform(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> values(n);
  for (double& x : values) x = dist(rng);
  return values;
}

TEST(AttentionBodyTest, TileProductSplitsAmongAnyNumberOfWorkers) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t m = std::uniform_int_distribution<int64_t>(1, 70)(rng);
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 70)(rng);
    const int64_t depth = std::uniform_int_distribution<int64_t>(0, 40)(rng);
    const int lanes = Pick<int>({1, 3, 7, 64, 256}, rng);
    const std::vector<double> a = Uniform(m * depth, rng);
    const std::vector<double> b = Uniform(n * depth, rng);
    // a read row by row, b column by column (its transpose stored).
    const TileOperand<double> a_op{a.data(), depth, 1};
    const TileOperand<double> b_op{b.data(), 1, n};
    std::vector<double> out(m * n, 0.0);
    std::vector<int> writes(m * n, 0);
    for (int lane = 0; lane < lanes; ++lane) {
      TileProduct(
          a_op, b_op, m, n, depth,
          [&](int64_t i, int64_t j, double value) {
            out[i * n + j] = value;
            ++writes[i * n + j];
          },
          lane, lanes);
    }
    const std::string context =
        absl::StrCat(m, "x", n, " depth ", depth, " lanes ", lanes);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double expected = 0;
        for (int64_t l = 0; l < depth; ++l) {
          expected += a[i * depth + l] * b[l * n + j];
        }
        ASSERT_EQ(writes[i * n + j], 1) << context << " at " << i << ", " << j;
        ASSERT_NEAR(out[i * n + j], expected, 1e-12) << context;
      }
    }
  }
}

// One query row folded tile by tile against softmax(scores * scale) over its
// first `visible` keys times `values` [keys, 2], and its log-sum-exp.
TEST(AttentionBodyTest, OnlineSoftmaxFoldsKeyTilesIntoTheSoftmax) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t keys = std::uniform_int_distribution<int64_t>(0, 300)(rng);
    const int64_t visible =
        std::uniform_int_distribution<int64_t>(0, keys)(rng);
    const int64_t tile = Pick<int64_t>({1, 7, 64, 256}, rng);
    const double scale = 3.0;
    const std::vector<double> scores = Uniform(keys, rng);
    const std::vector<double> values = Uniform(keys * 2, rng);
    SoftmaxRunning<double> running = SoftmaxStart<double>();
    double acc[2] = {0, 0};
    for (int64_t k0 = 0; k0 < keys; k0 += tile) {
      const int64_t n = std::min(tile, keys - k0);
      std::vector<double> row(scores.begin() + k0, scores.begin() + k0 + n);
      const int64_t seen = std::clamp<int64_t>(visible - k0, 0, n);
      const double correction =
          OnlineSoftmaxRow(row.data(), n, seen, scale, running, ExpRowLoop());
      for (double& a : acc) a *= correction;
      for (int64_t j = 0; j < n; ++j) {
        if (j >= seen) {
          ASSERT_EQ(row[j], 0.0);
        }
        acc[0] += row[j] * values[(k0 + j) * 2];
        acc[1] += row[j] * values[(k0 + j) * 2 + 1];
      }
    }
    const double lse = FinishRow(acc, 2, running);
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < visible; ++j)
      max = std::max(max, scores[j] * scale);
    double sum = 0, out0 = 0, out1 = 0;
    for (int64_t j = 0; j < visible; ++j) {
      const double w = std::exp(scores[j] * scale - max);
      sum += w;
      out0 += w * values[j * 2];
      out1 += w * values[j * 2 + 1];
    }
    const std::string context =
        absl::StrCat(keys, " keys, ", visible, " visible, tiles of ", tile);
    if (visible == 0) {
      EXPECT_EQ(acc[0], 0.0) << context;
      EXPECT_EQ(acc[1], 0.0) << context;
      EXPECT_EQ(lse, -std::numeric_limits<double>::infinity()) << context;
      continue;
    }
    EXPECT_NEAR(acc[0], out0 / sum, 1e-12) << context;
    EXPECT_NEAR(acc[1], out1 / sum, 1e-12) << context;
    EXPECT_NEAR(lse, max + std::log(sum), 1e-12) << context;
  }
}

// The element offsets of each output batch entry's q, k, v matrices
// (contiguous operands broadcast to `batch`), as the device launch gives them.
StridedShape<3> BatchOffsets(const Tensor& q, const Tensor& k, const Tensor& v,
                             const Shape& batch) {
  StridedShape<3> shape;
  shape.ndim = static_cast<int>(batch.size());
  const Tensor* operands[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    Shape full = batch;
    full.push_back(operands[i]->size(-2));
    full.push_back(operands[i]->size(-1));
    const Tensor expanded = operands[i]->Expand(full).value();
    for (size_t d = 0; d < batch.size(); ++d) {
      shape.sizes[d] = batch[d];
      shape.strides[i][d] = expanded.strides()[d];
    }
  }
  return shape;
}

template <typename T>
T* Data(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// The forward and the backward of contiguous q, k, v (storage type T, compute
// type C), block after block of the device launches: out, and the compute-type
// gradient accumulators.
template <typename T>
struct DeviceBlocks {
  using C = Compute<T>;
  Tensor out, dq, dk, dv;

  DeviceBlocks(const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& dout, const Shape& batch, bool causal,
               double scale) {
    const DType compute = sizeof(C) == 4 ? DType::kF32 : DType::kF64;
    const AttentionProblem<C> p{q.size(-2), k.size(-2), q.size(-1),
                                v.size(-1), causal,     static_cast<C>(scale)};
    const int64_t entries = NumElements(batch);
    out = Tensor::Empty(dout.shape(), q.dtype()).value();
    std::vector<C> lse(entries * p.lq), delta(entries * p.lq);
    const StridedShape<3> offsets = BatchOffsets(q, k, v, batch);
    const AttentionForwardArgs<T, C> forward{
        p,          offsets,      Data<T>(q), Data<T>(k),
        Data<T>(v), Data<T>(out), lse.data()};
    std::vector<C> shared(AttentionSharedLayout<C>(p.e, p.ev, false).total);
    const int64_t queries = AttentionTiles<C>::kQueries;
    for (int64_t block = 0; block < entries * ((p.lq + queries - 1) / queries);
         ++block) {
      AttentionForwardBlock(forward, block, shared.data(), kOneWorker);
    }
    // As the device does: a warp a row, each of its 32 lanes a share.
    for (int64_t r = 0; r < entries * p.lq; ++r) {
      delta[r] = 0;
      for (int lane = 0; lane < 32; ++lane) {
        delta[r] += RowDeltaShare(Data<T>(dout) + r * p.ev,
                                  Data<T>(out) + r * p.ev, p.ev, lane, 32);
      }
    }
    dq = Tensor::Zeros(q.shape(), compute).value();
    dk = Tensor::Zeros(k.shape(), compute).value();
    dv = Tensor::Zeros(v.shape(), compute).value();
    const AttentionBackwardArgs<T, C> backward{
        p,           offsets,       Data<T>(q), Data<T>(k),
        Data<T>(v),  Data<T>(dout), lse.data(), delta.data(),
        Data<C>(dq), Data<C>(dk),   Data<C>(dv)};
    shared.assign(AttentionSharedLayout<C>(p.e, p.ev, true).total, C(0));
    const int64_t keys = AttentionTiles<C>::kKeys;
    for (int64_t block = 0; block < entries * ((p.lk + keys - 1) / keys);
         ++block) {
      AttentionBackwardBlock(backward, block, shared.data(), kOneWorker,
                             [](C* slot, C value) { *slot += value; });
    }
  }
};

TEST(AttentionBodyTest, DeviceBlocksOnOneHostWorkerMatchTheReference) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 24; ++trial) {
    const DType dtype = Pick(testing::kFloatDTypes, rng);
    const bool causal = trial % 2 == 0;
    // Batch [2, 3]: k and v grouped-query ([2, 1]) or whole.
    const Shape batch = {2, 3};
    const Shape kv_batch = Pick<Shape>({{2, 1}, {2, 3}, {3}}, rng);
    const int64_t lq = Pick<int64_t>({1, 31, 64, 65, 130}, rng);
    const int64_t lk = Pick<int64_t>({1, 31, 64, 65, 130}, rng);
    const int64_t e = Pick<int64_t>({0, 1, 16, 33}, rng);
    const int64_t ev = Pick<int64_t>({1, 16, 40}, rng);
    const double scale = Pick<double>({0.25, 0.7}, rng);
    const auto tensor = [&](Shape shape, int64_t rows, int64_t cols) {
      shape.insert(shape.end(), {rows, cols});
      return RandomTensor(shape, dtype, Layout::kContiguous, rng);
    };
    const Tensor q = tensor(batch, lq, e);
    const Tensor k = tensor(kv_batch, lk, e);
    const Tensor v = tensor(kv_batch, lk, ev);
    const Tensor dout = tensor(batch, lq, ev);
    const std::string context =
        absl::StrCat("trial ", trial, " ", std::string(DTypeName(dtype)),
                     " lq ", lq, " lk ", lk, " e ", e, " ev ", ev, " kv batch ",
                     ShapeToString(kv_batch), causal ? " causal" : "");
    const testing::AttentionReference r =
        testing::ReferenceAttention(q, k, v, dout, causal, scale);
    DispatchFloatingBodyStorage(dtype, [&](auto tag) {
      using T = decltype(tag);
      const DeviceBlocks<T> blocks(q, k, v, dout, batch, causal, scale);
      ExpectClose(blocks.out, r.out_shape, r.out, ToleranceFor(dtype),
                  context + " out");
      Tolerance tolerance = ToleranceFor(dtype);
      tolerance.atol *= 4;
      tolerance.rtol *= 4;
      ExpectClose(blocks.dq, q.shape(), r.dq, tolerance, context + " dq");
      ExpectClose(blocks.dk, k.shape(), r.dk, tolerance, context + " dk");
      ExpectClose(blocks.dv, v.shape(), r.dv, tolerance, context + " dv");
    });
  }
}

}  // namespace
}  // namespace dtensor::cuda
