// The host forms of the CUDA index and random bodies
// (dtensor/tensor/cuda/index_body.h, random_body.h: index select, gather,
// scatter add, dropout; embedding backward's in
// embedding_backward_body_test.cc) against the CPU kernels of
// dtensor/tensor/ and the generator.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/index_body.h"
#include "dtensor/tensor/cuda/random_body.h"
#include "dtensor/tensor/elementwise.h"
#include "dtensor/tensor/generator.h"
#include "dtensor/tensor/indexing.h"
#include "dtensor/tensor/nn_functional.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_body_test_util.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::cuda::body_testing::Bytes;
using ::dtensor::cuda::body_testing::ForFloatingStorage;
using ::dtensor::cuda::body_testing::ForStorage;
using ::dtensor::cuda::body_testing::StridedShapeOf;
using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomIndices;
using ::dtensor::testing::RandomTensor;

// ---- Index ops. ----

Strides WithDimZeroed(Strides strides, int64_t dim) {
  strides[dim] = 0;
  return strides;
}

TEST(IndexBodyTest, IndexSelectMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(11);
  for (DType dtype : testing::kAllDTypes) {
    const Tensor x = RandomTensor({4, 5, 6}, dtype, Layout::kStrided, rng);
    for (int64_t dim : {0, 1, 2}) {
      const Tensor index = RandomIndices({7}, x.size(dim), DType::kI64, rng);
      const Tensor expected = *IndexSelect(x, dim, index);
      Tensor got = *Tensor::Empty(expected.shape(), dtype);
      const Tensor input = x.Contiguous();
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < 3; ++d) {
        if (d < dim) outer *= x.size(d);
        if (d > dim) inner *= x.size(d);
      }
      ForStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < got.numel(); ++i) {
          IndexSelectElement(
              static_cast<const T*>(input.raw_data()), index.data<int64_t>(),
              static_cast<T*>(got.raw_data()), i, 7, x.size(dim), inner);
        }
      });
      EXPECT_EQ(outer * 7 * inner, got.numel());
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(dtype) << " dim " << dim;
    }
  }
}

// An index shape that fits x [5, 6, 7] along `dim` (smaller off it).
Shape IndexShapeFor(int64_t dim, int64_t size_on_dim) {
  Shape shape = {4, 5, 6};
  shape[dim] = size_on_dim;
  return shape;
}

TEST(IndexBodyTest, GatherMatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(12);
  for (DType dtype : testing::kAllDTypes) {
    const Tensor x = RandomTensor({5, 6, 7}, dtype, Layout::kTransposed, rng);
    for (int64_t dim : {0, 1, 2}) {
      const Tensor index =
          RandomIndices(IndexShapeFor(dim, 9), x.size(dim), DType::kI64, rng);
      const Tensor expected = *Gather(x, dim, index);
      Tensor got = *Tensor::Empty(index.shape(), dtype);
      const StridedShape<1> shape =
          StridedShapeOf<1>(index.shape(), {WithDimZeroed(x.strides(), dim)});
      ForStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < got.numel(); ++i) {
          GatherElement(static_cast<const T*>(x.raw_data()),
                        index.data<int64_t>(), static_cast<T*>(got.raw_data()),
                        shape, x.strides()[dim], i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected))
          << DTypeName(dtype) << " dim " << dim;
    }
  }
}

// ScatterAdd by the body with a sequential add, accumulating as the CUDA
// launch does (float for the 16-bit floats).
Tensor HostScatterAdd(const Tensor& x, int64_t dim, const Tensor& index,
                      const Tensor& src) {
  const bool sixteen_bit =
      x.dtype() == DType::kBF16 || x.dtype() == DType::kF16;
  Tensor acc =
      *x.Contiguous().Clone().To(sixteen_bit ? DType::kF32 : x.dtype());
  const StridedShape<2> shape = StridedShapeOf<2>(
      index.shape(), {WithDimZeroed(acc.strides(), dim), src.strides()});
  ForStorage(x.dtype(), [&](auto tag, auto) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using A = Compute<T>;
      for (int64_t i = 0; i < index.numel(); ++i) {
        ScatterAddElement(
            static_cast<const T*>(src.raw_data()), index.data<int64_t>(),
            static_cast<A*>(acc.raw_data()), shape, acc.strides()[dim], i,
            [](A* slot, A value) { *slot += value; });
      }
    }
  });
  return *acc.To(x.dtype());
}

