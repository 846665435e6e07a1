// DeviceMesh over random meshes up to 4-D against the brute-force row-major
// reference (tests/mesh/device_mesh_reference.h): slices, pinned dims,
// flattenings and unflattenings of every kind.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/mesh/device_mesh.h"
#include "gtest/gtest.h"
#include "tests/mesh/device_mesh_reference.h"

namespace dtensor {
namespace {

using ::dtensor::mesh_testing::Count;
using ::dtensor::mesh_testing::ExpectMatches;
using ::dtensor::mesh_testing::Mesh;
using ::dtensor::mesh_testing::Ok;
using ::dtensor::mesh_testing::RefDims;
using ::dtensor::mesh_testing::RefFlatten;
using ::dtensor::mesh_testing::RefMesh;
using ::dtensor::mesh_testing::RefPinned;
using ::dtensor::mesh_testing::RefSlice;
using ::dtensor::mesh_testing::RefUnflatten;

class RandomMeshes {
 public:
  explicit RandomMeshes(uint32_t seed) : rng_(seed) {}

  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  // Up to 4 dims of sizes 1..4, distinct names, distinct scattered ranks.
  RefMesh Mesh() {
    RefMesh ref;
    for (int64_t d = Int(1, 4); d > 0; --d) ref.shape.push_back(Int(1, 4));
    for (size_t d = 0; d < ref.shape.size(); ++d) {
      ref.names.push_back("m" + std::to_string(Int(0, 99)) + "_" +
                          std::to_string(d));
    }
    const int64_t count = Count(ref.shape);
    const int64_t spacing = Int(1, 3), offset = Int(0, 5);
    for (int64_t r = 0; r < count; ++r)
      ref.ranks.push_back(offset + r * spacing);
    std::shuffle(ref.ranks.begin(), ref.ranks.end(), rng_);
    return ref;
  }

  // A random non-empty selection of the names, in random order.
  std::vector<std::string> Names(const RefMesh& ref) {
    std::vector<std::string> names = ref.names;
    std::shuffle(names.begin(), names.end(), rng_);
    names.resize(Int(1, names.size()));
    return names;
  }

  // `size` split into 1..3 factors.
  std::vector<int64_t> Factors(int64_t size) {
    std::vector<int64_t> factors;
    for (int64_t n = Int(0, 2); n > 0; --n) {
      std::vector<int64_t> divisors;
      for (int64_t f = 1; f <= size; ++f) {
        if (size % f == 0) divisors.push_back(f);
      }
      const int64_t f = divisors[Int(0, divisors.size() - 1)];
      factors.push_back(f);
      size /= f;
    }
    factors.push_back(size);
    std::shuffle(factors.begin(), factors.end(), rng_);
    return factors;
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

DeviceMesh FromRef(const RefMesh& ref) {
  return Mesh(ref.shape, ref.names, ref.ranks);
}

// Unflattens a random dim of `mesh` (reference `ref`) into random factors
// named `prefix`0, `prefix`1, ... and checks the result; returns the pair.
std::pair<DeviceMesh, RefMesh> CheckRandomUnflatten(RandomMeshes& random,
                                                    const DeviceMesh& mesh,
                                                    const RefMesh& ref,
                                                    const std::string& prefix) {
  const int64_t dim = random.Int(0, ref.shape.size() - 1);
  const std::vector<int64_t> sizes = random.Factors(ref.shape[dim]);
  std::vector<std::string> names;
  for (size_t k = 0; k < sizes.size(); ++k) {
    names.push_back(prefix + std::to_string(k));
  }
  const DeviceMesh out = Ok(mesh.Unflatten(ref.names[dim], sizes, names));
  const RefMesh out_ref = RefUnflatten(ref, ref.names[dim], sizes, names);
  ExpectMatches(out, out_ref);
  return {out, out_ref};
}

TEST(DeviceMeshRandomTest, MatchesTheRowMajorReference) {
  RandomMeshes random(42);
  for (int c = 0; c < 200; ++c) {
    const RefMesh ref = random.Mesh();
    const DeviceMesh mesh = FromRef(ref);
    ExpectMatches(mesh, ref);
    ASSERT_FALSE(mesh.Contains(-1));

    // Slice at a random rank.
    const int64_t rank = ref.ranks[random.Int(0, ref.ranks.size() - 1)];
    const std::vector<std::string> slice_names = random.Names(ref);
    ExpectMatches(Ok(mesh.Slice(rank, slice_names)),
                  RefSlice(ref, rank, slice_names));

    // Pin a random dim at a random rank's coordinate, twice (the second from
    // the cache).
    if (!ref.shape.empty()) {
      const int64_t dim = random.Int(0, ref.shape.size() - 1);
      const RefMesh pinned_ref = RefPinned(ref, dim, rank);
      ExpectMatches(Ok(mesh.PinnedAt(dim, rank)), pinned_ref);
      ExpectMatches(Ok(mesh.PinnedAt(dim, rank)), pinned_ref);
    }

    // Flatten a random selection, then work on the flattened mesh.
    const std::vector<std::string> names = random.Names(ref);
    const DeviceMesh flat = Ok(mesh.Flatten(names, "flat"));
    const RefMesh flat_ref = RefFlatten(ref, names, "flat");
    ExpectMatches(flat, flat_ref);
    const int64_t flat_rank = ref.ranks[random.Int(0, ref.ranks.size() - 1)];
    const std::vector<std::string> flat_names = random.Names(flat_ref);
    ExpectMatches(Ok(flat.Slice(flat_rank, flat_names)),
                  RefSlice(flat_ref, flat_rank, flat_names));

    // Unflatten the merged dim back into the dims it came from.
    std::vector<int64_t> sizes;
    for (const std::string& name : names) {
      sizes.push_back(ref.shape[RefDims(ref, {name})[0]]);
    }
    ExpectMatches(Ok(flat.Unflatten("flat", sizes, names)),
                  RefUnflatten(flat_ref, "flat", sizes, names));

    // Unflatten random dims into random factors, twice over.
    auto [split, split_ref] = CheckRandomUnflatten(random, flat, flat_ref, "u");
    CheckRandomUnflatten(random, split, split_ref, "v");
    CheckRandomUnflatten(random, mesh, ref, "w");
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace dtensor
