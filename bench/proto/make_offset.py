"""Hand edit of the generated sm_90 gemv_int4 (lop3 decode, no B selects): the 'offset' decode.
The A fragments stay 1024 + q (even nibbles) and 1024 + 16q (odd nibbles, their activations
staged as x/16); per unit, the MMA sums are corrected by - S_off - z * S_all with S_all = sum x,
S_off = 1024 * sum x_even + 1024 * sum (x_odd / 16), staged once per workgroup."""
import re, sys
s = open(sys.argv[1]).read()
name = sys.argv[3]
minb = sys.argv[5] if len(sys.argv) > 5 else None
s = s.replace("\ngemv_int4(", f"\n{name}(", 1)
# drop the prelude when asked (read_pattern.cu includes the helpers already)
if len(sys.argv) > 4:
    s = s[s.index('extern "C"'):]
s = s.replace("    alignas(16) __shared__ unsigned lds_2[640];",
              "    alignas(16) __shared__ unsigned lds_2[640];\n    __shared__ float wo_unit[20];")
store = "        *reinterpret_cast<uint4*>(&lds_2[xi_16 * 4u])"
pre = """        {
            const float x0 = wf_f16_to_f32(xh_17), x4 = wf_f16_to_f32(xh_21), x2 = wf_f16_to_f32(xh_19), x6 = wf_f16_to_f32(xh_23);
            const float x1 = wf_f16_to_f32(xh_18), x5 = wf_f16_to_f32(xh_22), x3 = wf_f16_to_f32(xh_20), x7 = wf_f16_to_f32(xh_24);
            xh_18 = wf_f32_to_f16(x1 * 0.0625f); xh_22 = wf_f32_to_f16(x5 * 0.0625f);
            xh_20 = wf_f32_to_f16(x3 * 0.0625f); xh_24 = wf_f32_to_f16(x7 * 0.0625f);
            const float o = (x0 + x2 + x4 + x6) + (wf_f16_to_f32(xh_18) + wf_f16_to_f32(xh_20) + wf_f16_to_f32(xh_22) + wf_f16_to_f32(xh_24));
            // the unit's 16 words are 16 consecutive lanes (and iterations cover whole warps):
            // butterfly sums, the first lane of the 16 writes them
            float sa = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)), so = 1024.0f * o;
            for (int m = 8; m >= 1; m >>= 1) { sa += __shfl_xor_sync(0xffffffffu, sa, m); so += __shfl_xor_sync(0xffffffffu, so, m); }
            if ((xi_16 & 15u) == 0u) { wo_unit[(xi_16 / 16u) * 2u] = sa; wo_unit[(xi_16 / 16u) * 2u + 1u] = so; }
        }
"""
assert store in s
s = s.replace(store, pre + store, 1)
bar = "    // §5.8: barrier in uniform control flow; tails are masked\n    __syncthreads();\n    for (unsigned group_25"
assert bar in s
# zero pairs -> float zeros
s = re.sub(r"zero_pair_(\d+) = \(\(\(\((.*?)\) \+ 1u\) \+ 25600u\) \* 65537u;", r"const float zf_\1 = (float)(((\2) + 1u);", s)
s = re.sub(r"        zero_hi_\d+ = .*;\n", "", s)
s = re.sub(r"wf_sub_half2\((wf_and_or\([^;]*?, 983055u, 1677747200u\)), zero_pair_\d+\)", r"\1", s)
s = re.sub(r"wf_fma_half2\((wf_and_or\([^;]*?, 15728880u, 1677747200u\)), 738208768u, zero_hi_\d+\)", r"\1", s)
assert "wf_sub_half2(wf" not in s and "wf_fma_half2(wf" not in s, "decode left"
zmap = {}
for m in re.finditer(r"scale_(\d+) = wf_f16_to_f32\(scale_h_\d+\);\n        const float zf_(\d+)", s):
    zmap[m.group(1)] = m.group(2)
def acc(m):
    return f"{m.group(1)} = fmaf(scale_{m.group(2)}, (unit_acc_{m.group(3)} - wo_so) - zf_{zmap[m.group(2)]} * wo_sa, {m.group(1)});"
s, n = re.subn(r"(acc_\d+) = fmaf\(scale_(\d+), unit_acc_(\d+), acc_\d+\);", acc, s)
assert n == 8, n
s = s.replace("        unit_acc_92 = 0.0f;", "        const float wo_sa = wo_unit[(group_25 - kpart_2 * 10u) * 2u], wo_so = wo_unit[(group_25 - kpart_2 * 10u) * 2u + 1u];\n        unit_acc_92 = 0.0f;", 1)
if minb:
    s = s.replace("__launch_bounds__(128)", f"__launch_bounds__(128, {minb})", 1)
open(sys.argv[2], "w").write(s)
print("ok", zmap)
