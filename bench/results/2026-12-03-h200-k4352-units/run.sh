#!/usr/bin/env bash
# One device call (H200): issue 20, two shapes where the sm_90 default splits K badly.
# (1) 4352 -> 5120 at batch 1 (one TP 4 rank of the down GEMV, timed alone): K = 4352 is 34 units
#     of 16 K-words, no part count in 3..8 divides 34, so the default takes 2 parts (320
#     workgroups). Variants with 8- or 4-word units allow 4 or 8 parts.
# (2) 17408 -> 5120 at batch 8: the default's K parts' activations (70 KB) exceed the 40 KiB
#     stage; 8 parts stage 35 KB each.
# `ab --timing graphs` (gemv_int4 at a model config whose hidden = K, intermediate = N; the same
# kernel as one TP 4 rank alone, 2026-12-03-h200-marlin), the default and each override
# (WAVEFUSE_SCHEDULE_SM90) alternating over two rounds. Writes $OUT/results.tgz and
# $OUT/summary.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-03-h200-k4352-units
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
ab() { # name, config, shapes, overrides
    WAVEFUSE_SCHEDULE_SM90=$4 timeout 120 $W ab gemv_int4 --model-config $D/$2 --shapes $3 \
        --timing graphs --iters 400 --json "$OUT/$1.json" --md "$OUT/$1.md" > "$OUT/$1.txt" 2>&1
    echo "$1 [$4]: exit $?" >> "$OUT/exits.txt"
}
V4352=("" "k_unit_words=8,k_split=4" "k_unit_words=8,k_split=2" "k_unit_words=4,k_split=8" "k_unit_words=8,k_split=4,x_in_lds=false")
V17408=("" "k_split=8,x_in_lds=true" "k_split=8,x_in_lds=false")
for r in 1 2; do
    for i in "${!V4352[@]}"; do ab k4352-v$i-r$r k4352-config.json qwen27b-tp1-b1 "${V4352[$i]}"; done
    for i in "${!V17408[@]}"; do ab k17408-v$i-r$r k17408-config.json qwen27b-tp1-b8 "${V17408[$i]}"; done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, sys, glob, os, re
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/k*-v*-r*.json")):
    name = os.path.basename(f)[:-5]
    shape, v, r = re.match(r"(k\d+)-v(\d+)-r(\d)", name).groups()
    for x in json.load(open(f))["rows"]:
        g = x["generated"]
        t = g.get("timing")
        med = t["repeats"][0]["median_us"] if t else float("nan")
        rows.setdefault((shape, int(v)), []).append((med, g["check"]["pass"], g.get("grid")))
print("| shape | variant | r1, r2 µs | check |")
for (s, v), l in sorted(rows.items()):
    print(f"| {s} | v{v} | {', '.join(f'{m:.2f}' for m, _, _ in l)} | {all(ok for _, ok, _ in l)} |")
PY
