#!/usr/bin/env python3
"""Static SASS loop census: for each kernel in a cuobjdump -sass listing, the innermost loop
(backward branch) that holds the most HMMA: its instructions, HMMA and instructions per HMMA."""
import re, sys
text = open(sys.argv[1]).read()
for fn in re.split(r"\n\s+Function : ", text)[1:]:
    name = fn.split("\n", 1)[0].strip()
    ins = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", fn)]
    total = len(ins); hmma = sum("HMMA" in t for _, t in ins)
    loops = []
    for pc, t in ins:
        m = re.search(r"BRA (0x[0-9a-f]+)", t)
        if m and int(m.group(1), 16) < pc:
            lo = int(m.group(1), 16)
            body = [x for p, x in ins if lo <= p <= pc]
            loops.append((sum("HMMA" in x for x in body), len(body), lo, pc))
    best = max(loops, key=lambda l: (l[0], -l[1])) if loops else None
    if best and best[0]:
        # the innermost loop with that many HMMA
        cands = [l for l in loops if l[0] == best[0]]
        h, n, lo, pc = min(cands, key=lambda l: l[1])
        print(f"{name[:60]:60s} total {total:5d} HMMA {hmma:3d} | loop {lo:#x}-{pc:#x}: {n} instr, {h} HMMA, {n/h:.2f} per HMMA")
    else:
        print(f"{name[:60]:60s} total {total:5d} HMMA {hmma:3d} | no HMMA loop")
