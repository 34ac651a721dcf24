#!/usr/bin/env bash
# Hostile input through the `kiln` CLI: configs whose tensor sizes overflow int64, or fit it
# but cannot be allocated, end with a kiln error (exit status 1) naming the shape or the
# bytes, never a crash (a signal's 128 + N) or a wrapped allocation; a --save path that
# cannot be written is refused before training.
# Usage: hostile.sh KILN_BINARY. Needs no dataset.
set -euo pipefail
kiln="$1"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

too_many="more elements than a 64-bit size can count"
refused mlp_max "the shape [9223372036854775807, 784] has $too_many" \
  summary --model fashion_mlp --config '{"d_hidden": 9223372036854775807}'
refused mlp_2e62 "the shape [4611686018427387904, 784] has $too_many" \
  summary --model fashion_mlp --config '{"d_hidden": 4611686018427387904}'
refused residual "$too_many" summary --model residual_mlp --config '{"d_hidden": 9223372036854775807}'
refused cnn "$too_many" summary --model batch_norm_cnn --config '{"channels1": 4611686018427387904}'
refused transformer "$too_many" \
  summary --model transformer_classifier --config '{"d_model": 4611686018427387904, "nhead": 1}'
refused bench_mlp "$too_many" bench --model fashion_mlp --config '{"d_hidden": 9223372036854775807}'
# Fits memory's address space but not the per-tensor limit: refused before anything is
# written (it once grew to 22 GB until the OOM killer ended it); the limit is settable.
refused mlp_3e6 "parameter 'weight' float32[3000000, 784] has 2352000000 elements" \
  summary --model fashion_mlp --config '{"d_hidden": 3000000}'
set +e
KILN_MAX_STATE_ELEMENTS=1000 "$kiln" summary --model fashion_mlp > "$tmp/limit.txt" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "KILN_MAX_STATE_ELEMENTS=1000: exit $rc"
has "$tmp/limit.txt" "more than the limit of 1000 per tensor" "KILN_MAX_STATE_ELEMENTS"
# The CLI feeds 28 x 28 images: a config made for other images is refused with the --config
# fix before anything is built (the allocator's out-of-memory error is tested in C++).
refused transformer_oom "needs 28 pixels per image side" \
  summary --model transformer_classifier --config '{"image_size": 3037000500}'
# A --save path that cannot be written fails before training (no dataset is read).
refused save_missing_dir "the directory '/nonexistent' does not exist" \
  train --model fashion_mlp --epochs 1 --save /nonexistent/x.safetensors
if grep -qF "training on" "$tmp/save_missing_dir.txt"; then
  fail "save_missing_dir: trained before refusing the path: $(cat "$tmp/save_missing_dir.txt")"
fi
refused save_is_dir "is a directory" train --model fashion_mlp --epochs 1 --save "$tmp"
# A checkpoint whose stored input_shape is 100000 x 100000 pixels: export refuses the example
# input before allocating it (it once tried to allocate 80 GB), naming the estimate.
# FashionMLP with d_hidden 1: six small tensors.
zero_checkpoint "$tmp/huge_input.safetensors" \
  '{"model": "fashion_mlp", "config": {"d_hidden": 1}, "input_shape": [1, 100000, 100000]}' \
  '{"fc1.weight": [1, 784], "fc1.bias": [1], "fc2.weight": [1, 1], "fc2.bias": [1],
    "fc3.weight": [10, 1], "fc3.bias": [10]}'
refused huge_input "the example input [2, 1, 100000, 100000] needs at least 80000000000 bytes for the input itself" \
  export --checkpoint "$tmp/huge_input.safetensors" -o "$tmp/huge.kiln"
[ ! -e "$tmp/huge.kiln" ] || fail "huge_input: an artifact was written"
echo "hostile.sh: all passed"
