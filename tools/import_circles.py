#!/usr/bin/env python3
# Usage: python3 tools/import_circles.py [src]   (prints each pair of files that name each other)
"""Import circles between two files of src/: file A names an item of file B and B one of A.

Resolves `use crate::...` / `use super::...` lines and `crate::` / `super::` paths in code (braces expanded) to the longest module
path that is a file, and reports each pair that imports both ways. Re-exports from a module's
mod.rs (`pub use child::X`) count as an import of the child, as they are one."""
import os, re, sys, itertools
root = sys.argv[1] if len(sys.argv) > 1 else 'src'
mods = {}  # module path tuple -> file
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
        if p[-1] in ('mod', 'lib', 'main'): p = p[:-1]
        if p and p[0] == 'bin': continue
        mods[tuple(p)] = os.path.join(d, f)
def expand(s):
    s = re.sub(r'\s+', '', s)
    m = re.match(r'^(.*?)\{(.*)\}$', s)
    if not m: return [s]
    pre, body = m.groups()
    parts, depth, cur = [], 0, ''
    for ch in body:
        if ch == ',' and depth == 0: parts.append(cur); cur = ''; continue
        depth += ch == '{'; depth -= ch == '}'; cur += ch
    if cur: parts.append(cur)
    out = []
    for p in parts: out += expand(pre + p)
    return out
edges = set()
for mp, f in mods.items():
    src = open(f).read()
    src = re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', src, flags=re.S)  # unit tests aside
    here = list(mp)  # the file's own module: `self`; `super` is its parent
    code = re.sub(r'//[^\n]*', '', src)
    paths = [p for m in re.finditer(r'^\s*(?:pub(?:\([a-z]+\))?\s+)?use\s+([^;]+);', code, re.M) for p in expand(m.group(1))]
    paths += [m.group(0) for m in re.finditer(r'\b(?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)+', code)]
    for path in paths:
        if True:
            segs = path.split('::')
            if segs[0] == 'crate': base, rest = [], segs[1:]
            elif segs[0] == 'super':
                base = here[:]; rest = segs
                while rest and rest[0] == 'super': base = base[:-1]; rest = rest[1:]
            elif segs[0] == 'self': base, rest = here[:], segs[1:]
            else: continue
            full = base + [s.split(' as ')[0] for s in rest]
            for k in range(len(full), -1, -1):
                t = tuple(full[:k])
                if t in mods:
                    if mods[t] != f: edges.add((f, mods[t]))
                    break
pairs = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
for a, b in pairs: print('circle:', a, '<->', b)
print(f'{len(pairs)} circles between {len(mods)} files')
