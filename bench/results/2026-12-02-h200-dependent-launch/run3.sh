#!/usr/bin/env bash
# Third device call: where does `ab --launch dependent` stop? (runs 1 and 2: no row within 100 /
# 150 s). (1) the runtime GPU test that captures 20 dependent launches into a graph and replays
# it, printing each step; (2) `ab gemv_int4 --shapes qwen27b-tp1 --timing graphs --launch
# dependent --iters 20 --warmup 0` in the background: after 30 s the GPU's utilisation and, where
# gdb exists, every thread's backtrace.
source bench/device-prelude.sh
timeout 60 carry/gpu-tests --ignored --exact a_graph_of_dependent_launches_replays_sm90 --nocapture > "$OUT/graph-test.txt" 2>&1
echo "graph test: exit $?" >> "$OUT/exits.txt"
timeout 90 $W ab gemv_int4 --shapes qwen27b-tp1 --timing graphs --launch dependent --iters 20 --warmup 0 --json "$OUT/ab-dep.json" > "$OUT/ab-dep.txt" 2>&1 &
pid=$!
sleep 30
nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw --format=csv > "$OUT/smi-during.txt" 2>&1
child=$(pgrep -P $pid | head -1)
echo "timeout pid $pid, wavefuse pid $child" > "$OUT/stack.txt"
cat /proc/$child/status 2>/dev/null | grep -E "State|Threads" >> "$OUT/stack.txt"
for t in /proc/$child/task/*; do echo "$t $(cat $t/comm) $(cat $t/wchan 2>/dev/null) $(cat $t/stat | cut -d' ' -f3)"; done >> "$OUT/stack.txt" 2>&1
if command -v gdb > /dev/null; then gdb -batch -p $child -ex "thread apply all bt 12" >> "$OUT/stack.txt" 2>&1; else echo "no gdb" >> "$OUT/stack.txt"; fi
wait $pid
echo "ab dependent gemv_int4: exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
cat "$OUT/graph-test.txt" | tail -15
cat "$OUT/smi-during.txt"
head -60 "$OUT/stack.txt"
tail -5 "$OUT/ab-dep.txt"
