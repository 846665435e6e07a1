#!/usr/bin/env bash
# Builds and runs the consumer as a user's project would, three ways: from its
# own Bazel workspace (WORKSPACE: dtensor as a local_repository plus
# dtensor_dependencies()), with CMake against tools/install.sh's install
# (find_package(dtensor)), and with pkg-config (dtensor.pc). CI runs it
# (.ci/run). Each run prints "consumer ok".
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$root/bazelw" info release >/dev/null  # installs the Debian packages if missing

echo "--- Bazel: @dtensor//:dtensor from another workspace"
bazel run //:consumer
bazel shutdown

echo "--- CMake: find_package(dtensor) after tools/install.sh"
"$root/tools/install.sh" "$work/prefix"
cmake -S . -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake"
"$work/cmake/consumer"

echo "--- pkg-config: dtensor.pc"
# shellcheck disable=SC2046  # the flags are words
g++ -o "$work/consumer_pkg_config" main.cc -I. $(
  PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs dtensor)
"$work/consumer_pkg_config"
