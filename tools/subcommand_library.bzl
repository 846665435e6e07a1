"""subcommand_library: the library of one `dtensor` subcommand."""

# What every subcommand's file builds on: its flags (ParsedArgs), its entry
# point (DT_DEFINE_SUBCOMMAND, commands.h, whose signature takes an
# absl::Span), the status macros, and Abseil's status and strings for its
# errors.
SUBCOMMAND_DEPS = [
    "//tools:arg_parser",
    "//tools:subcommand",
    "//dtensor/base:status_macros",
    "@com_google_absl//absl/status",
    "@com_google_absl//absl/strings",
    "@com_google_absl//absl/types:span",
]

def subcommand_library(name, deps = [], **kwargs):
    """A cc_library depending on SUBCOMMAND_DEPS besides `deps`."""
    native.cc_library(name = name, deps = SUBCOMMAND_DEPS + deps, **kwargs)
