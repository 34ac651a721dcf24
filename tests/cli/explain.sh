#!/usr/bin/env bash
# `kiln explain` end to end: the traced graph and the explain report with a recompile, a
# graph break under --fullgraph naming halving_mlp.cpp's line (exit 1), its while_loop
# rewrite compiling whole, --dot output with module clusters, the backends (fusion groups
# on cpu, --backend interp) and the option errors.
# Usage: explain.sh KILN_BINARY. Needs no dataset (inputs are random).
set -euo pipefail
kiln="$1"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

run mlp explain --model fashion_mlp
[ "$rc" -eq 0 ] || fail "fashion_mlp: exit $rc: $(cat "$tmp/mlp.txt")"
has "$tmp/mlp.txt" "graph FashionMLP" "fashion_mlp"
has "$tmp/mlp.txt" "recompile 2/8" "fashion_mlp"
has "$tmp/mlp.txt" "2 graphs, 0 graph breaks, 1 recompile, 2 calls" "fashion_mlp"
# The default backend: pass timings, kernel counts and the fusion groups after the passes.
has "$tmp/mlp.txt" "(backend cpu)" "fashion_mlp"
has "$tmp/mlp.txt" "backend: cpu: passes" "fashion_mlp"
has "$tmp/mlp.txt" "passes: canonicalize" "fashion_mlp"
has "$tmp/mlp.txt" "fused(" "fashion_mlp"

# --freeze: the parameters fold into the graph (the weights' transposes become constants).
run frozen explain --model fashion_mlp --freeze
[ "$rc" -eq 0 ] || fail "--freeze: exit $rc: $(cat "$tmp/frozen.txt")"
has "$tmp/frozen.txt" "frozen parameters" "--freeze"
if grep -q "frozen parameters" "$tmp/mlp.txt"; then fail "without --freeze: parameters frozen"; fi

run interp explain --model fashion_mlp --backend interp
[ "$rc" -eq 0 ] || fail "--backend interp: exit $rc: $(cat "$tmp/interp.txt")"
has "$tmp/interp.txt" "(backend interp)" "--backend interp"
run badbackend explain --model fashion_mlp --backend gpu
[ "$rc" -eq 1 ] || fail "--backend gpu: exit $rc"
has "$tmp/badbackend.txt" "--backend expects one of cpu, cuda, interp, got 'gpu'" "--backend gpu"

run break explain --model halving_mlp --fullgraph
[ "$rc" -ne 0 ] || fail "halving_mlp --fullgraph: exit 0"
has "$tmp/break.txt" "halving_mlp.cpp:" "halving_mlp --fullgraph"
has "$tmp/break.txt" "compile(fullgraph) failed" "halving_mlp --fullgraph"

run while explain --model halving_mlp_while --fullgraph --batch 3
[ "$rc" -eq 0 ] || fail "halving_mlp_while --fullgraph: exit $rc: $(cat "$tmp/while.txt")"
has "$tmp/while.txt" "while_loop" "halving_mlp_while"
has "$tmp/while.txt" "float32[3, 1, 28, 28], then float32[4, 1, 28, 28]" "halving_mlp_while --batch"

run dot explain --model fashion_mlp --dot "$tmp/x.dot"
[ "$rc" -eq 0 ] || fail "--dot: exit $rc: $(cat "$tmp/dot.txt")"
[ -s "$tmp/x.dot" ] || fail "--dot wrote no file"
has "$tmp/x.dot" "digraph" "--dot"
has "$tmp/x.dot" "cluster" "--dot"
# The graph after the passes, fusion groups as clusters.
[ -s "$tmp/x.fused.dot" ] || fail "--dot wrote no x.fused.dot: $(cat "$tmp/dot.txt")"
has "$tmp/x.fused.dot" "of fused" "--dot (fused)"
has "$tmp/dot.txt" "x.fused.dot (after the passes" "--dot (fused)"
if grep -qF "replaced the existing file" "$tmp/dot.txt"; then fail "--dot: a first run replaced a file"; fi
# --dot names one file but writes up to four: a second run says which existing files it replaced.
run dot_again explain --model fashion_mlp --dot "$tmp/x.dot"
has "$tmp/dot_again.txt" "x.dot (replaced the existing file)" "--dot twice"
has "$tmp/dot_again.txt" "x.fused.dot (after the passes: each fusion group is a dashed cluster) (replaced the existing file)" "--dot twice (fused)"
if command -v dot > /dev/null; then
  [ -s "$tmp/x.png" ] || fail "--dot: dot is installed but no x.png was written"
fi

# Without --fullgraph the break runs eagerly; the DOT holds the ops traced before it.
run partial explain --model halving_mlp --dot "$tmp/partial.dot"
[ "$rc" -eq 0 ] || fail "halving_mlp: exit $rc: $(cat "$tmp/partial.txt")"
has "$tmp/partial.txt" "the trace stops here" "halving_mlp"
has "$tmp/partial.txt" "2 graph breaks" "halving_mlp"
has "$tmp/partial.dot" "digraph" "halving_mlp --dot"
has "$tmp/partial.dot" "fc2" "halving_mlp --dot"

run opt explain --model fashion_mlp --bogus 1
[ "$rc" -eq 1 ] || fail "unknown option: exit $rc"
has "$tmp/opt.txt" "unknown option '--bogus'. Options: --model NAME, --config JSON, --batch N, --fullgraph, --freeze, --dot FILE, --backend NAME" "unknown option"
run nomodel explain
[ "$rc" -eq 1 ] || fail "no --model: exit $rc"
has "$tmp/nomodel.txt" "--model NAME is required. Models: fashion_mlp" "no --model"
has "$tmp/nomodel.txt" "halving_mlp_while" "no --model"
run batch explain --model fashion_mlp --batch 0
[ "$rc" -eq 1 ] || fail "--batch 0: exit $rc"
has "$tmp/batch.txt" "--batch expects an integer in [1, 1048576], got 0" "--batch 0"
run baddot explain --model fashion_mlp --dot "$tmp/no/such/dir/x.dot"
[ "$rc" -eq 1 ] || fail "unwritable --dot: exit $rc"
has "$tmp/baddot.txt" "expected a writable --dot file, cannot open" "unwritable --dot"
if [ -w /dev/full ]; then
  run fulldot explain --model fashion_mlp --dot /dev/full
  [ "$rc" -eq 1 ] || fail "--dot /dev/full: exit $rc"
  has "$tmp/fulldot.txt" "writing --dot file '/dev/full' failed" "--dot /dev/full"
fi
echo "kiln explain: all checks passed"
