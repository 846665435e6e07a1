"""cc_library for the library's layers, whose headers are served as dtensor/...

The layers are folders at the repository root (base/, tensor/, mesh/,
collectives/, ops/, nn/, parallel/, testing/), beside dtensor/ (the DTensor
layer itself), yet every header is included as "dtensor/<path>": one prefix,
so that no header collides with a user's tensor/ or ops/ (docs/architecture.md).
"""

# The root folders whose headers are included under the "dtensor/" prefix.
LAYER_FOLDERS = [
    "base",
    "collectives",
    "mesh",
    "nn",
    "ops",
    "parallel",
    "tensor",
    "testing",
]

def dtensor_include_prefix():
    """"dtensor/<package>" in a layer folder's packages, None elsewhere.

    Bazel serves a header `h` of package `p` with include_prefix `x` as
    "x/h", so the prefix carries the package's path.
    """
    package = native.package_name()
    if package.split("/")[0] in LAYER_FOLDERS:
        return "dtensor/" + package
    return None

def dtensor_library(name, **kwargs):
    """A cc_library whose headers are included as dtensor/<path> in a layer."""
    native.cc_library(
        name = name,
        include_prefix = dtensor_include_prefix(),
        **kwargs
    )

def library_with_deps(common_deps, name, deps = [], **kwargs):
    """A dtensor_library depending on `common_deps` besides its own `deps`.

    A package whose libraries all build on the same targets lists them once
    (nn: NN_DEPS; tools: SUBCOMMAND_DEPS) and passes the list here.
    """
    dtensor_library(name = name, deps = common_deps + deps, **kwargs)
