#!/usr/bin/env python3
"""Doxygen INPUT_FILTER for kagi's headers, which are commented in plain `//` prose.

- The banner (the comment block that opens the file) becomes the file's documentation.
- A block of `//` lines right above a declaration becomes its documentation (`///`).
- Specialisations of std traits (`struct std::is_error_code_enum<...>`) are blanked: they are
  not API, and doxygen cannot place them.
- Characters doxygen would read as commands or HTML (`\\`, `@`, `<`, `>`, `&`, `#`) are
  escaped inside comments, so prose like "<kagi/lock/guard.hpp>" is shown as written.
Code lines pass through unchanged (line numbers are kept).
"""

import re
import sys

COMMENT = re.compile(r"^(\s*)//(?!/)\s?(.*)$")
STD_SPECIALISATION = re.compile(r"^struct std::\w+<.*> : .*\{\};$")


def escape(text):
    text = text.replace("\\", "\\\\")
    for ch in "@<>&#%$":
        text = text.replace(ch, "\\" + ch)
    return text


def main():
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    out = []
    in_banner = True
    for i, line in enumerate(lines):
        m = COMMENT.match(line)
        if in_banner:
            if m:
                prefix = "/** @file " if i == 0 else "    "
                out.append(prefix + escape(m.group(2)))
                continue
            if out:
                out[-1] += " */"
            in_banner = False
        if m:
            out.append(m.group(1) + "/// " + escape(m.group(2)))
        elif STD_SPECIALISATION.match(line):
            if out and out[-1] == "template <>":
                out[-1] = ""
            out.append("")
        else:
            out.append(line)
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
