#!/usr/bin/env python3
"""Checks that every C++ target depends on the Abseil targets it includes.

dtensor's BUILD files name Abseil by upstream Abseil's labels
(third_party/absl.bzl), so that they build against upstream Abseil in a
user's workspace. Debian's headers are on the system include path, so a
missing Abseil dependency compiles here and fails only there; this finds it.
Reads `bazel query --output=xml` of the C++ rules; prints each target whose
sources include an Abseil header of a target it does not depend on, and exits
1 if there is one. Usage, from the repository root:

  ./bazelw query --output=xml 'kind("cc_(library|binary|test)", //...)' |
    python3 .ci/absl_deps.py
"""

import re
import sys
import xml.etree.ElementTree as ElementTree

from check_report import report

# Upstream Abseil's target for a header; a directory's headers not listed
# belong to the target named after the directory (absl/strings/str_cat.h:
# //absl/strings).
TARGET_OF_HEADER = {
    "absl/algorithm/container.h": "absl/algorithm:container",
    "absl/base/attributes.h": "absl/base:core_headers",
    "absl/base/thread_annotations.h": "absl/base:core_headers",
    "absl/container/btree_map.h": "absl/container:btree",
    "absl/container/btree_set.h": "absl/container:btree",
    "absl/container/fixed_array.h": "absl/container:fixed_array",
    "absl/container/flat_hash_map.h": "absl/container:flat_hash_map",
    "absl/container/flat_hash_set.h": "absl/container:flat_hash_set",
    "absl/container/inlined_vector.h": "absl/container:inlined_vector",
    "absl/functional/function_ref.h": "absl/functional:function_ref",
    "absl/status/statusor.h": "absl/status:statusor",
    "absl/strings/str_format.h": "absl/strings:str_format",
    "absl/types/span.h": "absl/types:span",
    "absl/types/optional.h": "absl/types:optional",
    "absl/types/variant.h": "absl/types:variant",
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](absl/[^">]+)[">]', re.M)


def required_target(header):
    if header in TARGET_OF_HEADER:
        return TARGET_OF_HEADER[header]
    directory = header.rsplit("/", 1)[0]
    return directory + ":" + directory.rsplit("/", 1)[1]


def normalized(label):
    """'@com_google_absl//absl/strings' -> 'absl/strings:strings'."""
    path = label.split("//", 1)[1]
    if ":" not in path:
        path += ":" + path.rsplit("/", 1)[1]
    return path


def source_path(label):
    """'//ops:dispatch.cc' -> 'dtensor/ops/dispatch.cc'."""
    package, name = label[2:].split(":", 1)
    return f"{package}/{name}" if package else name


def main():
    problems = []
    for rule in ElementTree.parse(sys.stdin).getroot().iter("rule"):
        labels = {"deps": set(), "files": set()}
        for attribute in rule.iter("list"):
            name = attribute.get("name")
            for item in attribute.iter("label"):
                value = item.get("value")
                if name == "deps" and value.startswith("@com_google_absl//"):
                    labels["deps"].add(normalized(value))
                elif name in ("srcs", "hdrs") and value.startswith("//"):
                    labels["files"].add(source_path(value))
        needed = set()
        for path in labels["files"]:
            try:
                with open(path, encoding="utf-8") as source:
                    needed.update(map(required_target, INCLUDE.findall(source.read())))
            except (FileNotFoundError, IsADirectoryError):
                continue  # a generated file or a target's label
        missing = sorted(needed - labels["deps"])
        if missing:
            problems.append(f"{rule.get('name')}: add " + ", ".join(
                f"@com_google_absl//{m}" for m in missing))
    return report("absl_deps", problems, "targets miss an Abseil dependency")


if __name__ == "__main__":
    sys.exit(main())
