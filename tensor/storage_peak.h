#ifndef DTENSOR_TENSOR_STORAGE_PEAK_H_
#define DTENSOR_TENSOR_STORAGE_PEAK_H_

#include <cstdint>

namespace dtensor {

// The most Storage::LiveBytes() reached since the last
// ResetPeakLiveStorageBytes (or the start): a step's peak of live tensor
// bytes (tests/nn/checkpoint_test.cc). Resetting sets it to LiveBytes().
// Thread-safe; every thread's storage counts (in-process ranks together).
int64_t PeakLiveStorageBytes();
void ResetPeakLiveStorageBytes();

}  // namespace dtensor

#endif  // DTENSOR_TENSOR_STORAGE_PEAK_H_
