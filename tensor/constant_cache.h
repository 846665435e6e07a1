#ifndef DTENSOR_TENSOR_CONSTANT_CACHE_H_
#define DTENSOR_TENSOR_CONSTANT_CACHE_H_

#include <cstdint>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "dtensor/base/mutex.h"
#include "dtensor/tensor/tensor.h"

namespace dtensor {

// Values made once per key and kept, for the constant tensors a training step
// would otherwise compute on the host and copy to the device on every call
// (rotary angle tables, class ranges): the copy waits for the device's
// stream. Thread-safe (in-process ranks share it). Make a cache a leaked
// static (`static auto* cache = new ConstantCache<...>`): device tensors must
// not be freed after the CUDA context at exit. Cached tensors are shared:
// read-only.
template <typename Key, typename Value>
class ConstantCache {
 public:
  // The value of `key`, made by `make()` (a StatusOr<Value>) when missing; a
  // failed make caches nothing.
  template <typename Make>
  absl::StatusOr<Value> Get(const Key& key, Make&& make) {
    MutexLock lock(&mu_);
    auto it = values_.find(key);
    if (it == values_.end()) {
      absl::StatusOr<Value> made = make();
      if (!made.ok()) return made.status();
      it = values_.emplace(key, *std::move(made)).first;
    }
    return it->second;
  }

 private:
  Mutex mu_;
  std::map<Key, Value> values_ ABSL_GUARDED_BY(mu_);
};

// first, first + 1, ..., first + length - 1 as a 1-D `dtype` tensor on
// `device`, cached per (first, length, dtype, device): shared, read-only.
// Errors: Tensor::Arange's; what Tensor::To reports.
absl::StatusOr<Tensor> CachedArange(int64_t first, int64_t length, DType dtype,
                                    Device device);

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_CONSTANT_CACHE_H_
