#!/usr/bin/env python3
"""The documentation's links: every relative link and every `#anchor` resolves.

Reads README.md, every Markdown file under docs/, the other Markdown
files at the top of the repository (CHANGELOG.md) and those beside the
code (the chart's, the test kit's fixtures', ...), leaving out build
output (target/) and hidden folders. In each, every link
`[text](target)`, `[text](target "title")`, and reference definition
`[name]: target` whose target is not a URL (`http:`, `mailto:`, ...) must
name a file or folder that exists, relative to the file that links; a
`#anchor` must name a heading of the file it points into (or of the same
file), by GitHub's rule: the heading's text as rendered, lowercased, every
character that is not a letter, a digit, a space, `-` or `_` dropped,
spaces turned into `-`, and a repeated heading suffixed `-1`, `-2`, ...
(an HTML `id="..."` or `name="..."` counts as an anchor too). Links in
code blocks and inline code are not links and are not read.

The README is the front door and stays one: it may hold at most
README_MAX_LINES lines; the reference belongs in docs/.

Prints every broken link with its file and line, and exits 1 if there is
any (or if the README is too long); 0 otherwise.
"""
import os
import re
import sys
import urllib.parse

README_MAX_LINES = 250
SKIPPED = {"target", "node_modules"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"""<[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']""")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def documents():
    """The Markdown files read, relative to the repository."""
    names = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED)
        names += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(files) if n.endswith(".md")]
    return names


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def without_code(line):
    """The line with its inline code spans blanked out."""
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's Markdown text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """Every anchor a Markdown file offers."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        for _, line in prose_lines(text):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            found.update(HTML_ANCHOR.findall(line))
        cache[path] = found
    return cache[path]


def targets(text):
    """(line number, target) of every link in a Markdown text."""
    for number, line in prose_lines(text):
        line = without_code(line)
        for m in LINK.finditer(line):
            yield number, m.group(1)
        m = DEFINITION.match(line)
        if m:
            yield number, m.group(1)


def broken(document):
    """(line number, target, why) of each link of `document` that does not resolve."""
    path = os.path.join(ROOT, document)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, target in targets(text):
        if not target or URL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part)
        if file_part:
            if file_part.startswith("/"):
                resolved = os.path.join(ROOT, file_part.lstrip("/"))
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(resolved):
                yield number, target, "no such file"
                continue
        else:
            resolved = path
        if not anchor:
            continue
        if os.path.isdir(resolved) or not resolved.endswith(".md"):
            continue  # a line anchor of a source file, or a folder: not checked
        if urllib.parse.unquote(anchor) not in anchors(resolved):
            yield number, target, f"no heading #{anchor} in {os.path.relpath(resolved, ROOT)}"


def main():
    errors = []
    checked = 0
    for document in documents():
        for number, target, why in broken(document):
            errors.append(f"{document}:{number}: ({target}) {why}")
        checked += 1
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme_lines = len(f.read().splitlines())
    if readme_lines > README_MAX_LINES:
        errors.append(
            f"README.md: {readme_lines} lines, more than {README_MAX_LINES}: "
            "the README is the front door; move reference material into docs/"
        )
    for error in errors:
        print(error)
    if errors:
        print(f"links: {len(errors)} problem(s) in {checked} Markdown files")
        return 1
    print(f"links: every relative link and anchor of {checked} Markdown files resolves; "
          f"README.md has {readme_lines} lines (at most {README_MAX_LINES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
