#!/usr/bin/env python3
"""Import cycles between the Rust files of each crate of the workspace.

A file imports another when it names a module path that resolves to that
file: `use crate::a::b`, `use super::c`, `crate::a::f(...)` in code, or a
`mod x;` of its own is not counted (a parent declaring its child is not an
import). Two files are in a cycle when each reaches the other through such
imports. Prints every cycle (its files), and the number of cycles per crate;
exits 1 if there is any.

Reads the code as text: a path written in a comment or a string counts too,
so a false cycle is possible, a missed one is not (every `crate::`/`super::`
path is seen).
"""
import os
import re
import sys

CRATES = {"operator": "src", "domain": "domain/src", "testkit": "testkit/src", "model": "model/src",
          "bench": "bench/src", "scale": "scale/src", "chaos": "chaos/src", "generate": "generate/src"}
PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def module_of(root, path):
    """The module path of a file, as a tuple: src/a/b.rs -> (a, b)."""
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def files(root):
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("tests", "bin"))
        for name in sorted(names):
            if name.endswith(".rs"):
                yield os.path.join(folder, name)


def edges(root):
    modules = {module_of(root, f): f for f in files(root)}
    graph = {f: set() for f in modules.values()}
    for here, f in modules.items():
        text = open(f, encoding="utf-8").read()
        # `super` names the module above this file's own.
        parent = here[:-1]
        refs = []
        for m in GROUP.finditer(text):
            for item in re.split(r",", m.group(3)):
                head = item.strip().split(" as ")[0].split("::")
                if head and head[0] and head[0] != "self":
                    refs.append((m.group(1), m.group(2).strip(":").split("::") + head))
        for m in PATH.finditer(text):
            refs.append((m.group(1), m.group(2).strip(":").split("::")))
        for base, segs in refs:
            segs = [s for s in segs if s]
            start = () if base == "crate" else parent
            path = list(start)
            for seg in segs:
                if seg == "super":
                    path = path[:-1]
                else:
                    path.append(seg)
            target = None
            for cut in range(len(path), -1, -1):
                if tuple(path[:cut]) in modules:
                    target = modules[tuple(path[:cut])]
                    break
            # A module's own children and itself are not imports of it.
            if target and target != f and not is_ancestor(modules, target, f):
                graph[f].add(target)
    return graph


def is_ancestor(modules, target, f):
    """Whether `target` is a mod.rs/lib.rs above `f` (re-exports, `super`)."""
    t = os.path.dirname(target)
    return os.path.basename(target) in ("mod.rs", "lib.rs", "main.rs") and f.startswith(t + os.sep)


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    total = 0
    for crate, root in CRATES.items():
        root = os.path.join(repo, root)
        if not os.path.isdir(root):
            continue
        found = cycles(edges(root))
        for comp in found:
            print(f"{crate}: import cycle: " + " -> ".join(os.path.relpath(f, repo) for f in comp))
        print(f"{crate}: {len(found)} import cycles")
        total += len(found)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
