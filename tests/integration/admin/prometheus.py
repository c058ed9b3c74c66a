"""A strict parser for the Prometheus text exposition format (version 0.0.4), for tests.

parse(text) returns {family: {"type": t, "help": h, "samples": [(name, labels, value)]}} and
raises ValueError naming the line for anything the format does not allow: unknown line
shapes, bad metric or label names, bad escapes, duplicate TYPE, a sample before its TYPE or of
a family with another type, duplicate series, non-cumulative or unterminated histograms.
"""

import math
import re

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def _value(text, where):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", text):
        raise ValueError("%s: bad value %r" % (where, text))
    return float(text)


def _labels(text, where):
    """Parses 'a="x",b="y"' (the part between braces)."""
    labels, i = {}, 0
    while i < len(text):
        m = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"").match(text, i)
        if not m:
            raise ValueError("%s: bad label at %r" % (where, text[i:]))
        name, i, value = m.group(1), m.end(), ""
        while True:
            if i >= len(text):
                raise ValueError("%s: unterminated label value" % where)
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in ("\\", "\"", "n"):
                    raise ValueError("%s: bad escape \\%s" % (where, nxt))
                value += "\n" if nxt == "n" else nxt
                i += 2
            elif c == "\"":
                i += 1
                break
            elif c == "\n":
                raise ValueError("%s: raw line feed in label" % where)
            else:
                value += c
                i += 1
        if name in labels:
            raise ValueError("%s: duplicate label %s" % (where, name))
        labels[name] = value
        if i < len(text):
            if text[i] != ",":
                raise ValueError("%s: expected ',' at %r" % (where, text[i:]))
            i += 1
    return labels


def _family_of(name, families):
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and base in families and families[base]["type"] in ("histogram", "summary"):
            return base
    return name


def parse(text):
    if not text.endswith("\n"):
        raise ValueError("the exposition must end with a line feed")
    families, seen = {}, set()
    for number, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d" % number
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.match(name):
                    raise ValueError("%s: bad metric name %r" % (where, name))
                fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
                if parts[1] == "TYPE":
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ValueError("%s: bad TYPE line" % where)
                    if fam["type"] is not None or fam["samples"]:
                        raise ValueError("%s: TYPE for %s repeated or after samples" % (where, name))
                    fam["type"] = parts[3]
                else:
                    if fam["help"] is not None:
                        raise ValueError("%s: HELP for %s repeated" % (where, name))
                    fam["help"] = parts[3] if len(parts) == 4 else ""
            continue  # other comments are allowed
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?", line)
        if not m:
            raise ValueError("%s: not a sample line: %r" % (where, line))
        name, labels = m.group(1), _labels(m.group(3) or "", where)
        value = _value(m.group(4), where)
        family = _family_of(name, families)
        fam = families.get(family)
        if fam is None or fam["type"] is None:
            raise ValueError("%s: sample %s before its TYPE" % (where, name))
        if fam["type"] == "counter" and (not name.endswith("_total") or value < 0):
            raise ValueError("%s: counter %s must end in _total and be >= 0" % (where, name))
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ValueError("%s: duplicate series %r" % (where, key))
        seen.add(key)
        fam["samples"].append((name, labels, value))
    for family, fam in families.items():
        if fam["type"] == "histogram":
            _check_histogram(family, fam["samples"])
    return families


def _check_histogram(family, samples):
    series = {}
    for name, labels, value in samples:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if name == family + "_bucket":
            if "le" not in labels:
                raise ValueError("%s: bucket without le" % family)
            s["buckets"].append((_value(labels["le"], family + " le"), value))
        elif name == family + "_sum":
            s["sum"] = value
        elif name == family + "_count":
            s["count"] = value
        else:
            raise ValueError("%s: unexpected sample %s in a histogram" % (family, name))
    for rest, s in series.items():
        bounds = [b for b, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if not bounds or bounds[-1] != math.inf:
            raise ValueError("%s%r: no +Inf bucket" % (family, rest))
        if bounds != sorted(bounds) or counts != sorted(counts):
            raise ValueError("%s%r: buckets not increasing / cumulative" % (family, rest))
        if s["count"] is None or s["sum"] is None or s["count"] != counts[-1]:
            raise ValueError("%s%r: _count missing or not equal to the +Inf bucket" % (family, rest))
