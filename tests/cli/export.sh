#!/usr/bin/env bash
# `kiln export` and `kiln run` end to end: a tiny trained checkpoint exported with a dynamic
# batch (s0) and with a static one, `kiln run --info`, a run on an input file written here
# (by name, then in file order) with --output, and the error paths (missing artifact, both
# batch flags, a batch the static artifact's guard refuses, missing options).
# Usage: export.sh KILN_BINARY. Exits 77 (skipped) when Fashion-MNIST is not installed: a
# checkpoint comes from `kiln train`, which needs it.
set -euo pipefail
kiln="$1"
dir="${KILN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# Errors that need no checkpoint first.
run both export --checkpoint x.safetensors -o "$tmp/a" --batch 3 --dynamic-batch
[ "$rc" -eq 1 ] || fail "--batch with --dynamic-batch: exit $rc"
has "$tmp/both.txt" "--batch and --dynamic-batch cannot be combined" "--batch with --dynamic-batch"
run nockpt export -o "$tmp/a"
[ "$rc" -eq 1 ] || fail "no --checkpoint: exit $rc"
has "$tmp/nockpt.txt" "expected --checkpoint FILE" "no --checkpoint"
run missing run "$tmp/no-such.kiln" --info
[ "$rc" -eq 1 ] || fail "missing artifact: exit $rc"
has "$tmp/missing.txt" "no-such.kiln" "missing artifact"
run nodir run --input x.safetensors
[ "$rc" -eq 1 ] || fail "run without DIR: exit $rc"
has "$tmp/nodir.txt" "expected the artifact directory first" "run without DIR"

if [ ! -e "$dir/t10k-labels-idx1-ubyte.gz" ] && [ ! -e "$dir/t10k-labels-idx1-ubyte" ]; then
  echo "Fashion-MNIST not installed in $dir: skipping export/run"
  exit 77
fi
run train train --model fashion_mlp --epochs 1 --max-train 256 --max-test 64 \
  --save "$tmp/mlp.safetensors"
[ "$rc" -eq 0 ] || fail "train: exit $rc: $(cat "$tmp/train.txt")"

# The default: a dynamic batch, dim 0 of the input is the symbol s0.
run export export --checkpoint "$tmp/mlp.safetensors" -o "$tmp/mlp.kiln"
[ "$rc" -eq 0 ] || fail "export: exit $rc: $(cat "$tmp/export.txt")"
has "$tmp/export.txt" "manifest.json" "export"
has "$tmp/export.txt" "s0" "export"
has "$tmp/export.txt" "model fashion_mlp" "export"

run info run "$tmp/mlp.kiln" --info
[ "$rc" -eq 0 ] || fail "run --info: exit $rc: $(cat "$tmp/info.txt")"
# A table, not the manifest's one-line JSON: the unbounded batch reads 1..∞.
has "$tmp/info.txt" "input   x          float32  [s0 in 1..∞, 1, 28, 28]" "run --info"
has "$tmp/info.txt" "output  output0    float32  [s0, 10]" "run --info"
has "$tmp/info.txt" "fashion_mlp" "run --info"
has "$tmp/info.txt" "runs here: yes (loaded and checked in " "run --info"
if grep -qF "9223372036854775807" "$tmp/info.txt"; then fail "run --info prints int64's maximum"; fi

