#!/usr/bin/env python3
"""Lists function bodies longer than N lines (default 80) in the C++ sources.

The style rule (docs/architecture.md): a function over ~80 lines is split into
named steps. Counts namespace-scope definitions (free functions and members
defined out of class) from the first line of the signature to the closing
brace; skips tests/ unless --all. Usage, from the repository root:
.ci/long_functions.py [N] [--all]
"""
import re
import subprocess
import sys


def strip(line):
    line = re.sub(r'//.*', '', line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return re.sub(r"'(\\.|[^'\\])*'", "''", line)


def long_functions(path, limit):
    lines = open(path).read().split('\n')
    scopes, start = [], None
    for i, raw in enumerate(lines):
        text = strip(raw)
        for ch in text:
            if ch == '{':
                # The statement the brace opens starts after the previous
                # blank line, declaration, brace, comment or directive.
                j = i
                while j > 0:
                    prev = lines[j - 1].strip()
                    if (not prev or prev.endswith((';', '}', '{')) or
                            prev.startswith(('//', '#'))):
                        break
                    j -= 1
                head = ' '.join(strip(l).strip() for l in lines[j:i + 1])
                head = re.sub(r'^template\s*<[^{]*?>\s*', '', head)
                if re.match(r'(namespace|extern "C")', head):
                    kind = 'namespace'
                elif re.match(r'(class|struct|union|enum)\b', head):
                    kind = 'class'
                else:
                    kind = 'block'
                if kind == 'block' and start is None and all(
                        k == 'namespace' for k in scopes):
                    start = (j, len(scopes))
                scopes.append(kind)
            elif ch == '}':
                if scopes:
                    scopes.pop()
                if start is not None and len(scopes) == start[1]:
                    length = i - start[0] + 1
                    if length > limit:
                        yield length, start[0] + 1, lines[start[0]].strip()
                    start = None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    limit = int(args[0]) if args else 80
    everything = '--all' in sys.argv
    files = subprocess.run(['git', 'ls-files', '*.cc', '*.h', '*.cu'],
                           capture_output=True, text=True).stdout.split()
    rows = []
    for path in files:
        if not everything and path.startswith('tests/'):
            continue
        for length, line, signature in long_functions(path, limit):
            rows.append((length, f'{path}:{line}', signature[:70]))
    for length, where, signature in sorted(rows, reverse=True):
        print(f'{length:5d} {where} {signature}')


if __name__ == '__main__':
    main()
