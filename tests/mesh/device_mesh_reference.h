#ifndef DTENSOR_TESTS_MESH_DEVICE_MESH_REFERENCE_H_
#define DTENSOR_TESTS_MESH_DEVICE_MESH_REFERENCE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/mesh/device_mesh.h"
#include "gtest/gtest.h"

// A brute-force row-major reference of DeviceMesh for the mesh tests, and the
// check of a DeviceMesh against it.
namespace dtensor::mesh_testing {

using Groups = std::vector<std::vector<int64_t>>;

// DeviceMesh::Create's mesh; a test failure if it fails.
DeviceMesh Mesh(std::vector<int64_t> shape, std::vector<std::string> names = {},
                std::vector<int64_t> ranks = {});

// `result`'s value; a test failure if it is an error.
template <typename T>
T Ok(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return *std::move(result);
}

// The reference: a shape, names, and the rank at each row-major coordinate.
struct RefMesh {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int64_t> ranks;
};

// The number of elements of `shape`.
int64_t Count(const std::vector<int64_t>& shape);

// The indices of the dims `names` of `ref`.
std::vector<int64_t> RefDims(const RefMesh& ref,
                             const std::vector<std::string>& names);

// `ref` with `dim` cut down to `rank`'s coordinate (size 1).
RefMesh RefPinned(const RefMesh& ref, int64_t dim, int64_t rank);

// The sub-mesh over dims `names` that holds `rank`.
RefMesh RefSlice(const RefMesh& ref, int64_t rank,
                 const std::vector<std::string>& names);

// The merged dim sits where names[0] was; its index is row-major over names.
RefMesh RefFlatten(const RefMesh& ref, const std::vector<std::string>& names,
                   const std::string& new_name);

// Splitting a dim row-major keeps the row-major order of all coordinates.
RefMesh RefUnflatten(const RefMesh& ref, const std::string& name,
                     const std::vector<int64_t>& sizes,
                     const std::vector<std::string>& names);

// Expects `mesh` to agree with `ref`: names, shape, ranks, coordinates, and
// groups along every selection of dims.
void ExpectMatches(const DeviceMesh& mesh, const RefMesh& ref);

}  // namespace dtensor::mesh_testing

#endif  // DTENSOR_TESTS_MESH_DEVICE_MESH_REFERENCE_H_