# input.safetensors: NAME float32[BATCH, 1, 28, 28], every value 0.5 (0x3f000000), written
# byte by byte: an 8-byte little-endian header length, the JSON header, the raw data.
write_input() {
  local path="$1" name="$2" batch="$3"
  local count=$((batch * 784))
  local header="{\"$name\":{\"dtype\":\"F32\",\"shape\":[$batch,1,28,28],\"data_offsets\":[0,$((count * 4))]}}"
  while [ $((${#header} % 8)) -ne 0 ]; do header="$header "; done
  {
    # shellcheck disable=SC2059 # the length byte is an octal escape made here
    printf "\\$(printf %03o "${#header}")\\0\\0\\0\\0\\0\\0\\0"
    printf '%s' "$header"
    for ((i = 0; i < count; i++)); do printf '\0\0\0\077'; done
  } > "$path"
}
write_input "$tmp/in.safetensors" x 2
run run run "$tmp/mlp.kiln" --input "$tmp/in.safetensors" --output "$tmp/out.safetensors"
[ "$rc" -eq 0 ] || fail "run: exit $rc: $(cat "$tmp/run.txt")"
has "$tmp/run.txt" "input  x: float32[2, 1, 28, 28]" "run"
has "$tmp/run.txt" ": float32[2, 10]" "run"
has "$tmp/run.txt" "argmax per row:" "run"
has "$tmp/run.txt" "ms (median of" "run"
[ -s "$tmp/out.safetensors" ] || fail "run --output wrote nothing: $(cat "$tmp/run.txt")"
# One tensor under another name is taken in file order; batch 3 fits the dynamic batch.
write_input "$tmp/other.safetensors" pixels 3
run order run "$tmp/mlp.kiln" --input "$tmp/other.safetensors"
[ "$rc" -eq 0 ] || fail "run by order: exit $rc: $(cat "$tmp/order.txt")"
has "$tmp/order.txt" ": float32[3, 10]" "run by order"

# A static batch: the guard refuses another batch size, naming the input.
run static export --checkpoint "$tmp/mlp.safetensors" -o "$tmp/static.kiln" --batch 3
[ "$rc" -eq 0 ] || fail "export --batch 3: exit $rc: $(cat "$tmp/static.txt")"
has "$tmp/static.txt" "float32[3, 1, 28, 28]" "export --batch 3"
run guard run "$tmp/static.kiln" --input "$tmp/in.safetensors"
[ "$rc" -eq 1 ] || fail "batch 2 into a batch-3 artifact: exit $rc: $(cat "$tmp/guard.txt")"
has "$tmp/guard.txt" "kiln run: " "guard"
has "$tmp/guard.txt" "input 'x' expects float32[3, 1, 28, 28], got float32[2, 1, 28, 28]" "guard"
if grep -qE '\[runtime/[^]]*:[0-9]+\]' "$tmp/guard.txt"; then
  fail "guard: kiln's source path in a CLI message: $(cat "$tmp/guard.txt")"
fi

# --max-batch bounds the dynamic batch: batch 3 is refused by a max-batch-2 artifact.
run bounded export --checkpoint "$tmp/mlp.safetensors" -o "$tmp/bounded.kiln" --max-batch 2
[ "$rc" -eq 0 ] || fail "export --max-batch 2: exit $rc: $(cat "$tmp/bounded.txt")"
has "$tmp/bounded.txt" "s0 in [1, 2]" "export --max-batch 2"
run bounded_run run "$tmp/bounded.kiln" --input "$tmp/other.safetensors"
[ "$rc" -eq 1 ] || fail "batch 3 into a max-batch-2 artifact: exit $rc"
has "$tmp/bounded_run.txt" "dim 0 (s0) is 3, outside the range [1, 2]" "max-batch guard"

# Weights inside a shared library run the same.
run embedded export --checkpoint "$tmp/mlp.safetensors" -o "$tmp/embedded.kiln" --embed-weights
[ "$rc" -eq 0 ] || fail "export --embed-weights: exit $rc: $(cat "$tmp/embedded.txt")"
has "$tmp/embedded.txt" "weights.so" "export --embed-weights"
run embedded_run run "$tmp/embedded.kiln" --input "$tmp/in.safetensors"
[ "$rc" -eq 0 ] || fail "run with embedded weights: exit $rc: $(cat "$tmp/embedded_run.txt")"
grep "argmax per row:" "$tmp/run.txt" > "$tmp/argmax_file.txt"
grep "argmax per row:" "$tmp/embedded_run.txt" > "$tmp/argmax_embedded.txt"
cmp -s "$tmp/argmax_file.txt" "$tmp/argmax_embedded.txt" ||
  fail "embedded weights changed the result: $(cat "$tmp/embedded_run.txt")"

run wrongfile run "$tmp/mlp.kiln" --input "$tmp/mlp.safetensors"
[ "$rc" -eq 1 ] || fail "a checkpoint as --input: exit $rc"
has "$tmp/wrongfile.txt" "to hold the artifact's inputs (x) by name, or exactly 1 tensor" "--input"
run noinput run "$tmp/mlp.kiln"
[ "$rc" -eq 1 ] || fail "run without --input: exit $rc"
has "$tmp/noinput.txt" "expected --input FILE.safetensors" "run without --input"
echo "kiln export/run: all checks passed"
