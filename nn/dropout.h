#ifndef DTENSOR_NN_DROPOUT_H_
#define DTENSOR_NN_DROPOUT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/dtensor.h"
#include "dtensor/nn/module.h"

namespace dtensor {
namespace nn {

// In training mode, zeroes each element with probability p and scales the
// others by 1 / (1 - p) (ops::Dropout: the mask depends on the element's
// global position, never on the sharding); in evaluation mode, or with p = 0,
// returns its input. Each call draws fresh numbers: the stream of `seed` is
// consumed from `offset()`, which advances by the input's element count.
class Dropout : public Module {
 public:
  // Errors: p outside [0, 1].
  static absl::StatusOr<std::unique_ptr<Dropout>> Create(double p,
                                                         uint64_t seed);

  absl::string_view type_name() const override { return "Dropout"; }
  double p() const { return p_; }
  uint64_t seed() const { return seed_; }
  // The position in the stream of the next call's first element.
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }

 protected:
  absl::StatusOr<DTensor> Forward(const DTensor& x) override;
  std::string ExtraRepr() const override;

 private:
  Dropout(double p, uint64_t seed) : p_(p), seed_(seed) {}

  double p_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

}  // namespace nn
}  // namespace dtensor

#endif  // DTENSOR_NN_DROPOUT_H_
