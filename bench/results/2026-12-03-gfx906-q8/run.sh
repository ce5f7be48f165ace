#!/usr/bin/env bash
# The MI50 time model of the opt-in q8-activation GEMV (examples/gemv_int4_q8.wfir: quantize_int8.rne
# + gemv_q8, 5120 -> 17408, TP 1) at batch 1/2/4/8 and activation blocks of 32 and 128, next to the
# FP16-activation default (gemv_int4) at the same batch: hipcc 5.2 compiles, llvm-objdump counts
# the hot loop (build machine, no AMD GPU). Modelled, not measured.
set -euo pipefail
OUT=${OUT:-$(dirname "$0")}
WF=${WF:-wavefuse}
for b in 1 2 4 8; do
    for blk in 32 128; do
        sed -e "s/\[8, /[$b, /g" -e "s/block=32/block=$blk/g" -e "s/f32\[$b, 160\]/f32[$b, $((5120 / blk))]/" \
            examples/gemv_int4_q8.wfir > "$OUT/gemv_int4_q8-b$b-block$blk.wfir"
        "$WF" check --kernel-file "$OUT/gemv_int4_q8-b$b-block$blk.wfir" --target gfx906 \
            > "$OUT/check-q8-b$b-block$blk.txt"
    done
    "$WF" emit gemv_int4 --tp 1 --batch "$b" --ir > "$OUT/gemv_int4-b$b.wfir"
    "$WF" check --kernel-file "$OUT/gemv_int4-b$b.wfir" --target gfx906 > "$OUT/check-fp16-b$b.txt"
done
