#include "dtensor/tensor/device.h"

namespace dtensor {

std::string Device::ToString() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& device) {
  return os << device.ToString();
}

}  // namespace dtensor
