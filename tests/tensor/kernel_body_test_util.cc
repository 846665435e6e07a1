#include "tests/tensor/kernel_body_test_util.h"

#include <cstdint>
#include <vector>

namespace dtensor::cuda::body_testing {

std::vector<uint8_t> Bytes(const Tensor& t) {
  const Tensor c = t.Contiguous();
  const auto* begin = static_cast<const uint8_t*>(c.raw_data());
  return std::vector<uint8_t>(begin, begin + c.nbytes());
}

}  // namespace dtensor::cuda::body_testing
