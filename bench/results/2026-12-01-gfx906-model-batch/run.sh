#!/usr/bin/env bash
# The MI50 time model of the gfx906 gemv_int4 default (floor path) at TP 1, 5120 -> 17408, batch
# 1/2/4/8: hipcc 5.2 compiles, llvm-objdump counts the hot loop (build machine, no AMD GPU).
set -euo pipefail
OUT=${OUT:-$(dirname "$0")}
for b in 1 2 4 8; do
    wavefuse emit gemv_int4 --tp 1 --batch "$b" --ir > "$OUT/gemv_int4-b$b.wfir"
    wavefuse check --kernel-file "$OUT/gemv_int4-b$b.wfir" --target gfx906 > "$OUT/check-b$b.txt"
done
