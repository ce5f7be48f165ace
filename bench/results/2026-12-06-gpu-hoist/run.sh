#!/usr/bin/env bash
# Issues 36 and 37, one device call (the second of 2026-12-06-gpu-ranks-entry's work):
# (i) the ranks entry with the ranks interleaved in the block index (820b6b8) against the blocked
# order of call 1 (ca4efa2) and the per-call fork/join (d290984), the four TP 4 kernels as ops;
# (ii) the tensor-core GEMV at pipeline depth 2 with its first unit's weight loads issued before
# the activations' staging (89072cc) — does it cut the fixed cost of the decoder's short GEMVs?
# From the repository root, carry/ holding the binary and extension of ca4efa2 (carry/wavefuse,
# carry/_wavefuse.abi3.so: depth 2 without the hoist, ranks blocked), of 820b6b8 (carry/new/:
# the hoist, ranks interleaved) and the package of d290984 (carry/py-old); the default (depth 1)
# is the same code in all.
# (Cut to the session's last device minutes: one round each, steps that do not fit are skipped.)
#   0. the four TP 4 communicating kernels as ops per call in a graph, three packages; ptxas -v of
#      the fused kernel's two entries
#   1. ab --timing graphs of the O projection at Llama-3.1-8B TP 1 b1: default, depth 2 hoisted
#   2. the decoder A/B (3 runs x 50 steps, paths a and c, batch 1, Llama-3.1-8B TP 1): depth 1,
#      depth 2 hoisted (WAVEFUSE_SCHEDULE_SM90)
set -uo pipefail
BUDGET=${BUDGET:-110}
T0=$(date +%s)
R=$(mktemp -d)
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
    if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
  done
fi
export PYTHONUNBUFFERED=1 WAVEFUSE_CACHE_DIR=$PWD/carry/cache
mkdir -p "$R/old/wavefuse" "$R/new/wavefuse"
cp -r python/wavefuse/. "$R/old/wavefuse/"; cp carry/_wavefuse.abi3.so "$R/old/wavefuse/_wavefuse.abi3.so"
cp -r python/wavefuse/. "$R/new/wavefuse/"; cp carry/new/_wavefuse.abi3.so "$R/new/wavefuse/_wavefuse.abi3.so"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader;
  python3 -c 'import torch; print("torch", torch.__version__)'
  echo "old $(cat carry/COMMIT), new $(cat carry/new/COMMIT)"; } | tee "$OUT/summary.txt"
step() { local t=$1 name=$2; shift 2
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 20 ]; then echo "$name: skipped (call budget spent)" | tee -a "$OUT/summary.txt"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  echo "== $name (timeout $t s)"; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - s )) s" | tee -a "$OUT/summary.txt"; tail -6 "$R/$name.log"; }
K=allreduce_residual,allreduce_residual_rmsnorm,gemv_int4_allreduce_rmsnorm,allreduce_int8
for i in 1; do
  for side in py-old blocked interleaved; do
    case $side in py-old) pp=$PWD/carry/py-old;; blocked) pp=$R/old;; interleaved) pp=$R/new;; esac
    PYTHONPATH=$pp:$PWD/python/tests step 25 "cost-$side-$i" python3 bench/python/graph_replay.py --replays 0 \
      --samples 25 --only $K --json "$R/cost-$side-$i.json"
  done
done
python3 - "$R" <<'PY' | tee "$OUT/cost.md"
import json, sys, glob, os, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(os.path.join(sys.argv[1], "cost-*.json"))):
    side = os.path.basename(f)[5:].rsplit("-", 1)[0]
    for r in json.load(open(f))["kernels"]:
        rows[r["kernel"]][side].append((r["per_call_us_in_graph"], r["rel_l2_last_replay"], r["error_word"]))
print("| kernel, TP 4 on one GPU | fork/join per call (d290984) us | ranks entry, blocked (ca4efa2) | ranks entry, interleaved (820b6b8) |")
print("|---|---:|---:|---:|")
for k, v in rows.items():
    cell = lambda n: ", ".join(f"{u:.2f}" + ("" if (l < 1e-2 and not e) else " BAD") for u, l, e in v.get(n, []))
    print(f"| `{k}` | {cell('py-old')} | {cell('blocked')} | {cell('interleaved')} |")
