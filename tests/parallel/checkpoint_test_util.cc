#include "tests/parallel/checkpoint_test_util.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/collectives/inprocess/local_cluster.h"

namespace dtensor {
namespace testing {

std::string TestDirectory(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* root = std::getenv("TEST_TMPDIR");
  return absl::StrCat(root != nullptr ? root : "/tmp", "/", name, "_",
                      counter.fetch_add(1));
}

absl::StatusOr<Tensor> PatternTensor(const Shape& shape, DType dtype,
                                     int64_t salt) {
  std::vector<double> values(NumElements(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] =
        static_cast<double>((static_cast<int64_t>(i) * 7 + salt * 13) % 201) -
        100;
  }
  DT_ASSIGN_OR_RETURN(Tensor f64, Tensor::FromVector(values, shape));
  return f64.To(dtype);
}

absl::StatusOr<bool> LocalMatches(const DTensor& local, const Tensor& full) {
  DT_ASSIGN_OR_RETURN(ShardBlock block, local.LocalBlock());
  Tensor expected = full;
  for (size_t d = 0; d < block.shape.size(); ++d) {
    DT_ASSIGN_OR_RETURN(expected,
                        expected.Narrow(d, block.offset[d], block.shape[d]));
  }
  return local.ToLocal().dtype() == full.dtype() &&
         local.ToLocal().shape() == expected.shape() &&
         local.ToLocal().ToVector<double>().value() ==
             expected.ToVector<double>().value();
}

std::vector<absl::Status> RunRanks(
    int64_t world_size,
    const std::function<absl::Status(std::shared_ptr<Runtime>)>& fn) {
  return LocalCluster(world_size).RunPerRank([&](ProcessGroups& groups) {
    return fn(Runtime::ForRank(groups));
  });
}

absl::StatusOr<nn::StateDict> DistributeCases(
    std::shared_ptr<Runtime> runtime, const DeviceMesh& mesh,
    const std::vector<TensorCase>& cases) {
  nn::StateDict state;
  for (const TensorCase& c : cases) {
    DT_ASSIGN_OR_RETURN(
        state[c.key],
        DTensor::Distribute(runtime, c.full, mesh, c.placements, c.order));
  }
  return state;
}

DeviceMesh RandomMesh(int64_t size, std::mt19937& rng) {
  const int ndim = std::uniform_int_distribution<int>(1, 3)(rng);
  std::vector<int64_t> shape;
  int64_t left = size;
  for (int d = 0; d + 1 < ndim; ++d) {
    std::vector<int64_t> divisors;
    for (int64_t k = 1; k <= left; ++k) {
      if (left % k == 0) divisors.push_back(k);
    }
    const int64_t pick = divisors[rng() % divisors.size()];
    shape.push_back(pick);
    left /= pick;
  }
  shape.push_back(left);
  std::vector<int64_t> ranks(size);
  std::iota(ranks.begin(), ranks.end(), 0);
  std::shuffle(ranks.begin(), ranks.end(), rng);
  return *DeviceMesh::Create(shape, {}, ranks);
}

void RandomSharding(const DeviceMesh& mesh, int64_t tensor_rank,
                    bool allow_partial, std::mt19937& rng,
                    std::vector<Placement>& placements, ShardOrder& order) {
  placements.clear();
  order.assign(tensor_rank, {});
  for (int64_t d = 0; d < mesh.ndim(); ++d) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (tensor_rank > 0 && kind < 5) {
      const int64_t dim = rng() % tensor_rank;
      placements.push_back(Placement::Shard(dim));
      order[dim].push_back(d);
    } else if (allow_partial && kind == 9) {
      placements.push_back(Placement::Partial());
    } else {
      placements.push_back(Placement::Replicate());
    }
  }
  for (std::vector<int64_t>& dims : order) {
    if (rng() % 2 == 0) std::reverse(dims.begin(), dims.end());
  }
}

}  // namespace testing
}  // namespace dtensor
