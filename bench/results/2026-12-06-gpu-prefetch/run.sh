#!/usr/bin/env bash
# Issue 37, one device call: the decoder's wavefuse kernels launched as programmatic dependents
# (`--launch dependent`) and with their weights prefetched into L2 before the stream-order wait
# (`prefetch_before_wait`, the schedule field, through $WAVEFUSE_SCHEDULE_SM90), Llama-3.1-8B
# TP 1 batch 1 and 8, paths a, c, c2 in each process (3 runs x 50 steps, paths alternating, the
# profile of a step); four processes:
#   stream            as before (the control of call 2026-12-06-gpu-prenorm)
#   dependent         programmatic dependent launches, nothing before the wait
#   dependent+pf      dependent launches, the weights' L2 prefetch before the wait, the signal after it
#   stream+pf         stream order with the prefetch (read-ahead only)
#   old-glue          the decoder before its glue change (carry/old/), stream order
# Usage, repository root, carry/ holding the binary, COMMIT and the extension:
#   [VARIANTS="stream dependent-pf"] bash bench/results/2026-12-06-gpu-prefetch/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
R=$(mktemp -d)
cp carry/_wavefuse.abi3.so python/wavefuse/_wavefuse.abi3.so
export PYTHONPATH=$PWD/python:$PWD/examples/decoder PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__)'; echo "wavefuse $WAVEFUSE_COMMIT"; } | tee "$OUT/summary.txt"
A="python3 -m wf_decoder.ab --device cuda --steps 50 --runs 3 --profile 5 --config llama31_8b --tp 1 --batch 1,8 --paths a,c,c2"
run() { # name, env spec, args...
  local n=$1 spec=$2; shift 2
  WAVEFUSE_SCHEDULE_SM90=$spec timeout 150 $A "$@" --out "$R/$n" > "$R/$n.log" 2>&1
  echo "$n: exit $? ($(el) s)" | tee -a "$OUT/summary.txt"
  cp "$R/$n/ab.md" "$OUT/$n.md" 2>/dev/null
  cp "$R/$n/ab.json" "$OUT/$n.json" 2>/dev/null
  grep -E "^\| [0-9]+ \| [0-9]+ \| (torch|wave)" "$R/$n/ab.md" | cut -c1-200 | tee -a "$OUT/summary.txt"
  tail -2 "$R/$n.log" >> "$OUT/summary.txt"
}
# VARIANTS (default: all four) names which processes run, in order.
for v in ${VARIANTS:-stream dependent dependent-pf stream-pf}; do
  case $v in
    stream) run stream "" --launch stream ;;
    # The decoder of ef16eab (before the glue change: RoPE, then two index_copy_, a boolean mask),
    # copied into carry/old/: the glue's control, the same kernels.
    old-glue) PYTHONPATH=$PWD/python:$PWD/carry/old/examples/decoder run old-glue "" --launch stream ;;
    dependent) run dependent "" --launch dependent ;;
    dependent-pf) run dependent-pf "prefetch_before_wait=true" --launch dependent ;;
    stream-pf) run stream-pf "prefetch_before_wait=true" --launch stream ;;
  esac
done
tar -C "$R" -czf "$OUT/all.tgz" .
cp -r "$OUT"/. "$FINAL"/
