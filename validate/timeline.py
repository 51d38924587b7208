#!/usr/bin/env python3
"""The graphs' time line from a qcd-solve log (QCD_SOLVE_TIMELINE=1, src/backend/cuda/timeline.rs):
for each backend in the log (`who`: "one GPU", "rank N"), the graph with the most marks
(a batch of fused CR iterations), one mark a line: microseconds from the graph's first
mark, from the previous mark on the same stream, the stream and the label.
    python3 validate/timeline.py LOG [WHO...]
"""
import re
import sys

LINE = re.compile(
    r'timeline.*?who="?(?P<who>[^"=]*?)"? graph=(?P<graph>\d+) stream="?(?P<stream>\w+)"? '
    r'at_us="?(?P<at>[-\d.]+)"? step_us="?(?P<step>[-\d.]+)"? label="?(?P<label>[^"]*)"?\s*$'
)


def read(path):
    marks = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line.rstrip("\n"))
            if not m:
                continue
            key = (m["who"].strip(), int(m["graph"]))
            marks.setdefault(key, []).append((float(m["at"]), float(m["step"]), m["stream"], m["label"]))
    return marks


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    marks = read(sys.argv[1])
    whos = sys.argv[2:] or sorted({w for w, _ in marks})
    if not marks:
        print(f"{sys.argv[1]}: no time-line lines")
    for who in whos:
        graphs = [(len(v), g) for (w, g), v in marks.items() if w == who]
        if not graphs:
            print(f"{who}: no graph")
            continue
        _, g = max(graphs)
        rows = marks[(who, g)]
        print(f"== {who}, graph {g}: {len(rows)} marks, span {rows[-1][0]:.1f} us")
        for at, step, stream, label in rows:
            print(f"{at:9.1f} {step:8.1f}  {stream:4}  {label}")


if __name__ == "__main__":
    main()
