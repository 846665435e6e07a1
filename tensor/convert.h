#ifndef DTENSOR_TENSOR_CONVERT_H_
#define DTENSOR_TENSOR_CONVERT_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dtensor/tensor/dispatch.h"
#include "dtensor/tensor/half.h"

namespace dtensor {

// Converts one element between the storage types of two DTypes, as torch
// converts: anything to bool is `!= 0` (NaN is true), bf16/f16 go through
// float, floats to integers truncate toward zero. Where C++ leaves a
// float-to-integer conversion undefined, this one is defined: NaN gives 0 and
// out-of-range values saturate.
// Requires: To and From among float, double, BFloat16, Half, int32_t,
// int64_t, bool.
template <typename To, typename From>
To ConvertValue(From value) {
  using Wide = ComputeType<From>;
  const Wide wide = static_cast<Wide>(value);
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return wide != Wide(0);
  } else if constexpr (std::is_same_v<To, BFloat16> ||
                       std::is_same_v<To, Half>) {
    return To(static_cast<float>(wide));
  } else if constexpr (std::is_integral_v<To> &&
                       std::is_floating_point_v<Wide>) {
    // 2^31 or 2^63, exactly representable as double.
    constexpr double kLimit =
        static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    const double x = static_cast<double>(wide);
    if (std::isnan(x)) return 0;
    if (x >= kLimit) return std::numeric_limits<To>::max();
    if (x <= -kLimit) return std::numeric_limits<To>::min();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(wide);
  }
}

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_CONVERT_H_
