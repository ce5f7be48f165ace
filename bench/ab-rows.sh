# Sourced (not run) by the issue-40 device run scripts under bench/results/ after
# bench/device-prelude.sh: the run's header (date, card, commits into $FINAL/gpu.txt, the log
# into $OUT/log.txt), `el` (seconds since the start) and `run_ab TAG SHAPE "BATCHES" OVERRIDE`,
# one `wavefuse ab gemv_int4 --timing graphs --iters 200` at the issue's shapes:
#   n17408 = 5120 -> 17408, k17408 = 17408 -> 5120, n4352 = 5120 -> 4352 (TP 4 rank),
#   k4352 = 4352 -> 5120 (TP 4 rank); its report in $OUT/TAG.txt and $FINAL/ab/ (kept as it
#   runs: a call cut short returns it), a line per call in $OUT/exits.txt and $FINAL/progress.txt;
# `start_marlin` / `run_others` for Marlin, tinygemm and cuBLAS in the same call, and `tune_row`
# (a quick tune and its winner beside the default; below), `run_manual` (a hand-written kernel beside
# the default in one `ab`).
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$FINAL/gpu.txt"
echo "wavefuse $WAVEFUSE_COMMIT; marlin $(cat carry/marlin/COMMIT)" | tee -a "$FINAL/gpu.txt"
AB_CONFIGS=bench/results/2026-12-03-h200-marlin
shapes() { local s=""; for b in $2; do s="$s,$1-b$b"; done; echo "${s#,}"; }
cfg() { case $1 in k17408) echo "--model-config $AB_CONFIGS/k17408-config.json" ;; k4352) echo "--model-config $AB_CONFIGS/k4352-config.json" ;; esac; }
pre() { [ "$1" = n4352 ] && echo qwen27b-tp4 || echo qwen27b-tp1; }
run_ab() { # tag shape batches override
  local tag=$1 shape=$2 bs=$3 ov=$4
  # shellcheck disable=SC2046
  WAVEFUSE_SCHEDULE_SM90="$ov" timeout 120 $W ab gemv_int4 $(cfg $shape) --shapes "$(shapes $(pre $shape) "$bs")" \
      --timing graphs --iters 200 --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
  echo "$tag [$ov]: exit $? ($(el) s)" >> "$OUT/exits.txt"
  { tail -1 "$OUT/exits.txt"; grep -E " generated |ERROR|refused" "$OUT/$tag.txt" | cut -c1-150; } >> "$FINAL/progress.txt"
  mkdir -p "$FINAL/ab"
  cp "$OUT/$tag.txt" "$FINAL/ab/"
}
# `run_manual TAG SHAPE "BATCHES" ABI`: as `run_ab` with the defaults, plus a hand-written kernel
# (`--manual`: the ABI file's `source` beside it) checked against the f64 reference and timed
# beside the generated one in the same `ab`.
run_manual() {
  local tag=$1 shape=$2 bs=$3 abi=$4 src
  src="$(dirname "$abi")/$(sed -n 's/^source = "\(.*\)"/\1/p' "$abi")"
  # shellcheck disable=SC2046
  timeout 200 $W ab gemv_int4 $(cfg $shape) --shapes "$(shapes $(pre $shape) "$bs")" --manual "$src" --abi "$abi" \
      --timing graphs --iters 200 --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
  echo "$tag [$(basename "$abi")]: exit $? ($(el) s)" >> "$OUT/exits.txt"
  { tail -1 "$OUT/exits.txt"; grep -E " generated | hand-written |ERROR|refused|WRONG" "$OUT/$tag.txt" | cut -c1-150; } >> "$FINAL/progress.txt"
  mkdir -p "$FINAL/ab"
  cp "$OUT/$tag.txt" "$FINAL/ab/"
}
# Marlin beside the wavefuse rows: `start_marlin` builds it in the background (bench/marlin-build.sh
# into /tmp/marlin), `run_others "B1,B2,…"` waits for the build and runs bench/torch/marlin_bench.py
# (Marlin, tinygemm, cuBLAS FP16) at the issue's four shapes and those batches into
# $OUT/others.txt, its Markdown table into $FINAL/others.md.
start_marlin() {
  bash bench/marlin-build.sh /tmp/marlin "$OUT/marlin-build.txt" &
  MARLIN_BUILD=$!
}
run_others() {
  wait "$MARLIN_BUILD"
  tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
  timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib /tmp/marlin/libmarlin.so \
      --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
      --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches "$1" > "$OUT/others.txt" 2>&1
  echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
  grep -E "^\|" "$OUT/others.txt" > "$FINAL/others.md"
}
# `tune_row SHAPE BATCH DEADLINE`: `wavefuse tune --quick --budget 120` at one row (its report in
# $OUT/tune-SHAPE-bBATCH.md, copied to $FINAL, its store in $OUT/tuned-….toml), then `ab --timing
# graphs` of the default and of the tuned winner in the same call (progress lines in $FINAL).
tune_row() {
  local shape=$1 b=$2 deadline=$3
  local tag="$shape-b$b" sh
  sh="$(pre "$shape")-b$b"
  # shellcheck disable=SC2046
  timeout $((deadline + 40)) $W tune gemv_int4 $(cfg "$shape") --shapes "$sh" --quick --budget 120 --min-occupancy 1 \
      --deadline "$deadline" --no-cache-store --store "$OUT/tuned-$tag.toml" --md "$OUT/tune-$tag.md" \
      > "$OUT/tune-$tag.txt" 2>&1
  echo "tune $tag: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
  cp "$OUT/tune-$tag.md" "$FINAL/" 2>/dev/null
  for side in default tuned; do
    local extra=()
    [ $side = tuned ] && extra=(--schedule tuned --tuned-store "$OUT/tuned-$tag.toml")
    # shellcheck disable=SC2046
    timeout 40 $W ab gemv_int4 $(cfg "$shape") --shapes "$sh" --timing graphs --iters 200 "${extra[@]}" \
        > "$OUT/ab-$side-$tag.txt" 2>&1
    echo "ab $side $tag: exit $? ($(el) s)" >> "$OUT/exits.txt"
    grep -E " generated " "$OUT/ab-$side-$tag.txt" | sed "s/^/$side /" | cut -c1-150 >> "$FINAL/progress.txt"
  done
}
