"""Instruction classes of the longest backward-branch loop (the unit loop of the INT4 GEMV) in an
`nvdisasm -c` listing of an sm_90 cubin. The counts quoted in bench/results/2026-11-30-h200-decode/
(320 / 257 / 239 / 179 SASS instructions per unit) come from:
    nvcc -arch=sm_90 -cubin -O3 -o k.cubin KERNEL.cu && nvdisasm -c k.cubin > k.sass
    python3 bench/proto/sass_loop.py k.sass
(nvdisasm: the project's pinned CUDA wheels have none; it came from PyPI's nvidia-cuda-nvdisasm
13.5.37 wheel, `pip download --no-deps nvidia-cuda-nvdisasm`, unpacked.)"""
import re, sys, collections
lines = open(sys.argv[1]).read().split("\n")
ins, labels, cur = [], {}, None
for l in lines:
    m = re.match(r"\s*\.(L_x_\d+):", l)
    if m: labels[m.group(1)] = None; cur = m.group(1); continue
    m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
    if m:
        a = int(m.group(1), 16); ins.append((a, m.group(2).strip()))
        if cur: labels[cur] = a; cur = None
best = None
for a, t in ins:
    m = re.search(r"BRA `\(\.(L_x_\d+)\)", t)
    if m and labels.get(m.group(1)) is not None and labels[m.group(1)] < a:
        tgt = labels[m.group(1)]
        if best is None or a - tgt > best[1] - best[0]: best = (tgt, a)
body = [t for a, t in ins if best[0] <= a <= best[1]]
c = collections.Counter(re.sub(r"^@!?U?P\w+ ", "", t).split()[0].split(".")[0] for t in body)
print(f"{sys.argv[1]}: loop {best[0]:#x}-{best[1]:#x}: {len(body)} instr; " + ", ".join(f"{k} {v}" for k, v in c.most_common()))
