#!/usr/bin/env bash
# A hand-picked sweep of INT4 GEMV schedules on the GPU machine, before the autotuner: each line
# of SPECS is a `$WAVEFUSE_SCHEDULE` override (fields of wavefuse_codegen::lower::Schedule) run
# through `wavefuse ab` for the kernels in $KERNELS at $SHAPES; summary.md ranks them.
# Run from the repository root on the GPU machine (carry/wavefuse):
#   bash bench/results/2026-11-29-h200-int4-sweep/run.sh
# (scripts/sweep-int4.sh until issue 35; `wavefuse tune` has since replaced hand-picked sweeps.)
set -uo pipefail
OUT=${OUT:-/tmp/sweep}
mkdir -p "$OUT/runs"
KERNELS=${KERNELS:-"gemv_int4 gemv_int4_dual_silu"}
SHAPES=${SHAPES:-qwen27b-tp1,qwen27b-tp4}
SPECS=${SPECS:-"default
nibble_decode=magic
nibble_decode=magic,int4_scaling=per_unit
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=8,words_per_iteration=4,columns_per_workgroup=64,threads_per_column=16
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=4,words_per_iteration=4,columns_per_workgroup=128,threads_per_column=8
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=4,words_per_iteration=4,columns_per_workgroup=32,threads_per_column=32
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=16,words_per_iteration=2,columns_per_workgroup=64,threads_per_column=8
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=8,words_per_iteration=4,columns_per_workgroup=64,threads_per_column=8,workgroup_size=128
nibble_decode=convert,int4_scaling=per_unit,k_unit_words=8,words_per_iteration=4,columns_per_workgroup=64,threads_per_column=16
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=4,words_per_iteration=4,columns_per_workgroup=64,threads_per_column=16,accumulators=1
nibble_decode=magic,int4_scaling=per_weight,k_unit_words=8,words_per_iteration=4,columns_per_workgroup=64,threads_per_column=16
nibble_decode=magic,int4_scaling=per_unit,k_unit_words=2,words_per_iteration=4,columns_per_workgroup=64,threads_per_column=16"}
BIN=${BIN:-carry/wavefuse}
export WAVEFUSE_CACHE_DIR=${WAVEFUSE_CACHE_DIR:-$PWD/carry/cache}
i=0
while IFS= read -r spec; do
    [ -z "$spec" ] && continue
    i=$((i + 1))
    echo "== $i: $spec"
    if [ "$spec" = default ]; then unset WAVEFUSE_SCHEDULE; else export WAVEFUSE_SCHEDULE="$spec"; fi
    # shellcheck disable=SC2086
    timeout 120 "$BIN" ab $KERNELS --shapes "$SHAPES" --json "$OUT/runs/$i.json" >"$OUT/runs/$i.txt" 2>&1
    echo "rc $? spec $spec" >>"$OUT/runs/$i.txt"
    echo "$spec" >"$OUT/runs/$i.spec"
    tail -4 "$OUT/runs/$i.txt"
done <<<"$SPECS"
unset WAVEFUSE_SCHEDULE
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(f"{out}/runs/*.json"), key=lambda p: int(os.path.basename(p).split('.')[0])):
    i = os.path.basename(f).split('.')[0]
    spec = open(f"{out}/runs/{i}.spec").read().strip()
    d = json.load(open(f))
    for r in d["rows"]:
        g, m = r["generated"], r["manual"]
        med = lambda v: min(x["median_us"] for x in v["timing"]["repeats"]) if v.get("timing") else float("nan")
        res = g["resources"][0]["usage"] if g.get("resources") else {}
        rows.append((r["kernel"], r["shape"], r["dims"], med(g), med(m), g["timing"]["fraction_of_copy_bandwidth"] if g.get("timing") else float("nan"),
                     g["check"]["pass"], res.get("registers"), res.get("spills"), i, spec))
rows.sort(key=lambda x: (x[0], x[1], x[3]))
with open(f"{out}/summary.md", "w") as fh:
    fh.write("| kernel | shape | dims | gen µs | hand µs | gen/hand | gen of copy BW | correct | regs | spills | # | schedule override |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for k, s, dm, g, m, fr, ok, rg, sp, i, spec in rows:
        fh.write(f"| {k} | {s} | {dm} | {g:.2f} | {m:.2f} | {g/m:.2f} | {fr*100:.0f}% | {ok} | {rg} | {sp} | {i} | {spec} |\n")
print(open(f"{out}/summary.md").read())
PY
tar czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$OUT/runs"
