#!/usr/bin/env python3
"""The module layers of src/, checked at every depth (CI runs this).

Reads every `crate::`, `super::` and `self::` path of src/ (code only: comments, strings
and `#[cfg(test)]` modules, inline or in their own file, are left out), resolves each to
the file that defines the module it names (through `pub use` re-exports), and fails
- on any circle between the files of the crate, and between the children (files and
  folders) of any folder, at every depth;
- on any arrow from a lower layer to a higher one, for the folders whose layers are
  listed in LAYERS below (the order docs/architecture.md describes).

`--verbose` prints every folder's graph; by default only the top level and the failures.
"""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

# Layers per folder, lowest first: a child may import only children of its own layer or
# of a lower one (same-layer arrows are allowed but still may not form a circle). A child
# that is not listed fails the check, so a new module has to be placed in a layer.
LAYERS = {
    "": [
        ["error", "clock", "rng", "reduce", "threads"],
        ["geometry"],
        ["field"],
        ["comms"],
        ["io", "gauge_gen", "smear", "gauge_fix"],
        ["linalg", "dirac", "sources", "measure"],
        ["backend"],
        ["solver"],
        ["config"],
        ["problem", "report"],
        ["app"],
    ],
    "app": [
        ["chart", "device", "memory", "output_set", "plan", "rhs"],
        ["footprint", "generate", "init"],
        ["heatbath_cache"],
        ["outputs", "problem", "tuning"],
        ["solve", "solve_batch"],
        ["parallel"],
        ["run"],
        ["ablate", "bench", "floor", "kappa_scan", "propagator", "scale"],
        ["validate", "embed"],
        ["cli"],
    ],
    "backend/cuda": [
        ["core"],
        ["halo", "heatbath", "gauge_fix"],
        ["dirac", "mg"],
        ["engines"],
        ["backend"],
    ],
}


def module_of(path):
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def strip(text):
    """Code only: no comments, no string or char literals, no #[cfg(test)] module."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and re.match(r'r#*"', text[i:]):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            j = text.find('"' + hashes, i + len(hashes) + 2)
            out.append('""')
            i = n if j < 0 else j + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\(\w+\))?\s+)?mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def expand(tree):
    """`a::{b, c::{d, e as f}}` -> [[a, b], [a, c, d], [a, c, e]] (renames dropped)."""
    tree = tree.strip()
    depth, i = 0, tree.find("{")
    if i < 0:
        return [[s.strip().split(" as ")[0].strip() for s in tree.split("::") if s.strip()]]
    head = [s for s in tree[:i].split("::") if s.strip()]
    body, parts, cur = tree[i + 1 : tree.rfind("}")], [], ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            out += [head + e for e in expand(p)]
    return out


def test_only(path):
    """A module file its parent declares `#[cfg(test)] mod NAME;` (tests kept in their own
    file): left out, as inline `#[cfg(test)]` modules are."""
    name = path.parent.name if path.name == "mod.rs" else path.stem
    home = path.parent.parent if path.name == "mod.rs" else path.parent
    for parent in (home.with_suffix(".rs"), home / "mod.rs", home / "lib.rs"):
        if parent.is_file() and re.search(
            r"#\[cfg\(test\)\]\s*(pub(\(\w+\))?\s+)?mod\s+" + re.escape(name) + r"\s*;", parent.read_text()
        ):
            return True
    return False


files = {
    module_of(p): p
    for p in sorted(SRC.rglob("*.rs"))
    if p.name != "main.rs" and not test_only(p)
}
code = {m: strip(p.read_text()) for m, p in files.items()}


def absolute(mod, segs):
    """A path's segments made absolute from module `mod` (a folder's mod.rs is the folder)."""
    base = list(mod)
    while segs and segs[0] in ("super", "self", "crate"):
        s = segs.pop(0)
        if s == "crate":
            base = []
        elif s == "super":
            base = base[:-1]
    return base + segs


def uses(mod):
    """Every path of a file's `use` statements and inline paths, made absolute."""
    text, out = code[mod], []
    for vis, tree in re.findall(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        for segs in expand(tree):
            if segs and segs[0] in ("crate", "super", "self"):
                out.append((bool(vis), absolute(mod, segs)))
            elif segs and tuple(list(mod) + segs[:1]) in files:
                out.append((bool(vis), list(mod) + segs))  # `use child::X` in a mod.rs
    for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", text):
        out.append((False, absolute(mod, m.group(1).split("::"))))
    return out


reexports = {m: {} for m in files}
for m in files:
    for vis, segs in uses(m):
        if vis and segs:
            reexports[m][segs[-1]] = segs


def resolve(segs, seen=()):
    mod = ()
    for i, s in enumerate(segs):
        if mod + (s,) in files:
            mod = mod + (s,)
            continue
        target = reexports.get(mod, {}).get(s)
        if target and tuple(target) not in seen and target != list(segs[: i + 1]):
            return resolve(target, seen + (tuple(target),))
        break
    return mod


edges = {m: set() for m in files}
for m in files:
    for vis, segs in uses(m):
        t = resolve(segs)
        if t in files and t != m and not (vis and t[: len(m)] == m):
            edges[m].add(t)  # a folder's `pub use` of its own children is its facade


def cycles(nodes, deps):
    state, stack, found = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(deps[n]):
            if state.get(d) == 1:
                found.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(nodes):
        if n not in state:
            visit(n)
    return found


def name(m):
    return "/".join(m) or "lib"


failures = []
for c in cycles(files, edges):
    failures.append("file circle: " + " -> ".join(name(m) for m in c))

folders = {m[:k] for m in files for k in range(len(m))} | {()}
verbose = "--verbose" in sys.argv
for folder in sorted(folders):
    n = len(folder)
    kids = {m[n] for m in files if len(m) > n and m[:n] == folder}
    deps = {k: set() for k in kids}
    for a in files:
        for b in edges[a]:
            if len(a) > n and len(b) > n and a[:n] == folder and b[:n] == folder and a[n] != b[n]:
                deps[a[n]].add(b[n])
    where = "/".join(folder) or "src"
    for c in cycles(kids, deps):
        failures.append(f"circle in {where}/: " + " -> ".join(c))
    layers = LAYERS.get("/".join(folder))
    if layers is not None:
        level = {k: i for i, layer in enumerate(layers) for k in layer}
        for k in sorted(kids):
            if k not in level:
                failures.append(f"{where}/{k}: in no layer of module-graph.py's LAYERS")
        for k in sorted(kids):
            for d in sorted(deps[k]):
                if k in level and d in level and level[d] > level[k]:
                    failures.append(f"upward arrow in {where}/: {k} -> {d}")
    if verbose or not folder:
        print(f"[{where}/]")
        for k in sorted(kids):
            print(f"  {k:14} -> {', '.join(sorted(deps[k])) or '-'}")

for f in failures:
    print("FAIL", f)
print(f"{len(files)} files, {sum(len(e) for e in edges.values())} arrows, {len(failures)} failures")
sys.exit(1 if failures else 0)