PY
# Registers of the per-rank entry and the ranks entry of each TP 4 kernel (ptxas -v).
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
for k in gemv_int4_allreduce_rmsnorm; do
  carry/new/wavefuse emit $k --tp 4 --target sm90 --placement same-device > "$R/$k.cu" 2>/dev/null
  "$NVCC" -arch=sm_90 -cubin -o /dev/null -Xptxas -v "$R/$k.cu" 2>&1 | grep -E "Compiling entry|registers" \
    | sed "s/^/$k: /" >> "$OUT/ptxas.txt"
done
cat "$OUT/ptxas.txt"
C=examples/decoder/wf_decoder/configs/llama31_8b.json
carry/wavefuse emit gemv_int4_allreduce_rmsnorm --ir --tp 1 --model-config $C \
  | sed 's/k=14336/k=4096/; s/f16\[1, 14336\]/f16[1, 4096]/' > "$R/o_proj.wfir"
variants="d1:carry/wavefuse:pipeline_depth=1 d2hoist:carry/new/wavefuse:pipeline_depth=2"
for v in $variants; do
  IFS=: read name bin ov <<< "$v"
  WAVEFUSE_SCHEDULE_SM90=$ov step 30 "abo-$name-1" $bin ab --kernel-file "$R/o_proj.wfir" --timing graphs --iters 300 \
    --json "$R/abo-$name-1.json"
done
python3 - "$R" <<'PY' | tee "$OUT/kernels.md"
import json, sys, glob, os, collections
t = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(glob.glob(os.path.join(sys.argv[1], "ab*-*.json"))):
    name = os.path.basename(path).split("-")[1]
    try:
        d = json.load(open(path))
    except Exception as e:
        print(path, e); continue
    for row in d.get("rows", []):
        g = row["generated"]
        tm = g.get("timing") or {}
        us = tm["repeats"][0]["median_us"] if tm.get("repeats") else None
        frac = tm.get("fraction_of_copy_bandwidth")
        ok = (g.get("check") or {}).get("pass")
        t[f"{row['kernel']} {row.get('dims', '')}"][name].append((us, frac, ok))
print("| kernel | depth 1 (default) us | depth 2, old | depth 2, first loads hoisted |")
print("|---|---:|---:|---:|")
def cell(v):
    return ", ".join(f"{u:.2f} ({f:.0%}{'' if ok else ' FAIL'})" if u and f else f"{u} {ok}" for u, f, ok in v)
for k, v in t.items():
    print(f"| {k} | {cell(v.get('d1', []))} | {cell(v.get('d2old', []))} | {cell(v.get('d2hoist', []))} |")
PY
A="python3 -m wf_decoder.ab --device cuda --steps 50 --runs 3 --config llama31_8b --tp 1 --batch 1 --paths a,c"
# Both variants or neither: the pair needs ~100 s.
[ $((BUDGET - ($(date +%s) - T0))) -lt 100 ] && echo "decoder: skipped (needs ~100 s of the call budget)" | tee -a "$OUT/summary.txt"
[ $((BUDGET - ($(date +%s) - T0))) -ge 100 ] && for i in 1; do
  for v in d1:old:pipeline_depth=1 d2hoist:new:pipeline_depth=2; do
    IFS=: read name pkg ov <<< "$v"
    PYTHONPATH=$R/$pkg:$PWD/examples/decoder WAVEFUSE_SCHEDULE_SM90=$ov step 50 "dec-$name-$i" $A --out "$R/dec-$name-$i"
    grep -E "^\| (1|8) \|" "$R/dec-$name-$i/ab.md" | sed "s/^/$name-$i /" | tee -a "$OUT/decoder.txt"
  done
done
cp "$R"/dec-*-1/ab.md "$OUT/" 2>/dev/null
for f in "$R"/dec-*/ab.md; do n=$(basename $(dirname $f)); cp "$f" "$OUT/$n.md"; done
echo "total $(( $(date +%s) - T0 )) s" | tee -a "$OUT/summary.txt"
