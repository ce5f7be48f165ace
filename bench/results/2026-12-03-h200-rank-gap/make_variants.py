#!/usr/bin/env python3
"""(Copy of ../2026-12-03-h200-int4-gap/make_variants.py, edited for kernels whose K loop runs over
units of 8 K-words, `for (unsigned unit_N ...)` with `group_M = unit_N / 2u;` at its top, as the
generator emits 4352 -> 5120: the loop variable, the group assignment and the unit multiplier are
read from the source instead of assumed; 16-word kernels give the same output as the original.)

Variants of one emitted sm_90 `gemv_int4` (wavefuse emit ... --out DIR), each leaving one stage
out or moving its loads, for gap_bench.cu (issue 20).

    python3 make_variants.py SRC.cu OUTDIR TAG

writes OUTDIR/TAG_<variant>.cu, kernel `gemv_int4_<variant>` (the source's own prelude kept, so
every file compiles alone to a cubin). Variants:

  full        the kernel as emitted (only renamed)
  noepi       no split-K arrival / last-arriver finish: each part stores its partials and exits (y wrong)
  nosz        scales and zero words made up from the indices instead of loaded (no scale/zero traffic; y wrong)
  noload      the qweight words made up from their addresses instead of loaded (no qweight traffic; y wrong)
  noglobal    noload + nosz: no weight-side global traffic at all, everything else kept (y wrong)
  loadsonly   all the loads of the emitted kernel (qweight, scales, zeros, same addresses and order), no
              decode, no LDS B reads, no MMA: the words XOR-ed into one accumulator (a cheap sink); the
              cross-slice reduction and split-K epilogue kept (y wrong)
  nodecode    loads + MMAs, no nibble decode: the A fragments are the raw words (the zero pairs XOR-ed
              into the first fragment of each step so their loads stay live) (y wrong)
  nomma       loads + decode, no MMA: each mma.sync replaced by XOR-ing its six operands into its first
              accumulator (2-3 LOP3 instead of one HMMA) (y wrong)
  rot         same function (y must match): the unit loop rotated by half a unit — the next unit's
              first two 16-byte loads (and its scales and zero word) are issued right after this
              unit's first half is consumed, into the registers that half frees; so a warp always has
              loads in flight while it decodes, at the same register count
  rotearly    rot, with the first unit's first half loaded before the activations are staged in LDS
  pf1         same function: the next unit's four loads (and scales/zero) all issued before this
              unit's decode (a full register double buffer: +16-20 registers)
  xglobal     same function: no activation staging in LDS; each step's B fragment is one 16-byte
              load of x (row = lane quad, or row 0 at batch 1, where the selects zero the other
              quads) straight from global memory (read-only path, L1-cached), put into the
              (x0,x4),(x1,x5),(x2,x6),(x3,x7) order with 4 PRMTs; lds_2 shrunk to 4 words. At batch 8
              this frees the 40 KB of static LDS that limits the kernel to 4 workgroups per SM
  rotxg       rot + xglobal
  pf1early    (added here) pf1, the first unit's loads issued before the activation staging
  noloop      (added here) no K loop: stage + barrier + cross-slice reduction + split-K epilogue (y wrong)
  empty       (added here) an empty body, same parameters and grid: the launch floor (y unwritten)
"""
import re
import sys

src_path, outdir, tag = sys.argv[1], sys.argv[2], sys.argv[3]
src = open(src_path).read()

# ---- parse the K loop ----------------------------------------------------------------------------
m = re.search(r"\n(    for \(unsigned ((?:group|unit)_\d+) = (.+?); \2 < (.+?); \2 \+= (\d+)u\) \{\n)", src)
assert m, "K loop not found"
loop_hdr, gvar, gstart, gend, gstep = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
loop_start = m.start() + 1
# the loop's closing brace: first line "    }\n" after the last fmaf accumulation
body_from = m.end()
close = src.index("\n    }\n", src.index("= fmaf(", body_from))
body = src[body_from:close]
after = src[close + len("\n    }\n"):]
before = src[:loop_start]

lines = body.split("\n")
# head: "group_47 = group_25;" and the zero-inits, up to the guard "if (n0_7 < N) {"
gi = next(i for i, l in enumerate(lines) if re.match(r"        if \(n0_\d+ < \d+u\) \{", l))
head = lines[:gi]
guard = lines[gi]
# the guarded block ends at the first line "        }" after it
ge = next(i for i in range(gi + 1, len(lines)) if lines[i] == "        }")
guarded = lines[gi + 1:ge]
compute = lines[ge + 1:]
_gm = re.match(r"        (group_\d+) = " + gvar + r"( / 2u)?;", head[0])
g47, gdiv = _gm.group(1), (_gm.group(2) or "")
UW = int(re.search(r"\(\(" + gvar + r" \* (\d+)u\) \+ ", src).group(1))  # K-words per unit

