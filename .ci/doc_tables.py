#!/usr/bin/env python3
"""Checks that the file tables of the docs name files of the tree.

Every backticked path in a table row ("`tensor/tensor.h`", "`reduction.h`",
"`inprocess/`", "`nn/optim*.h`", "`dtensor/nn/module.h`") must match a file or
folder: from the repository root (an include path "dtensor/<layer>/..." names
"<layer>/..."), or else, as the tables abbreviate, relative to the folder of a
path before it in the same row (the nearest first) or of a folder the document
named before the row. Prints the misses and exits 1 if there are any.
Usage, from the repository root: .ci/doc_tables.py [FILE...] (default docs/*.md)
"""
import glob
import os
import re
import sys

from check_report import report

PATH = re.compile(r'`([A-Za-z0-9_.*/-]+(?:\.(?:h|cc|cu|cuh|md|bzl|sh|py)|/|/\*))`')


# The folders whose headers are included as "dtensor/<folder>/...".
LAYER_FOLDERS = re.findall(
    r'"(\w+)"',
    re.search(r'LAYER_FOLDERS = \[(.*?)\]', open('dtensor_library.bzl').read(),
              re.S).group(1))


def in_tree(path):
    """The tree path of `path`, an include path mapped to its file."""
    head, _, rest = path.partition('/')
    if head == 'dtensor' and rest.split('/')[0] in LAYER_FOLDERS:
        return rest
    return path


def exists(path):
    return bool(glob.glob(path)) if '*' in path else os.path.exists(path)


def misses(doc):
    named = []  # folders the document named outside tables
    for number, line in enumerate(open(doc, encoding='utf-8'), 1):
        if not line.startswith('|'):
            named += [in_tree(p) for p in PATH.findall(line)
                      if p.endswith('/') and os.path.isdir(in_tree(p))]
            continue
        folders = ['']  # of the paths found in this row, the latest last
        for path in PATH.findall(line):
            path = in_tree(path)
            candidates = [os.path.join(f, path)
                          for f in list(reversed(folders)) + named[::-1]]
            found = next((c for c in candidates if exists(c)), None)
            if found is None:
                yield f'{doc}:{number}: `{path}` is not in the tree'
                continue
            folder = found if found.endswith('/') else os.path.dirname(found)
            if folder and folder not in folders:
                folders.append(folder)


def main():
    docs = sys.argv[1:] or sorted(glob.glob('docs/*.md'))
    problems = [m for doc in docs for m in misses(doc)]
    return report('doc_tables', problems, 'paths in the tables are not in the tree')


if __name__ == '__main__':
    sys.exit(main())
