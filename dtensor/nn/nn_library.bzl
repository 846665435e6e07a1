"""nn_library: a library of dtensor/nn."""

# What every library of dtensor/nn builds on: DTensors and local tensors, the
# status macros, and Abseil's status and strings.
NN_DEPS = [
    "//dtensor",
    "//dtensor/base:status_macros",
    "//dtensor/tensor",
    "@com_google_absl//absl/status",
    "@com_google_absl//absl/status:statusor",
    "@com_google_absl//absl/strings",
]

def nn_library(name, deps = [], **kwargs):
    """A cc_library depending on NN_DEPS besides `deps`."""
    native.cc_library(name = name, deps = NN_DEPS + deps, **kwargs)
