"""library_with_deps: a cc_library of a package whose libraries share deps."""

def library_with_deps(common_deps, name, deps = [], **kwargs):
    """A cc_library depending on `common_deps` besides its own `deps`.

    A package whose libraries all build on the same targets lists them once
    (dtensor/nn: NN_DEPS; tools: SUBCOMMAND_DEPS) and passes the list here.
    """
    native.cc_library(name = name, deps = common_deps + deps, **kwargs)
