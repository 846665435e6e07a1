#!/usr/bin/env bash
# Installs dtensor for builds other than Bazel (docs/building.md):
#   PREFIX/include/dtensor/...           the library's headers, by their path here
#   PREFIX/lib/libdtensor.so             //:libdtensor.so, the public API (//:dtensor)
#   PREFIX/lib/cmake/dtensor/dtensorConfig.cmake   imported target dtensor::dtensor
#   PREFIX/lib/pkgconfig/dtensor.pc      pkg-config module dtensor
# Both files ask for Debian's Abseil (its CMake package, its pkg-config
# modules); Gloo's and OpenBLAS's headers are in /usr/include and the shared
# library names its libraries itself.
#
# Usage: tools/install.sh PREFIX
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: tools/install.sh PREFIX" >&2
  exit 2
fi
prefix=$(realpath -m "$1")
cd "$(dirname "$0")/.."

readonly version=0.1.0
./bazelw build //:libdtensor.so
absl_modules=$(cat "$(./bazelw info output_base)/external/com_google_absl/pkg_config_modules.txt")

mkdir -p "$prefix/include" "$prefix/lib/cmake/dtensor" "$prefix/lib/pkgconfig"
# The headers of the shared library's code, by the path they are included by
# (dtensor/<layer>/..., dtensor_library.bzl): dtensor/ as it is, each layer
# folder under include/dtensor/. The test library (testing/, GoogleTest based)
# is a Bazel target only.
git ls-files 'dtensor/*.h' | while read -r header; do
  install -D -m 0644 "$header" "$prefix/include/$header"
done
layers=$(sed -n '/^LAYER_FOLDERS = \[/,/^]/s/^ *"\([a-z_]*\)",/\1/p' dtensor_library.bzl |
  grep -vx testing)
# shellcheck disable=SC2086  # one folder a word
git ls-files $layers | grep '\.h$' |
  while read -r header; do
    install -D -m 0644 "$header" "$prefix/include/dtensor/$header"
  done
install -m 0755 bazel-bin/libdtensor.so "$prefix/lib/libdtensor.so"

absl_targets=$(sed 's/^absl_/absl::/' <<<"$absl_modules" | paste -sd ';')
cat >"$prefix/lib/cmake/dtensor/dtensorConfig.cmake" <<CMAKE
# dtensor $version, installed by tools/install.sh. Provides dtensor::dtensor.
include(CMakeFindDependencyMacro)
find_dependency(absl CONFIG)
get_filename_component(_dtensor_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET dtensor::dtensor)
  add_library(dtensor::dtensor SHARED IMPORTED)
  set_target_properties(dtensor::dtensor PROPERTIES
    IMPORTED_LOCATION "\${_dtensor_prefix}/lib/libdtensor.so"
    INTERFACE_INCLUDE_DIRECTORIES "\${_dtensor_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES "$absl_targets")
endif()
unset(_dtensor_prefix)
CMAKE
cat >"$prefix/lib/cmake/dtensor/dtensorConfigVersion.cmake" <<CMAKE
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
cat >"$prefix/lib/pkgconfig/dtensor.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: dtensor
Description: A C++ runtime for distributed tensors
Version: $version
Requires: $(paste -sd ' ' <<<"$absl_modules")
Cflags: -I\${includedir} -std=c++17
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -ldtensor
PC
echo "installed dtensor $version in $prefix"