# guarded: scales block {...}, zero load, then 4 qweight load blocks {...}
def blocks(ls):
    out, i = [], 0
    while i < len(ls):
        if ls[i] == "            {":
            j = ls.index("            }", i)
            out.append(ls[i:j + 1]); i = j + 1
        else:
            out.append([ls[i]]); i += 1
    return out
gb = blocks(guarded)
sc_blk = [b for b in gb if any("w_scales" in l for l in b)]
zw_blk = [b for b in gb if any("w_qzeros" in l for l in b)]
qw_blk = [b for b in gb if any("w_qweight" in l for l in b)]
assert len(sc_blk) == 1 and len(zw_blk) == 1 and len(qw_blk) >= 2 and len(qw_blk) % 2 == 0, (len(sc_blk), len(zw_blk), len(qw_blk))
assert sum(len(b) for b in gb) == len(guarded)

# compute: pre (scale/zero conversions, unit_acc = 0) | steps (each starts with an LDS B read "{") | post (fmaf)
step_starts = [i for i, l in enumerate(compute) if l == "        {" and "lds_" in compute[i + 1]]
post_start = next(i for i, l in enumerate(compute) if "= fmaf(" in l)
pre = compute[:step_starts[0]]
steps = [compute[a:b] for a, b in zip(step_starts, step_starts[1:] + [post_start])]
post = compute[post_start:]
assert len(steps) == len(qw_blk), (len(steps), len(qw_blk))

J = "\n".join

def indent(ls, n):
    return [(" " * n + l) if l else l for l in ls]

def rename(text, v):
    return text.replace("\ngemv_int4(", f"\ngemv_int4_{v}(", 1)

def emit(v, text):
    open(f"{outdir}/{tag}_{v}.cu", "w").write(rename(text, v))

def loop(body_lines):
    return loop_hdr + J(body_lines) + "\n    }\n"

def reassemble(b, h=head, gd=guarded, c=compute):
    return before + loop(h + [guard] + gd + ["        }"] + c) + after

emit("full", src)
assert reassemble(None) == src, "re-assembly is not the identity"

# noepi: cut at the split-K arrival
if "    // split-K arrival" in after:  # (kernels without split-K have no epilogue to drop)
    cut = after.index("    // split-K arrival")
    emit("noepi", before + loop(head + [guard] + guarded + ["        }"] + compute) + after[:cut] + "}\n")

# nosz / noload / noglobal
N0 = re.search(r"\b(n0_\d+) = tile0_0", src).group(1)
def no_sz(gd):
    out = []
    for l in gd:
        l2 = re.sub(r"\*reinterpret_cast<const uint2\*>\(&w_scales\[.*\]\);",
                    f"make_uint2(0x1c001c00u ^ (({g47} ^ {N0}) & 0x00ff00ffu), 0x1c001c00u ^ ({g47} & 0x00ff00ffu));", l)
        l2 = re.sub(r"= w_qzeros\[.*\];", f"= ({g47} * 0x01234567u) ^ {N0};", l2)
        out.append(l2)
    return out

def no_load(gd):
    return [re.sub(r'uint4 wf_v; asm\("ld\.global\.nc.*?: "l"\((.*)\)\);$',
                   r'uint4 wf_v; { const unsigned h = (unsigned)(size_t)(\1) * 2654435761u; wf_v = make_uint4(h, h ^ 0x1111u, h ^ 0x2222u, h ^ 0x4444u); }', l)
            for l in gd]

emit("nosz", reassemble(None, gd=no_sz(guarded)))
assert no_load(guarded) != guarded and no_sz(guarded) != guarded
emit("noload", reassemble(None, gd=no_load(guarded)))
emit("noglobal", reassemble(None, gd=no_sz(no_load(guarded))))

