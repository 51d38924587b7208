#!/usr/bin/env python3
"""Prints the dependency graph between the top-level modules of src/ (from `crate::X`
paths) and fails if it has a cycle or if anything outside app/ imports from app/."""
import re, pathlib, sys
src = pathlib.Path(__file__).resolve().parent.parent / "src"
mods = sorted({p.relative_to(src).parts[0].removesuffix(".rs") for p in src.iterdir()} - {"lib", "main"})
deps = {m: set() for m in mods}
for p in src.rglob("*.rs"):
    rel = p.relative_to(src).parts
    m = rel[0].removesuffix(".rs")
    if m not in deps:
        continue
    # Code only: comments may name any module.
    text = "\n".join(l for l in p.read_text().splitlines() if not l.strip().startswith("//"))
    # `super::` from a top-level file's submodule stays inside it; count crate:: paths.
    for d in re.findall(r"\bcrate::(\w+)", text):
        if d in deps and d != m:
            deps[m].add(d)
bad = [m for m in mods if m != "app" and "app" in deps[m]]
state, stack, cycle = {}, [], []
def visit(m):
    state[m] = 1; stack.append(m)
    for d in sorted(deps[m]):
        if state.get(d) == 1:
            cycle.append(stack[stack.index(d):] + [d]); continue
        if d not in state: visit(d)
    stack.pop(); state[m] = 2
for m in mods:
    if m not in state: visit(m)
for m in mods:
    print(f"{m:10} -> {', '.join(sorted(deps[m])) or '-'}")
if bad: print("imports app/:", bad)
for c in cycle: print("cycle:", " -> ".join(c))
sys.exit(1 if bad or cycle else 0)
