"""The repositories dtensor builds with, for its own WORKSPACE and for users'.

A workspace that uses dtensor declares it and then calls the macro:

    local_repository(name = "dtensor", path = "/path/to/dtensor")
    load("@dtensor//:dependencies.bzl", "dtensor_dependencies")
    dtensor_dependencies()

Everything comes from the machine (Debian's packages, /usr/local/cuda); no
download. A repository the calling workspace declared before the call (for
example upstream Abseil as `com_google_absl`, whose labels dtensor uses) is
kept, so the user's version wins.
"""

load("//third_party:absl.bzl", "debian_absl")

def _dtensor_directory(repository_ctx, relative):
    directory = repository_ctx.path(Label("//:BUILD.bazel")).dirname
    for name in relative.split("/"):
        directory = directory.get_child(name)
    return directory

def _stand_in_impl(repository_ctx):
    directory = _dtensor_directory(repository_ctx, repository_ctx.attr.directory)
    for child in directory.readdir():
        repository_ctx.symlink(child, child.basename)

# Bazel asks for rules_cc, rules_java and remote_coverage_tools itself; offline,
# these stand-ins (third_party/bazel/) re-export its native rules.
_stand_in = repository_rule(
    implementation = _stand_in_impl,
    attrs = {"directory": attr.string(mandatory = True)},
    local = True,
)

def _declare(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def _debian_package(name, build_file):
    _declare(
        native.new_local_repository,
        name,
        build_file = str(Label("//third_party:" + build_file)),
        path = "/usr",
    )

def dtensor_dependencies():
    """Declares every repository dtensor's targets use that is not yet declared."""
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        _declare(_stand_in, name, directory = "third_party/bazel/" + name)
    _declare(debian_absl, "com_google_absl")
    _debian_package("com_google_googletest", "googletest.BUILD")
    _debian_package("com_google_benchmark", "benchmark.BUILD")
    _debian_package("openblas", "openblas.BUILD")
    _debian_package("gloo", "gloo.BUILD")
    _debian_package("nlohmann_json", "nlohmann_json.BUILD")
    _declare(
        native.new_local_repository,
        "local_cuda",
        build_file = str(Label("//third_party:cuda.BUILD")),
        path = "/usr/local/cuda",
    )
