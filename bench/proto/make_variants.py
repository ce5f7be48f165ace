"""Hand-edited variants of a generated sm_90 gemv_int4 for read_pattern.cu: what the split-K
epilogue costs, and whether issuing the weight loads earlier helps.
    python3 make_variants.py gen-now/gemv_int4.cu s16      (units of 16 K-words, the default)
    python3 make_variants.py gen-now8/gemv_int4.cu s8      (WAVEFUSE_SCHEDULE=k_unit_words=8)
writes gen-now/v_<tag>_<variant>.cu, kernel gemv_int4_<tag>_<variant>, no prelude (read_pattern.cu
includes the default kernel's file first):
    plain   the kernel as generated, renamed
    noepi   no split-K arrival or finisher (each part writes its partials and exits): y wrong, timing only
    early   the first unit's weight loads before the activations are staged, the next unit's right
            after this one's MMAs (the same registers: a rotated loop)
    early2  as early, and the next unit's loads before this unit's MMAs (two units' words live)
    noload  no weight loads (words made up from their addresses): the cost of everything else"""
import re
import sys

path, tag = sys.argv[1], sys.argv[2]
src = open(path).read().split("\n")
body_start = next(i for i, l in enumerate(src) if l.startswith('extern "C"'))
text = "\n".join(src[body_start:])

m = re.search(r"    for \(unsigned (\w+) = (.+?); \1 < (.+?); \1 \+= 4u\) \{\n        (\w+ = .+;\n)", text)
var, first, end, first_stmt = m.group(1), m.group(2), m.group(3), m.group(4)
pre, rest = text[: m.start()], text[m.end():]
ms = re.search(r"        scale_\d+ = wf_f16_to_f32\(scale_h_\d+\);\n", rest)
loads, rest2 = rest[: ms.start()], rest[ms.start():]
me = list(re.finditer(r"        acc_\d+ = fmaf\(scale_\d+, unit_acc_\d+, acc_\d+\);\n    \}\n", rest2))[-1]
compute, tail = rest2[: me.end() - len("    }\n")], rest2[me.end():]
staging_at = pre.index("    // activations of this K part to LDS once")
first, end = f"({first})", f"({end})"
header = f"    for (unsigned {var} = {first}; {var} < {end}; {var} += 4u) {{\n        {first_stmt}"

def load_at(g):
    # the unit's loads, at unit g (the first statement's variable, e.g. the group, recomputed)
    lhs = first_stmt.split(" = ")[0]
    return f"        {first_stmt.replace(var, g)}" + loads.replace(var, g) if lhs in loads else loads.replace(var, g)

def variant(name, pre_, loop, tail_):
    out = (pre_ + loop + tail_).replace("\ngemv_int4(", f"\ngemv_int4_{tag}_{name}(", 1)
    open(f"gen-now/v_{tag}_{name}.cu", "w").write(out)

variant("plain", pre, header + loads + compute + "    }\n", tail)
variant("noepi", pre, header + loads + compute + "    }\n", tail.split("    // split-K arrival")[0] + "}\n")
pre_early = pre[:staging_at] + f"    if ({first} < {end}) {{\n        unsigned gq = {first};\n" + load_at("gq") + "    }\n" + pre[staging_at:]
loop_early = (header + compute + f"        if ({var} + 4u < {end}) {{\n            unsigned gq = {var} + 4u;\n" + load_at("gq") + "        }\n    }\n")
variant("early", pre_early, loop_early, tail)
regs = sorted(set(re.findall(r"\b(qword_\d+|scale_h_\d+|zero_word_\d+)\b", loads)), key=lambda r: int(r.split("_")[-1]))
copy = "".join(f"        const auto c{r} = {r};\n" for r in regs)
compute_c = compute
for r in regs:
    compute_c = re.sub(rf"\b{r}\b", "c" + r, compute_c)
loop_early2 = (header + copy + f"        if ({var} + 4u < {end}) {{\n            unsigned gq = {var} + 4u;\n" + load_at("gq") + "        }\n"
               + compute_c + "    }\n")
variant("early2", pre_early, loop_early2, tail)
# noload: the weight words made up from their address instead of loaded (scales and zeros still
# loaded): what the decode, the MMAs and the rest cost without the weight traffic; y wrong
noload = re.sub(r'uint4 wf_v; asm\("ld\.global\.nc.*?: "l"\((.*)\)\);$',
                r'uint4 wf_v; { const unsigned h = (unsigned)(size_t)(\1) * 2654435761u; wf_v = make_uint4(h, h ^ 0x1111u, h ^ 0x2222u, h ^ 0x4444u); }',
                loads, flags=re.M)
assert noload != loads
variant("noload", pre, header + noload + compute + "    }\n", tail)
print(f"wrote gen-now/v_{tag}_{{plain,noepi,early,early2,noload}}.cu")