TEST(IndexBodyTest, ScatterAddMatchesTheCpuKernel) {
  std::mt19937 rng(13);
  for (DType dtype : testing::kNumericDTypes) {
    const Tensor x = RandomTensor({5, 6, 7}, dtype, Layout::kStrided, rng);
    for (int64_t dim : {0, 1, 2}) {
      // One addend per slot at most (size 1 on dim), then duplicates.
      for (int64_t size_on_dim : {1, 9}) {
        const Shape index_shape = IndexShapeFor(dim, size_on_dim);
        const Tensor index =
            RandomIndices(index_shape, x.size(dim), DType::kI64, rng);
        const Tensor src =
            RandomTensor(index_shape, dtype, Layout::kTransposed, rng);
        const Tensor expected = *ScatterAdd(x, dim, index, src);
        const Tensor got = HostScatterAdd(x, dim, index, src);
        const std::string context = absl::StrCat(
            std::string(DTypeName(dtype)), " dim ", dim, " size ", size_on_dim);
        const bool rounds_once = dtype == DType::kBF16 || dtype == DType::kF16;
        if (size_on_dim == 1 || !rounds_once) {
          EXPECT_EQ(Bytes(got), Bytes(expected)) << context;
        } else {
          // The CPU rounds to the dtype after every add, the body once.
          const testing::Tolerance tolerance = testing::ToleranceFor(dtype);
          EXPECT_TRUE(AllClose(*got.To(DType::kF64), *expected.To(DType::kF64),
                               8 * tolerance.rtol, 8 * tolerance.atol))
              << context;
        }
      }
    }
  }
}

// ---- Dropout. ----

TEST(RandomBodyTest, DropoutReproducesTheGeneratorsMaskBitForBit) {
  std::mt19937 rng(14);
  // A block [3, 4, 5] at (2, 0, 3) of a tensor [6, 4, 9].
  const Shape global = {6, 4, 9};
  const Shape block = {3, 4, 5};
  const std::vector<int64_t> block_offset = {2, 0, 3};
  const uint64_t seed = 0x123456789abcdefULL;
  const uint64_t offset = 1000003;
  const Strides global_strides = ContiguousStrides(global);
  uint64_t base = offset;
  for (int d = 0; d < 3; ++d) base += block_offset[d] * global_strides[d];
  for (DType dtype : testing::kFloatDTypes) {
    for (double p : {0.0, 0.1, 0.5, 0.9}) {
      const Tensor x = RandomTensor(block, dtype, Layout::kContiguous, rng);
      // The reference: each element's draw at its global position, as
      // dtensor/ops/random_ops.cc draws it with a Generator, the mask in the
      // dtype.
      std::vector<double> mask;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const std::vector<int64_t> local = testing::Unravel(i, block);
        std::vector<int64_t> global_index(3);
        for (int d = 0; d < 3; ++d) {
          global_index[d] = local[d] + block_offset[d];
        }
        Generator generator(seed,
                            offset + testing::Ravel(global_index, global));
        mask.push_back(generator.NextUniformFloat() >= p ? 1.0 / (1.0 - p)
                                                         : 0.0);
      }
      const Tensor expected =
          *Mul(x, *Tensor::FromVector<double>(mask, block)->To(dtype));
      Tensor got = *Tensor::Empty(block, dtype);
      const StridedShape<1> positions =
          StridedShapeOf<1>(block, {global_strides});
      ForFloatingStorage(dtype, [&](auto tag, auto) {
        using T = decltype(tag);
        for (int64_t i = 0; i < x.numel(); ++i) {
          DropoutElement(static_cast<const T*>(x.raw_data()),
                         static_cast<T*>(got.raw_data()), positions, base, seed,
                         p, 1.0 / (1.0 - p), i);
        }
      });
      EXPECT_EQ(Bytes(got), Bytes(expected)) << DTypeName(dtype) << " p " << p;
      if (p == 0.5) {
        int64_t zeros = 0;
        for (const double m : mask) zeros += m == 0;
        EXPECT_GT(zeros, 20);  // Of 60: the mask is not all ones.
        EXPECT_LT(zeros, 40);
      }
    }
  }
}

}  // namespace
}  // namespace dtensor::cuda
