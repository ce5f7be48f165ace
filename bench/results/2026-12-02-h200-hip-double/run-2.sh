#!/usr/bin/env bash
# Round 2 (one device call, after round 1 found graphs 3-10 % slower through the double on the
# smallest kernels): the runtime now uploads a HIP graph before its replay (hipGraphUpload where
# the library has it; the double maps it to cuGraphUpload). `ab --timing graphs` and
# `mgpu-bench --same-device` through `--runtime cuda` and `--runtime hip`, alternating twice.
source bench/device-prelude.sh
D=bench/results/2026-12-02-h200-hip-double
DBL=$(mktemp -d)
bash tests/hip-double/build.sh "$DBL" > "$OUT/double-build.txt" 2>&1
echo "double build: exit $?" >> "$OUT/exits.txt"
on() { # runtime, name, args...
    local rt=$1 name=$2; shift 2
    if [ "$rt" = hip ]; then
        LD_LIBRARY_PATH=$DBL timeout 120 $W "$@" --runtime hip > "$OUT/$name-hip.txt" 2>&1
    else
        timeout 120 $W "$@" --runtime cuda > "$OUT/$name-cuda.txt" 2>&1
    fi
    echo "$name $rt: exit $?" >> "$OUT/exits.txt"
}
for r in 1 2; do
    for rt in cuda hip; do
        on $rt ab-graphs-r$r ab --shapes qwen27b-tp4,qwen27b-tp1 --timing graphs --json "$OUT/ab-graphs-r$r-$rt.json"
        on $rt mgpu-same-r$r mgpu-bench --same-device --tp 4,2 --json "$OUT/mgpu-same-r$r-$rt.json"
    done
done
python3 $D/compare.py "$OUT" --round2 > "$OUT/compare.txt" 2>&1
echo "compare: exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
cat "$OUT/compare.txt"
