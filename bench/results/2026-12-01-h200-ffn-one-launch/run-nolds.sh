#!/usr/bin/env bash
# The one-launch block with its activations not staged in LDS (`x_in_lds=false`, through the
# schedule override): at TP 1 that lets 544 workgroups be resident instead of 272 (LDS 11.9 KB
# instead of 46.9 KB per workgroup). CUDA graphs as run.sh; writes $OUT/results-nolds.tgz and
# $OUT/summary-nolds.txt.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-ffn-one-launch
for f in ffn_block_tp1 ffn_block; do
    WAVEFUSE_SCHEDULE_SM90=x_in_lds=false $W mgpu-bench --same-device --kernel-file $R/$f.wfir \
        --samples 10 --calls 50 --json "$OUT/nolds-$f.json" --md "$OUT/nolds-$f.md" > "$OUT/nolds-$f.txt" 2>&1
    WAVEFUSE_SCHEDULE_SM90=x_in_lds=false $W emit --kernel-file $R/$f.wfir --target sm90 \
        --placement same-device 2> /dev/null | sed -n 2p > "$OUT/nolds-$f-launch.txt"
done
tar czf "$FINAL/results-nolds.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary-nolds.txt")
for f in ffn_block_tp1 ffn_block; do echo "== $f"; cat "$OUT/nolds-$f-launch.txt"; grep -E "^\| " "$OUT/nolds-$f.md" | tail -1; done
