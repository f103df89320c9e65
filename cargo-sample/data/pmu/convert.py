#!/usr/bin/env python3
"""Converts Arm's machine-readable PMU data into the compact tables cargo-sample ships.

Usage: convert.py DATA_CHECKOUT OUT.tsv.gz

DATA_CHECKOUT is a checkout of https://github.com/ARM-software/data; every pmu/<cpu>.json but
the schema becomes one section of OUT:

    ## <file stem>
    # cpu	<name>
    # counters	<event counters>
    # architecture	<armv8-a, ...>
    # code	name	type	architectural	description
    0x0008	INST_RETIRED	INS	y	Instruction architecturally executed
    ...

Events without a code cannot be programmed and are left out; events without a name keep an
empty one; descriptions are folded to one line.
"""
import gzip
import json
import pathlib
import sys


def code_of(e):
    c = e.get("code")
    if isinstance(c, int):
        return c if 0 <= c < 1 << 16 else None
    if isinstance(c, str):
        s = c.strip()
        try:
            return int(s, 16) if s.lower().startswith("0x") else int(s)
        except ValueError:
            return None
    return None


def one_line(s):
    return " ".join(str(s or "").split()).replace("\t", " ")


def main():
    src, out = pathlib.Path(sys.argv[1]), sys.argv[2]
    parts = []
    for path in sorted((src / "pmu").glob("*.json")):
        if path.stem == "pmu-schema":
            continue
        d = json.loads(path.read_text())
        events = {}
        for e in d.get("events", []):
            c = code_of(e)
            if c is None or c in events:
                continue
            arch = e.get("architectural")
            events[c] = "\t".join([
                f"0x{c:04x}",
                one_line(e.get("name")),
                one_line(e.get("type")),
                "y" if arch is True else "n" if arch is False else "",
                one_line(e.get("description")),
            ])
        counters = d.get("counters") if isinstance(d.get("counters"), int) else 6
        parts.append("\n".join([
            f"## {path.stem}",
            f"# cpu\t{one_line(d.get('cpu', path.stem))}",
            f"# counters\t{counters}",
            f"# architecture\t{one_line(d.get('architecture', ''))}",
            "# code\tname\ttype\tarchitectural\tdescription",
            *[events[c] for c in sorted(events)],
        ]))
    text = "\n".join(parts) + "\n"
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(text.encode())


if __name__ == "__main__":
    main()
