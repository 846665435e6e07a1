// Registers colwise_gathered by name in every program this file is linked
// into (the BUILD target is alwayslink).
#include "dtensor/parallel/style_registry.h"
#include "examples/user_style/colwise_gathered.h"

namespace dtensor {
namespace examples {
namespace {

const parallel::StyleRegistration kColwiseGathered("colwise_gathered",
                                                   MakeColwiseGathered);

}  // namespace
}  // namespace examples
}  // namespace dtensor
