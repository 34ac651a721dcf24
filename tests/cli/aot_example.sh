#!/usr/bin/env bash
# Ahead-of-time export end to end: `kiln train` a FashionMLP, `kiln eval` its checkpoint,
# `kiln export` it, and run it through docs/examples/fashion_classifier.c (plain C on
# libkiln_rt): the C program must print exactly the accuracy eager evaluation printed.
# Usage: aot_example.sh KILN_BINARY C_EXAMPLE_BINARY. Exits 77 (skipped) without Fashion-MNIST.
set -euo pipefail
kiln="$1"
example="$2"
dir="${KILN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ ! -e "$dir/t10k-labels-idx1-ubyte.gz" ]; then
  echo "Fashion-MNIST not installed in $dir: skipping"
  exit 77
fi
"$kiln" train --model fashion_mlp --epochs 1 --max-train 5000 --max-test 3000 \
  --save "$tmp/fashion.safetensors" > "$tmp/train.txt"
"$kiln" eval --checkpoint "$tmp/fashion.safetensors" --max-test 3000 > "$tmp/eval.txt"
"$kiln" export --checkpoint "$tmp/fashion.safetensors" -o "$tmp/fashion.kiln" > "$tmp/export.txt"
cat "$tmp/export.txt"
"$example" "$tmp/fashion.kiln" "$dir" 3000 > "$tmp/c.txt"
cat "$tmp/c.txt"
eager="$(grep '^test accuracy: ' "$tmp/eval.txt" | sed 's/^test accuracy: //')"
native="$(grep '^kiln_rt (C) test accuracy: ' "$tmp/c.txt" | sed 's/^kiln_rt (C) test accuracy: //')"
[ -n "$eager" ] || fail "kiln eval printed no accuracy"
[ "$eager" = "$native" ] || fail "the C program's accuracy $native differs from eager's $eager"
grep -q "batch    1: kiln_rt" "$tmp/c.txt" || fail "no batch-1 latency"

# A damaged artifact is refused with the reason, not run.
printf 'x' >> "$tmp/fashion.kiln/weights.safetensors"
if "$example" "$tmp/fashion.kiln" "$dir" 100 2> "$tmp/err.txt"; then fail "damaged artifact ran"; fi
grep -q "sha256" "$tmp/err.txt" || fail "damaged artifact: $(cat "$tmp/err.txt")"
echo "OK: eager $eager, C $native"