# loadsonly: the compute replaced by one XOR sink into the first accumulator
qwords = sorted(set(re.findall(r"\b(qword_\d+)\b", J(guarded))), key=lambda s: int(s.split("_")[1]))
scaleh = sorted(set(re.findall(r"\b(scale_h_\d+)\b", J(guarded))), key=lambda s: int(s.split("_")[2]))
zword = re.findall(r"(zero_word_\d+) = w_qzeros", J(guarded))[0]
accs = re.findall(r"        (acc_\d+) = fmaf\(", J(post))
sink = " ^ ".join(qwords + [zword] + [f"(unsigned)(unsigned short){s}" for s in scaleh])
emit("loadsonly", reassemble(None, c=[f"        {accs[0]} = __uint_as_float(__float_as_uint({accs[0]}) ^ {sink});"]))

# nodecode: A fragments = raw words
zpairs = sorted(set(re.findall(r"\b(zero_(?:pair|hi)_\d+)\b", J(pre))), key=lambda s: int(s.split("_")[2]))
def no_decode(c):
    out, first_in_step = [], True
    for l in c:
        mm = re.match(r"        (afrag_\d+) = wf_(?:sub|fma)_half2\(wf_and_or\((qword_\d+)(?: >> 8u)?, .*$", l)
        if mm:
            extra = (" ^ " + " ^ ".join(zpairs)) if first_in_step else ""
            out.append(f"        {mm.group(1)} = {mm.group(2)}{extra};")
            first_in_step = False
        else:
            if l == "        {":
                first_in_step = True
            out.append(l)
    return out
nd = no_decode(compute)
assert nd != compute
emit("nodecode", reassemble(None, c=nd))

# nomma
def no_mma(c):
    out = []
    for l in c:
        mm = re.match(r'        asm volatile\("mma\.sync.*: "\+f"\((\w+)\), "\+f"\(\w+\), "\+f"\(\w+\), "\+f"\(\w+\) : (.*)\);$', l)
        if mm:
            ops = re.findall(r'"r"\((\w+)\)', mm.group(2))
            out.append(f"        {mm.group(1)} = __uint_as_float(__float_as_uint({mm.group(1)}) ^ " + " ^ ".join(ops) + ");")
        else:
            out.append(l)
    return out
nm = no_mma(compute)
assert nm != compute
emit("nomma", reassemble(None, c=nm))

# ---- rotations (same function) -------------------------------------------------------------------
half = len(qw_blk) // 2
first_half_loads = sc_blk + zw_blk + qw_blk[:half]
second_half_loads = qw_blk[half:]

def guarded_block(blks, g_expr, ind):
    """The loads of blks for unit g_expr (qweight rows and scales/zero group), under the guard."""
    ls = [f"        {g47} = ({g_expr}){gdiv};" if gdiv else f"        {g47} = {g_expr};", guard]
    for b in blks:
        for l in b:
            ls.append(l.replace(f"({gvar} * {UW}u)", f"(({g_expr}) * {UW}u)"))
    ls.append("        }")
    return indent(ls, ind - 8) if ind > 8 else ls

nxt = f"{gvar} + {gstep}u"
first_g = f"({gstart})"
end_g = f"({gend})"

def rot_body():
    b = []
    b += [f"        {g47} = {gvar}{gdiv};"]
    b += [guard] + [l for blk in second_half_loads for l in blk] + ["        }"]
    b += pre
    for s in steps[:half]:
        b += s
    b += [f"        if ({nxt} < {end_g}) {{"]
    b += guarded_block(first_half_loads, nxt, 12)
    b += ["        }"]
    for s in steps[half:]:
        b += s
    b += post
    return b

prologue = ["    {"] + [f"    if ({first_g} < {end_g}) {{"] + guarded_block(first_half_loads, first_g, 8 + 4) + ["    }", "    }"]
prologue = [l for l in prologue]
emit("rot", before + J(prologue) + "\n" + loop(rot_body()) + after)

# rotearly: the prologue before the activation staging (comment line of the generator)
stage = "    // activations of this K part to LDS once"
assert stage in before
i = before.index(stage)
emit("rotearly", before[:i] + J(prologue) + "\n" + before[i:] + loop(rot_body()) + after)

# pf1: full double buffer. The next unit's loads go into copies (n_*) declared at the loop top.
regs = qwords + scaleh + [zword]
def pf1_body():
    b = [f"        {g47} = {gvar}{gdiv};"]
    b += [f"        const unsigned c{r} = {r};" if r.startswith("qword") or r.startswith("zero_word") else f"        const wf_f16 c{r} = {r};" for r in regs]
    b += [f"        if ({nxt} < {end_g}) {{"] + guarded_block(sc_blk + zw_blk + qw_blk, nxt, 12) + ["        }"]
    c = pre + [l for s in steps for l in s] + post
    out = []
    for l in c:
        for r in regs:
            l = re.sub(rf"\b{r}\b", "c" + r, l)
        out.append(l)
    return b + out

