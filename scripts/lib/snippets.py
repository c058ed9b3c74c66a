#!/usr/bin/env python3
"""Code blocks in a markdown file that are cut from source files, kept equal to them.

A block is marked by the comment line above it:

    <!-- snippet: examples/booking/booking.cpp#book -->
    ```cpp
    ...
    ```

`#book` names the lines between a line containing `[tutorial:book]` and the next line
containing `[end]` in that file (both marker lines left out); without `#name` the block is the
whole file. Paths are relative to the repository root.

    snippets.py --check docs/TUTORIAL.md   exit 1 naming each block that differs from its
                                           source, and each code block (other than sh) with
                                           no source
    snippets.py --write docs/TUTORIAL.md   rewrite the blocks from their sources
"""

import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARK = re.compile(r"^<!-- snippet: (\S+?)(?:#(\S+))? -->$")
FENCE = re.compile(r"^```(\S*)$")
FREE_LANGUAGES = {"sh", "console", "text", ""}


def region(path, name):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if name is None:
        return lines[:-1] if lines and lines[-1] == "" else lines
    start = [i for i, line in enumerate(lines) if "[tutorial:%s]" % name in line]
    if len(start) != 1:
        raise ValueError("%s: %d markers [tutorial:%s] (want 1)" % (path, len(start), name))
    for end in range(start[0] + 1, len(lines)):
        if "[end]" in lines[end]:
            return lines[start[0] + 1:end]
    raise ValueError("%s: [tutorial:%s] has no [end]" % (path, name))


def process(doc, write):
    with open(doc, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, problems, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence is None:
            out.append(line)
            i += 1
            continue
        close = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
        if close is None:
            problems.append("%s:%d: a code block that is never closed" % (doc, i + 1))
            out.extend(lines[i:])
            break
        body = lines[i + 1:close]
        mark = MARK.match(out[-1]) if out else None
        if mark:
            where = mark.group(1) + ("#" + mark.group(2) if mark.group(2) else "")
            try:
                want = region(mark.group(1), mark.group(2))
            except (OSError, ValueError) as e:
                problems.append("%s:%d: %s" % (doc, i + 1, e))
                want = body
            if body != want:
                problems.append("%s:%d: the block differs from %s" % (doc, i + 1, where))
                if write:
                    body = want
        elif fence.group(1) not in FREE_LANGUAGES:
            problems.append("%s:%d: a %s block with no <!-- snippet: FILE#NAME --> source"
                            % (doc, i + 1, fence.group(1)))
        out.append(line)
        out.extend(body)
        out.append("```")
        i = close + 1
    if write:
        with open(doc, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
    return problems


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("--check", "--write"):
        print(__doc__)
        return 2
    write = sys.argv[1] == "--write"
    problems = []
    for doc in sys.argv[2:]:
        problems += process(doc, write)
    for p in problems:
        print(p)
    if write:
        return 0
    print("%d snippet problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
