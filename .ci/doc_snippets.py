#!/usr/bin/env python3
"""Checks that the C++ snippets of the docs are compiled code.

The snippets checked: every ```cpp block of docs/testing.md, and those of
docs/parallel.md's section "Your own model". Each must name, in the paragraph
just before or just after it, a source file (a path ending in .cc: a test or
an example) that holds every code line of the block: the line, stripped of indentation and of a trailing // comment, must
occur in the file (as a stripped line or inside one). Comment-only lines and
#include lines are not checked. Prints each line that is missing and exits 1;
a snippet edited in the docs but not in its test (or the reverse) fails CI.
"""
import pathlib
import re
import sys

# (doc, the heading of the one section checked, or None for the whole doc)
DOCS = [("docs/testing.md", None),
        ("docs/parallel.md", "## Your own model")]
SOURCE_PATH = re.compile(r"`([\w./-]+\.cc)`")


def code_lines(block):
    for line in block.splitlines():
        text = re.sub(r"\s+//.*$", "", line).strip()
        if not text or text.startswith("//") or text.startswith("#include"):
            continue
        yield text


def normalized(text):
    return re.sub(r"\s+", " ", text)


def section(text, heading):
    """The part of `text` from `heading` to the next heading of its level."""
    if heading is None:
        return text
    start = text.index(heading + "\n")
    level = heading.split(" ")[0] + " "
    end = text.find("\n" + level, start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    failures = 0
    for doc, heading in DOCS:
        text = section((root / doc).read_text(), heading)
        parts = re.split(r"```cpp\n(.*?)```", text, flags=re.S)
        # parts: prose, code, prose, code, ..., prose
        for i in range(1, len(parts), 2):
            around = parts[i - 1].strip().split("\n\n")[-1] + "\n" + \
                parts[i + 1].strip().split("\n\n")[0]
            paths = SOURCE_PATH.findall(around)
            if not paths:
                print(f"{doc}: snippet {i // 2 + 1} names no *.cc beside it")
                failures += 1
                continue
            source = normalized((root / paths[0]).read_text())
            for line in code_lines(parts[i]):
                if normalized(line) not in source:
                    print(f"{doc}: snippet {i // 2 + 1}: not in {paths[0]}: {line}")
                    failures += 1
    print(f"doc_snippets: {failures} missing line(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
