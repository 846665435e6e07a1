#include "tests/tensor/loss_backward_case.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/loss_backward.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::testing {
namespace {

constexpr int64_t kIgnore = -100;

template <typename T>
T Value(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status();
  return *std::move(v);
}

// The gradient of the whole logits [rows, classes] in double: per row, the
// softmax around the row's max, minus the one-hot, times the row's weight.
std::vector<double> ReferenceGrad(const std::vector<double>& x, int64_t rows,
                                  int64_t classes,
                                  const std::vector<int64_t>& targets,
                                  const std::vector<double>& weights,
                                  std::vector<double>* log_sum_exp) {
  std::vector<double> grad(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * classes;
    const double max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - max);
    const double lse = max + std::log(sum);
    log_sum_exp->push_back(lse);
    if (targets[r] == kIgnore) continue;
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(row[j] - lse);
      grad[r * classes + j] = (p - (j == targets[r] ? 1.0 : 0.0)) * weights[r];
    }
  }
  return grad;
}

// `t` copied into a tensor of t's device whose storage starts one element
// into a larger allocation.
Tensor Misaligned(const Tensor& t) {
  Tensor flat = Value(Tensor::Empty({t.numel() + 1}, t.dtype(), t.device()));
  Tensor view = Value(Value(flat.Narrow(0, 1, t.numel())).View(t.shape()));
  EXPECT_TRUE(view.CopyFrom(t).ok());
  return view;
}

}  // namespace

std::string Describe(const LossGradCase& c) {
  return absl::StrCat(std::string(DTypeName(c.dtype)), " [", c.rows, ", ",
                      c.classes, "] block ", c.block, "/", c.blocks,
                      " reduction ", static_cast<int>(c.reduction),
                      " extra count ", c.extra_count,
                      c.misaligned ? " misaligned" : "", " seed ", c.seed);
}

void ExpectLossGradMatchesReference(const LossGradCase& c, Device device) {
  SCOPED_TRACE(Describe(c));
  std::mt19937 rng(c.seed);
  const Tensor logits = RandomTensor({c.rows, c.classes}, c.dtype,
                                     Layout::kContiguous, rng, -4, 4);
  std::vector<int64_t> targets(c.rows);
  std::uniform_int_distribution<int64_t> pick(0, c.classes - 1);
  std::bernoulli_distribution ignored(c.ignored);
  int64_t count = c.extra_count;
  for (int64_t& t : targets) {
    t = ignored(rng) ? kIgnore : pick(rng);
    count += t != kIgnore;
  }
  const bool per_row = c.reduction == Reduction::kNone;
  const Tensor grad = RandomTensor(per_row ? Shape{c.rows} : Shape{}, c.dtype,
                                   Layout::kContiguous, rng, -2, 2);
  const std::vector<double> g = Value(grad.ToVector<double>());
  std::vector<double> weights(c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    weights[r] =
        (per_row ? g[r] : g[0]) / (c.reduction == Reduction::kMean ? count : 1);
  }
  std::vector<double> lse;
  const std::vector<double> full =
      ReferenceGrad(Value(logits.ToVector<double>()), c.rows, c.classes,
                    targets, weights, &lse);
  // The block: the chunk rule's offset and size.
  const int64_t base = c.classes / c.blocks;
  const int64_t offset =
      c.block * base + std::min<int64_t>(c.block, c.classes % c.blocks);
  const int64_t size = base + (c.block < c.classes % c.blocks ? 1 : 0);
  std::vector<double> expected;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < size; ++j) {
      expected.push_back(full[r * c.classes + offset + j]);
    }
  }
  const Tensor block = Value(logits.Narrow(1, offset, size));
  CrossEntropyGradInputs in;
  in.logits = Value(block.To(device));
  if (c.misaligned) in.logits = Misaligned(in.logits);
  in.target = Value(Value(Tensor::FromVector(targets, {c.rows})).To(device));
  in.log_sum_exp = Value(
      Value(
          Value(Tensor::FromVector(lse, {c.rows})).To(ComputeDTypeOf(c.dtype)))
          .To(device));
  in.grad = Value(grad.To(device));
  in.count = Value(Tensor::Scalar(count, DType::kI64).To(device));
  const absl::StatusOr<Tensor> out =
      CrossEntropyBackward(in, c.reduction, kIgnore, offset);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->device(), device);
  ASSERT_EQ(out->dtype(), c.dtype);
  ExpectClose(Value(out->To(Device::CPU())), {c.rows, size}, expected,
              ToleranceFor(c.dtype));
}

}  // namespace dtensor::testing
