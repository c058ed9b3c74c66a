#!/usr/bin/env python3
"""Puts the output of chat_waiters_test.py --strict (its measurement lines) into the
<!-- waiters:begin --> ... <!-- waiters:end --> section of docs/BENCHMARKS.md, replacing an
older one or appending it.

  usage: waiters_report.py OUTPUT_FILE BENCHMARKS_MD
"""

import datetime
import sys

BEGIN, END = "<!-- waiters:begin -->", "<!-- waiters:end -->"


def main():
    out_file, md = sys.argv[1], sys.argv[2]
    with open(out_file, encoding="utf-8", errors="replace") as f:
        lines = [l.rstrip() for l in f if l.startswith(("nginx:", "embedded HTTP:", "FAIL", "PASS"))]
    section = [BEGIN, "## 10,000 parked long-polls", "",
               "`tests/integration/chat/chat_waiters_test.py --count 10000 --strict`, run by "
               "`scripts/bench --waiters` (or a full `scripts/bench`) on %s. Goals: delivery p99 <= 500 ms, other pages p99 <= 20 ms, "
               "<= 4 KiB of kagi heap per parked request; FAIL names the first goal missed." %
               datetime.date.today().isoformat(), "", "```"] + lines + ["```", END]
    with open(md, encoding="utf-8") as f:
        text = f.read()
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(section) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(section) + "\n"
    with open(md, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
