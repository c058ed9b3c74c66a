"""Lists the skipped test cases in the XML reports GoogleTest wrote to a folder
(GTEST_OUTPUT=xml:DIR/), one line each: "gtest <binary>: <Suite.Case> (<reason>)".
A report whose binary ran no test case at all is listed too. Used by scripts/test."""

import os
import sys
import xml.etree.ElementTree as ET


def main(folder):
    if not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".xml"):
            continue
        binary = name[:-4]
        try:
            root = ET.parse(os.path.join(folder, name)).getroot()
        except ET.ParseError as exc:
            print("gtest %s: unreadable report (%s)" % (binary, exc))
            continue
        cases = root.findall(".//testcase")
        ran = [c for c in cases if c.get("status", "run") == "run"]
        if not ran:
            print("gtest %s: no test case ran" % binary)
        for case in ran:
            skip = case.find("skipped")
            if skip is not None or case.get("result") == "skipped":
                reason = (skip.get("message") if skip is not None else "") or ""
                reason = reason.strip().splitlines()[-1] if reason.strip() else "no reason given"
                print("gtest %s: %s.%s (%s)" % (binary, case.get("classname"), case.get("name"),
                                                 reason))


if __name__ == "__main__":
    main(sys.argv[1])
