#ifndef DTENSOR_TENSOR_DEVICE_H_
#define DTENSOR_TENSOR_DEVICE_H_

#include <ostream>
#include <string>

namespace dtensor {

enum class DeviceType { kCPU, kCUDA };

// Where a tensor's storage lives: the CPU, or CUDA device `index`.
struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device CPU() { return Device{DeviceType::kCPU, 0}; }
  static Device CUDA(int index) { return Device{DeviceType::kCUDA, index}; }

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  // "cpu" or "cuda:<index>".
  std::string ToString() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type &&
           (a.type == DeviceType::kCPU || a.index == b.index);
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_DEVICE_H_
