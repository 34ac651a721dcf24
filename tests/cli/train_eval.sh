#!/usr/bin/env bash
# The CLI end to end: `kiln summary` prints the tree and table, `kiln train --save` writes a
# checkpoint, and `kiln eval` rebuilds the model from that file alone and prints exactly the
# accuracy training printed. Also checks that bad options fail with a message and exit 1/2.
# Usage: train_eval.sh KILN_BINARY. Exits 77 (skipped) when Fashion-MNIST is not installed.
set -euo pipefail
kiln="$1"
dir="${KILN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

"$kiln" summary --model residual_mlp > "$tmp/summary.txt"
grep -q "(stem): Linear(in_features=784, out_features=256, bias=true)" "$tmp/summary.txt" ||
  fail "summary: tree missing"
grep -q "Total params: 729,866" "$tmp/summary.txt" || fail "summary: wrong total"
"$kiln" summary --model residual_mlp --config '{"d_hidden":512,"num_blocks":8}' |
  grep -q "Total params: 4,609,546" || fail "summary --config: wrong total"

set +e
"$kiln" summary --model nope 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "unknown model 'nope'" "$tmp/err.txt" || fail "unknown model: rc $rc"
set +e
"$kiln" train --model fashion_mlp --epochs zero 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "\-\-epochs expects an integer in \[1, 100000\], got 'zero'" "$tmp/err.txt" ||
  fail "bad --epochs: rc $rc"

if [ ! -e "$dir/t10k-labels-idx1-ubyte.gz" ] && [ ! -e "$dir/t10k-labels-idx1-ubyte" ]; then
  echo "Fashion-MNIST not installed in $dir: skipping train/eval"
  exit 77
fi
for model in fashion_mlp lazy_cnn; do
  "$kiln" train --model "$model" --epochs 1 --max-train 3000 --max-test 2000 \
    --save "$tmp/$model.safetensors" > "$tmp/train.txt"
  "$kiln" eval --checkpoint "$tmp/$model.safetensors" --max-test 2000 --check-finite \
    > "$tmp/eval.txt"
  grep -q "weights: all finite" "$tmp/eval.txt" || fail "$model: --check-finite printed nothing"
  trained="$(grep '^test accuracy: ' "$tmp/train.txt")" || fail "$model: train printed no accuracy"
  evaluated="$(grep '^test accuracy: ' "$tmp/eval.txt")" || fail "$model: eval printed no accuracy"
  [ "$trained" = "$evaluated" ] || fail "$model: train said '$trained', eval said '$evaluated'"
  echo "$model: $trained (train) == $evaluated (eval)"
done

# Data-parallel: two ranks under kiln launch; rank 0 alone prints and saves, and the
# checkpoint evaluates to the accuracy rank 0 printed.
"$kiln" train --model fashion_mlp --epochs 1 --max-train 3000 --max-test 2000 --nproc 2 \
  --save "$tmp/ddp.safetensors" > "$tmp/train_ddp.txt" 2>&1 ||
  fail "train --nproc 2: $(cat "$tmp/train_ddp.txt")"
grep -q '^\[rank 0\] training on 3000 images, 1 epochs, batch 128 (64 on each of 2 ranks)' "$tmp/train_ddp.txt" ||
  fail "train --nproc 2: no data-parallel banner: $(cat "$tmp/train_ddp.txt")"
if grep -q '^\[rank 1\]' "$tmp/train_ddp.txt"; then fail "train --nproc 2: rank 1 printed: $(cat "$tmp/train_ddp.txt")"; fi
trained="$(grep '^\[rank 0\] test accuracy: ' "$tmp/train_ddp.txt" | sed 's/^\[rank 0\] //')" ||
  fail "train --nproc 2 printed no accuracy"
"$kiln" eval --checkpoint "$tmp/ddp.safetensors" --max-test 2000 > "$tmp/eval_ddp.txt"
evaluated="$(grep '^test accuracy: ' "$tmp/eval_ddp.txt")"
[ "$trained" = "$evaluated" ] || fail "train --nproc 2 said '$trained', eval said '$evaluated'"
echo "fashion_mlp, 2 ranks: $trained"
set +e
"$kiln" train --model fashion_mlp --epochs 1 --max-train 300 --batch-size 129 --nproc 2 > "$tmp/odd.txt" 2>&1; rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "must split evenly over 2 ranks" "$tmp/odd.txt" ||
  fail "train --nproc 2 --batch-size 129: rc $rc: $(cat "$tmp/odd.txt")"

# kiln eval reads the test split only: a folder holding just the t10k files is enough.
mkdir "$tmp/test-only"
for f in "$dir"/t10k-*; do ln -s "$f" "$tmp/test-only/"; done
KILN_FASHION_MNIST_DIR="$tmp/test-only" "$kiln" eval --checkpoint "$tmp/fashion_mlp.safetensors" \
  --max-test 2000 > "$tmp/eval_test_only.txt" 2>&1 ||
  fail "eval without the training files: $(cat "$tmp/eval_test_only.txt")"
grep -q '^test accuracy: ' "$tmp/eval_test_only.txt" || fail "eval without the training files"

# A diverging run (lr 1e30) stops at the first non-finite loss, naming the step and the
# learning rate, and saves nothing (kiln eval --check-finite is tested in C++).
set +e
"$kiln" train --model fashion_mlp --epochs 1 --max-train 200 --max-test 100 --lr 1e30 \
  --save "$tmp/nan.safetensors" > "$tmp/train_nan.txt" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "training diverged" "$tmp/train_nan.txt" &&
  grep -q "learning rate" "$tmp/train_nan.txt" ||
  fail "a diverging run: rc $rc: $(cat "$tmp/train_nan.txt")"
[ ! -e "$tmp/nan.safetensors" ] || fail "a diverging run saved a checkpoint"
