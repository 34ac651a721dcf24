#!/usr/bin/env bash
# `kiln bench` end to end: the eager / compiled table with its ratio, compile time and the
# backend's compile stats on fashion_mlp and residual_mlp (a few iterations: no timing is
# checked), --backend interp, a graph-breaking model, and the option errors.
# Usage: bench.sh KILN_BINARY. Needs no dataset (inputs are random).
set -euo pipefail
kiln="$1"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# The table: both rows in µs/call, the ratio, the compile time and the stats line.
table() {
  has "$1" "eager " "$2"
  has "$1" " µs/call" "$2"
  has "$1" "compiled " "$2"
  has "$1" "ratio " "$2"
  has "$1" "x (eager / compiled)" "$2"
  has "$1" "compile " "$2"
  has "$1" " ms (the first compiled call" "$2"
  has "$1" "max |compiled - eager|" "$2"
}

run mlp bench --model fashion_mlp --iters 3
[ "$rc" -eq 0 ] || fail "fashion_mlp: exit $rc: $(cat "$tmp/mlp.txt")"
table "$tmp/mlp.txt" "fashion_mlp"
has "$tmp/mlp.txt" "model fashion_mlp" "fashion_mlp"
has "$tmp/mlp.txt" "input x float32[1, 1, 28, 28]" "fashion_mlp"
has "$tmp/mlp.txt" "median of 5 repeats of 3 calls" "fashion_mlp"
has "$tmp/mlp.txt" "(backend cpu)" "fashion_mlp"
has "$tmp/mlp.txt" "backend: cpu: passes" "fashion_mlp"
has "$tmp/mlp.txt" " kernels (" "fashion_mlp"

run res bench --model residual_mlp --iters 2 --batch 4 --config '{"num_blocks": 2}'
[ "$rc" -eq 0 ] || fail "residual_mlp: exit $rc: $(cat "$tmp/res.txt")"
table "$tmp/res.txt" "residual_mlp"
has "$tmp/res.txt" '"num_blocks":2' "residual_mlp --config"
has "$tmp/res.txt" "input x float32[4, 1, 28, 28]" "residual_mlp --batch"
has "$tmp/res.txt" "backend: cpu: passes" "residual_mlp"

run frozen bench --model fashion_mlp --iters 2 --freeze
[ "$rc" -eq 0 ] || fail "--freeze: exit $rc: $(cat "$tmp/frozen.txt")"
table "$tmp/frozen.txt" "--freeze"
has "$tmp/frozen.txt" "frozen parameters" "--freeze"

run interp bench --model fashion_mlp --iters 2 --backend interp
[ "$rc" -eq 0 ] || fail "--backend interp: exit $rc: $(cat "$tmp/interp.txt")"
table "$tmp/interp.txt" "--backend interp"
has "$tmp/interp.txt" "(backend interp)" "--backend interp"
has "$tmp/interp.txt" "backend: interp (the reference executor)" "--backend interp"

# A graph-breaking forward: no compile stats of its own, the line says why.
run seg bench --model halving_mlp --iters 2
[ "$rc" -eq 0 ] || fail "halving_mlp: exit $rc: $(cat "$tmp/seg.txt")"
table "$tmp/seg.txt" "halving_mlp"
has "$tmp/seg.txt" "backend: cpu: the forward graph-breaks and runs in segments" "halving_mlp"

run opt bench --model fashion_mlp --bogus 1
[ "$rc" -eq 1 ] || fail "unknown option: exit $rc"
has "$tmp/opt.txt" "unknown option '--bogus'. Options: --model NAME, --config JSON, --batch N, --iters N, --backend NAME, --freeze" "unknown option"
run nomodel bench
[ "$rc" -eq 1 ] || fail "no --model: exit $rc"
has "$tmp/nomodel.txt" "--model NAME is required. Models: fashion_mlp" "no --model"
run badmodel bench --model nosuch
[ "$rc" -eq 1 ] || fail "unknown model: exit $rc"
has "$tmp/badmodel.txt" "unknown model 'nosuch'" "unknown model"
run iters bench --model fashion_mlp --iters 0
[ "$rc" -eq 1 ] || fail "--iters 0: exit $rc"
has "$tmp/iters.txt" "--iters expects an integer in [1, 10000000], got 0" "--iters 0"
run itersnan bench --model fashion_mlp --iters many
[ "$rc" -eq 1 ] || fail "--iters many: exit $rc"
has "$tmp/itersnan.txt" "--iters expects an integer in [1, 10000000], got 'many'" "--iters many"
run batch bench --model fashion_mlp --batch -2
[ "$rc" -eq 1 ] || fail "--batch -2: exit $rc"
has "$tmp/batch.txt" "--batch expects an integer in [1, 1048576], got -2" "--batch -2"
run badbackend bench --model fashion_mlp --backend gpu
[ "$rc" -eq 1 ] || fail "--backend gpu: exit $rc"
has "$tmp/badbackend.txt" "--backend expects one of cpu, cuda, interp, got 'gpu'" "--backend gpu"
run badconfig bench --model fashion_mlp --config '{nope'
[ "$rc" -eq 1 ] || fail "bad --config: exit $rc"
has "$tmp/badconfig.txt" "--config expects a JSON object" "bad --config"
run novalue bench --model fashion_mlp --iters
[ "$rc" -eq 1 ] || fail "--iters without a value: exit $rc"
has "$tmp/novalue.txt" "--iters needs a value" "--iters without a value"
echo "kiln bench: all checks passed"
