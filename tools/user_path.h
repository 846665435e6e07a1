#ifndef DTENSOR_TOOLS_USER_PATH_H_
#define DTENSOR_TOOLS_USER_PATH_H_

#include <string>

namespace dtensor {

// A file path as the user typed it on the command line. `bazel run` starts
// programs in their runfiles tree, not where the user stood: a relative
// path is taken relative to BUILD_WORKING_DIRECTORY (set by `bazel run`)
// unless it names an existing file or directory from the current directory
// (the programs' own data files, such as the shipped plans). Absolute paths,
// empty paths and runs outside `bazel run` are unchanged.
std::string UserPath(const std::string& path);

}  // namespace dtensor

#endif  // DTENSOR_TOOLS_USER_PATH_H_
