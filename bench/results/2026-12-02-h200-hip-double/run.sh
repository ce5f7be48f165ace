#!/usr/bin/env bash
# One device call (H200): the harness's HIP path end to end through the test double of HIP over
# the CUDA driver API (tests/hip-double, built here with cc): the same release binary runs each
# command twice, `--runtime cuda` and `--runtime hip` with the double on LD_LIBRARY_PATH,
# alternating: `ab` (events, and graphs), `mgpu-bench --same-device`, the quick GPU suite, and a
# small `tune`. compare.py prints the verdicts side by side. Writes $OUT/results.tgz and
# $OUT/summary.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-02-h200-hip-double
DBL=$(mktemp -d)
bash tests/hip-double/build.sh "$DBL" > "$OUT/double-build.txt" 2>&1
echo "double build: exit $?" >> "$OUT/exits.txt"
bash tests/hip-double/smoke.sh > "$OUT/double-smoke.txt" 2>&1
echo "double smoke: exit $?" >> "$OUT/exits.txt"
on() { # runtime, name, timeout, args...
    local rt=$1 name=$2 t=$3; shift 3
    if [ "$rt" = hip ]; then
        LD_LIBRARY_PATH=$DBL timeout "$t" $W "$@" --runtime hip > "$OUT/$name-hip.txt" 2>&1
    else
        timeout "$t" $W "$@" --runtime cuda > "$OUT/$name-cuda.txt" 2>&1
    fi
    echo "$name $rt: exit $?" >> "$OUT/exits.txt"
}
for rt in cuda hip cuda hip; do
    n=$(grep -c "^ab-events $rt" "$OUT/exits.txt")
    on $rt ab-events-r$((n+1)) 120 ab --shapes qwen27b-tp4,qwen27b-tp1 --json "$OUT/ab-events-r$((n+1))-$rt.json"
    sed -i "s/^ab-events-r$((n+1)) $rt/ab-events $rt r$((n+1))/" "$OUT/exits.txt"
done
for rt in cuda hip; do
    on $rt ab-graphs 120 ab --shapes qwen27b-tp4,qwen27b-tp1 --timing graphs --json "$OUT/ab-graphs-$rt.json"
    on $rt mgpu-same 120 mgpu-bench --same-device --tp 4,2 --json "$OUT/mgpu-same-$rt.json"
done
for rt in cuda hip; do
    on $rt suite-quick 200 gpu-suite --quick --deadline 150 --out "$OUT/suite-quick-$rt.json"
done
for rt in cuda hip; do
    on $rt tune 120 tune gemv_int4 --shapes qwen27b-tp1 --quick --budget 8 --no-cache-store --json "$OUT/tune-$rt.json"
done
python3 $D/compare.py "$OUT" > "$OUT/compare.txt" 2>&1
echo "compare: exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
tail -3 "$OUT/double-smoke.txt"
cat "$OUT/compare.txt"