prologue_full = ["    {"] + [f"    if ({first_g} < {end_g}) {{"] + guarded_block(sc_blk + zw_blk + qw_blk, first_g, 12) + ["    }", "    }"]
emit("pf1", before + J(prologue_full) + "\n" + loop(pf1_body()) + after)

# ---- xglobal -----------------------------------------------------------------------------------
B = int(re.search(r"for (\d+) batch row\(s\)", src).group(1))
xlen = int(re.search(r"const wf_f16\* __restrict__ x, // f16\[(\d+)\]", src).group(1))
Kdim = xlen // B

def x_global(text):
    # the staging loop (comment line, for-loop, its closing brace) removed; the barrier after it kept
    a = text.index("    // activations of this K part to LDS once")
    b = text.index("\n    }\n", a) + len("\n    }\n")
    arr = re.search(r"&(lds_\d+)\[xi_\d+ \* 4u\]", text[a:b]).group(1)
    text = text[:a] + "    // (xglobal: no activation staging; B fragments are loaded from x per step)\n" + text[b:]
    text = re.sub(rf"alignas\(16\) __shared__ unsigned {arr}\[\d+\];", f"alignas(16) __shared__ unsigned {arr}[4];", text)
    def repl(mm):
        idx = mm.group(1)
        row = "0u"
        q = re.match(r"\((quad_\d+) \* \d+u\) \+ (.*)$", idx)
        if q:
            row, idx = q.group(1), q.group(2)
        idx = re.sub(r" - \(\(kpart_\d+ \* \d+u\) \* \d+u\)", "", idx)
        return (f"uint4 wf_xr = __ldg(reinterpret_cast<const uint4*>(&x[({row} * {Kdim}u) + (({idx}) * 8u)])); "
                "const uint4 wf_v = make_uint4(__byte_perm(wf_xr.x, wf_xr.z, 0x5410), __byte_perm(wf_xr.x, wf_xr.z, 0x7632), "
                "__byte_perm(wf_xr.y, wf_xr.w, 0x5410), __byte_perm(wf_xr.y, wf_xr.w, 0x7632));")
    pat = rf"const uint4 wf_v = \*reinterpret_cast<const uint4\*>\(&{arr}\[\((.*)\) \* 4u\]\);"
    n0 = len(re.findall(pat, text))
    text = re.sub(pat, repl, text)
    assert f"*reinterpret_cast<const uint4*>(&{arr}[" not in text and n0 > 0, n0
    return text

full_text = src
rot_text = open(f"{outdir}/{tag}_rot.cu").read().replace("\ngemv_int4_rot(", "\ngemv_int4(", 1)
try:
    emit("xglobal", x_global(full_text))
    emit("rotxg", x_global(rot_text))
    emit("pf1xg", x_global(open(f"{outdir}/{tag}_pf1.cu").read().replace("\ngemv_int4_pf1(", "\ngemv_int4(", 1)))
except Exception as e:  # (the xglobal edit knows the split-K kernels' names only)
    print(f"{tag}: no xglobal variant ({type(e).__name__} {e})")

# ---- added in the rank-gap folder ----------------------------------------------------------------
# pf1early: pf1 with the first unit's loads issued before the activations are staged in LDS (same
# function): the first weight round trip overlaps the x load, the LDS stores and the barrier
emit("pf1early", before[:i] + J(prologue_full) + "\n" + before[i:] + loop(pf1_body()) + after)
# noloop: the K loop removed; the activation stage + barrier, the cross-slice reduction and the
# split-K arrival and finish kept (y = 0: wrong by design): the kernel's fixed part
emit("noloop", before + after)
# empty: the same parameters and grid, a body that does nothing (never stores: epoch is never
# 0xffffffff here): launch + fill + drain of this grid in a graph of back-to-back launches
_a = src.index("{\n", src.index("\ngemv_int4("))
emit("empty", src[:_a] + "{\n    if (epoch == 0xffffffffu && threadIdx.x == 0u) { y[blockIdx.x] = (wf_f16)0; }\n}\n")

print(f"{tag}: wrote full noepi nosz noload noglobal loadsonly nodecode nomma rot rotearly pf1 xglobal rotxg pf1early noloop empty "
      f"({len(qw_blk)} loads per unit, {len(steps)} steps)")
