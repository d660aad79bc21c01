#!/usr/bin/env python3
"""The shape of the Rust sources: files and functions over their size limits.

A source file may hold at most MAX_FILE_LINES lines, not counting the unit
tests at its end (`#[cfg(test)] mod tests`); a function at most
MAX_FN_LINES, from its `fn` line to its closing brace. The integration
tests (`tests/` folders) have limits of their own, looser because a test
states its whole case: a file at most MAX_TEST_FILE_LINES, a function (a
test or a helper of the kits) at most MAX_TEST_FN_LINES. Prints every file
and function over its limit, and the largest of each, and exits 1 if any is
over.

Reads rustfmt's layout: an item's closing brace stands alone at the
indentation of the line that opened it.
"""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FN_LINES = 80
MAX_TEST_FILE_LINES = 800
MAX_TEST_FN_LINES = 130
ROOTS = ["src", "testkit/src", "model/src", "bench/src", "scale/src", "chaos/src", "generate/src", "domain/src", "examples"]
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
TESTS = re.compile(r"^#\[cfg\(test\)\]\s*$")


def sources(repo):
    for root in ROOTS:
        for folder, dirs, files in os.walk(os.path.join(repo, root)):
            dirs[:] = sorted(d for d in dirs if d != "tests")
            for name in sorted(files):
                if name.endswith(".rs"):
                    yield os.path.join(folder, name)


def test_sources(repo):
    """The integration tests: every `tests/` folder of the workspace."""
    for folder, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in ("target", ".git", "node_modules"))
        parts = os.path.relpath(folder, repo).split(os.sep)
        if "tests" not in parts:
            continue
        for name in sorted(files):
            if name.endswith(".rs"):
                yield os.path.join(folder, name)


def code_lines(lines):
    """The lines before the file's unit-test module, if it ends with one."""
    for i, line in enumerate(lines):
        if TESTS.match(line) and i + 1 < len(lines) and lines[i + 1].startswith("mod tests"):
            return lines[:i]
    return lines


def functions(lines):
    """(name, first line, length) of each function with a body."""
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        indent = m.group(1)
        # The signature may run over several lines; a `;` before `{` is a
        # declaration without a body (a trait's).
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= len(lines) or "{" not in lines[j]:
            continue
        if lines[j].rstrip().endswith("}") and lines[j].count("{") == lines[j].count("}"):
            yield m.group(8), i + 1, j - i + 1
            continue
        close = indent + "}"
        for k in range(j + 1, len(lines)):
            if lines[k].rstrip() == close:
                yield m.group(8), i + 1, k - i + 1
                break


def measure(repo, paths, max_file, max_fn, whole):
    """(files and functions over the limits, the largest file, the largest
    function) of `paths`; `whole`: count the unit tests at a file's end."""
    over = 0
    biggest_file = (0, "")
    biggest_fn = (0, "")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        code = lines if whole else code_lines(lines)
        rel = os.path.relpath(path, repo)
        n = len(code)
        biggest_file = max(biggest_file, (n, rel))
        if n > max_file:
            over += 1
            print(f"file over {max_file} lines: {rel}: {n}")
        for name, line, length in functions(code):
            biggest_fn = max(biggest_fn, (length, f"{rel}:{line} {name}"))
            if length > max_fn:
                over += 1
                print(f"function over {max_fn} lines: {rel}:{line} {name}: {length}")
    return over, biggest_file, biggest_fn


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    over = 0
    for what, paths, max_file, max_fn, whole in [
        ("sources", sources(repo), MAX_FILE_LINES, MAX_FN_LINES, False),
        ("tests", test_sources(repo), MAX_TEST_FILE_LINES, MAX_TEST_FN_LINES, True),
    ]:
        n, biggest_file, biggest_fn = measure(repo, paths, max_file, max_fn, whole)
        over += n
        print(f"{what}: largest file: {biggest_file[1]} ({biggest_file[0]} lines); largest function: {biggest_fn[1]} ({biggest_fn[0]} lines)")
    print(f"{over} over the limits")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
