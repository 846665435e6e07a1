#include "dtensor/tensor/constant_cache.h"

#include <tuple>

#include "dtensor/base/status_macros.h"

namespace dtensor {

absl::StatusOr<Tensor> CachedArange(int64_t first, int64_t length, DType dtype,
                                    Device device) {
  // (first, length, dtype, device type, device index).
  using Key = std::tuple<int64_t, int64_t, int, int, int>;
  static auto* const cache = new ConstantCache<Key, Tensor>();
  const Key key{first, length, static_cast<int>(dtype),
                static_cast<int>(device.type), device.index};
  return cache->Get(key, [&]() -> absl::StatusOr<Tensor> {
    const double start = static_cast<double>(first);
    DT_ASSIGN_OR_RETURN(
        const Tensor host,
        Tensor::Arange(start, start + static_cast<double>(length), 1, dtype));
    return host.To(device);
  });
}

}  // namespace dtensor
