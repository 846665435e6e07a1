// The host form of the norm backward's kernel bodies
// (dtensor/tensor/cuda/norm_body.h), run the way the CUDA launch
// (norm_kernels.cu) runs them: each row's elements split among lanes whose
// partial sums are then combined, and the parameter gradients summed per chunk
// of rows (a column per thread) and then over the chunks. Against the CPU
// kernel (dtensor/tensor/norm_backward.h, one lane, row after row): dx bit for
// bit with one lane, and within a few units in the last place of the dtype
// (the sums in double in another order) otherwise.
#include "dtensor/tensor/cuda/norm_body.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/body_storage.h"
#include "dtensor/tensor/cuda/host_device.h"
#include "dtensor/tensor/cuda/row_body.h"
#include "dtensor/tensor/norm_backward.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/kernel_test_util.h"

namespace dtensor::cuda {
namespace {

using ::dtensor::testing::Layout;
using ::dtensor::testing::RandomTensor;

// The backward of contiguous x, g [rows, width] by the bodies as the device
// combines them, with `lanes` lanes per row; weight may be undefined.
template <typename T>
NormGrads HostNormBackward(const Tensor& x, const Tensor& g, const Tensor& w,
                           double eps, bool layer_norm, int lanes) {
  const int64_t width = x.size(-1);
  const int64_t rows = x.numel() / width;
  const T* xs = static_cast<const T*>(x.raw_data());
  const T* gs = static_cast<const T*>(g.raw_data());
  const T* ws = w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr;
  NormGrads out;
  out.dx = *Tensor::Empty(x.shape(), x.dtype());
  std::vector<NormStats> stats(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const Row<T> x_row{xs + r * width, width, 1};
    const Row<T> g_row{gs + r * width, width, 1};
    double sum = 0, squares = 0;
    for (int lane = 0; lane < lanes; ++lane) {
      sum += ReducePartial<double>(ReduceOp::kSum, x_row, lane, lanes);
    }
    const double mean = layer_norm ? sum / width : 0.0;
    for (int lane = 0; lane < lanes; ++lane) {
      squares += CenteredSquaresPartial(x_row, mean, lane, lanes);
    }
    stats[r] = NormStatsOf(mean, squares, width, eps);
    NormDots dots;
    for (int lane = 0; lane < lanes; ++lane) {
      const NormDots part =
          NormDotsPartial(x_row, g_row, ws, stats[r], lane, lanes);
      dots.gh_xhat += part.gh_xhat;
      dots.gh += part.gh;
    }
    for (int lane = 0; lane < lanes; ++lane) {
      NormBackwardWrite(x_row, g_row, ws, stats[r], dots, layer_norm,
                        static_cast<T*>(out.dx.raw_data()) + r * width, lane,
                        lanes);
    }
  }
  const int64_t chunks = NormParamChunks(rows);
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  std::vector<double> dweight(chunks * width), dbias(chunks * width);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(rows, (c + 1) * chunk_rows);
    for (int64_t j = 0; j < width; ++j) {
      const NormParamSums sums = NormParamColumnPartial(
          xs, gs, stats.data(), width, c * chunk_rows, end, j);
      dweight[c * width + j] = sums.dweight;
      dbias[c * width + j] = sums.dbias;
    }
  }
  std::vector<double> weight_grad(width), bias_grad(width);
  for (int64_t j = 0; j < width; ++j) {
    weight_grad[j] = ColumnSum(dweight.data(), chunks, width, j);
    bias_grad[j] = ColumnSum(dbias.data(), chunks, width, j);
  }
  out.dweight =
      *Tensor::FromVector<double>(weight_grad, {width})->To(x.dtype());
  out.dbias = *Tensor::FromVector<double>(bias_grad, {width})->To(x.dtype());
  return out;
}

std::vector<uint8_t> Bytes(const Tensor& t) {
  const auto* begin = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(begin, begin + t.nbytes());
}

void ExpectClose(const Tensor& got, const Tensor& want, DType dtype,
                 const std::string& context) {
  const auto tolerance = testing::ToleranceFor(dtype);
  EXPECT_TRUE(AllClose(*got.To(DType::kF64), *want.To(DType::kF64),
                       4 * tolerance.rtol, 4 * tolerance.atol))
      << context;
}

TEST(NormBodyTest, DeviceCombinationMatchesTheCpuKernel) {
  std::mt19937 rng(4);
  for (DType dtype : testing::kFloatDTypes) {
    for (bool layer_norm : {false, true}) {
      // More rows than chunks, with an uneven last chunk; an offset mean.
      const Tensor x =
          RandomTensor({5, 29, 40}, dtype, Layout::kContiguous, rng, 1, 4);
      const Tensor g =
          RandomTensor({5, 29, 40}, dtype, Layout::kContiguous, rng);
      const Tensor w =
          RandomTensor({40}, dtype, Layout::kContiguous, rng, 0.5, 2);
      const Tensor b = RandomTensor({40}, dtype, Layout::kContiguous, rng);
      const NormGrads cpu = layer_norm ? *LayerNormBackward(x, w, b, g, 1e-5)
                                       : *RmsNormBackward(x, w, g, 1e-5);
      for (int lanes : {1, 8}) {
        const std::string context = absl::StrCat(
            std::string(DTypeName(dtype)),
            layer_norm ? " layer_norm" : " rms_norm", " lanes ", lanes);
        NormGrads host;
        DispatchFloatingBodyStorage(dtype, [&](auto tag) {
          host =
              HostNormBackward<decltype(tag)>(x, g, w, 1e-5, layer_norm, lanes);
        });
        if (lanes == 1) {
          EXPECT_EQ(Bytes(host.dx), Bytes(cpu.dx)) << context;
        } else {
          ExpectClose(host.dx, cpu.dx, dtype, context + " dx");
        }
        ExpectClose(host.dweight, cpu.dweight, dtype, context + " dweight");
        if (layer_norm) {
          ExpectClose(host.dbias, cpu.dbias, dtype, context + " dbias");
        }
      }
    }
  }
}

TEST(NormBodyTest, WithoutAWeightTheWeightIsOne) {
  std::mt19937 rng(5);
  const Tensor x = RandomTensor({6, 9}, DType::kF32, Layout::kContiguous, rng);
  const Tensor g = RandomTensor({6, 9}, DType::kF32, Layout::kContiguous, rng);
  const NormGrads none = HostNormBackward<float>(x, g, Tensor(), 1e-5,
                                                 /*layer_norm=*/true, 1);
  const NormGrads ones = HostNormBackward<float>(
      x, g, *Tensor::Ones({9}, DType::kF32), 1e-5, /*layer_norm=*/true, 1);
  EXPECT_EQ(Bytes(none.dx), Bytes(ones.dx));
}

}  // namespace
}  // namespace dtensor::cuda
