#!/usr/bin/env bash
# Second device call (H200): the landed rule (units halved where no K split fills the device)
# at the batches the first call did not time: 4352 -> 5120 at batch 2, 4, 8, the previous default
# (no override) against the new one (k_unit_words=8,k_split=4 on the same binary: the sources are
# byte-identical to the new default's, checked with `wavefuse emit`), alternating over two rounds;
# and 17408 -> 5120 at batch 8 once more, previous vs new default (k_split=8,x_in_lds=true).
# Writes $OUT/results2.tgz and $OUT/summary2.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-03-h200-k4352-units
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
ab() { # name, config, shapes, overrides
    WAVEFUSE_SCHEDULE_SM90=$4 timeout 150 $W ab gemv_int4 --model-config $D/$2 --shapes $3 \
        --timing graphs --iters 400 --json "$OUT/$1.json" --md "$OUT/$1.md" > "$OUT/$1.txt" 2>&1
    echo "$1 [$4]: exit $?" >> "$OUT/exits.txt"
}
S=qwen27b-tp1-b2,qwen27b-tp1-b4,qwen27b-tp1-b8
for r in 1 2; do
    ab k4352-old-r$r k4352-config.json $S ""
    ab k4352-new-r$r k4352-config.json $S "k_unit_words=8,k_split=4"
    ab k17408-old-r$r k17408-config.json qwen27b-tp1-b8 ""
    ab k17408-new-r$r k17408-config.json qwen27b-tp1-b8 "k_split=8,x_in_lds=true"
done
tar czf "$FINAL/results2.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary2.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, sys, glob, os, re
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/k*-*-r*.json")):
    shape, v, r = re.match(r"(k\d+)-(old|new)-r(\d)", os.path.basename(f)).groups()
    for x in json.load(open(f))["rows"]:
        g = x["generated"]
        t = g.get("timing")
        med = t["repeats"][0]["median_us"] if t else float("nan")
        rows.setdefault((shape, x["shape"], v), []).append((med, g["check"]["pass"]))
print("| K | shape | default | r1, r2 µs | check |")
for (k, s, v), l in sorted(rows.items()):
    print(f"| {k} | {s} | {v} | {', '.join(f'{m:.2f}' for m, _ in l)} | {all(ok for _, ok in l)} |")
PY
