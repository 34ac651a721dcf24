#!/usr/bin/env bash
# How every `kiln` command reads its command line: --help everywhere, --flag=value, repeated
# and conflicting flags refused, one meaning per flag name, numbers range-checked (never a
# silent "all"), did-you-mean suggestions for commands, options, models and config keys, model
# names in every spelling (catalog name, '-' for '_', earlier names),
# config errors phrased as --config fixes, and no kiln source paths in messages unless
# KILN_LOG asks. Also `kiln compile` end to end (it needs no dataset).
# Usage: options.sh KILN_BINARY.
set -euo pipefail
kiln="$1"
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# --help: every command, exit 0, its usage line and every option it accepts.
for command in demo summary train eval explain bench compile export run launch; do
  run "help_$command" "$command" --help
  [ "$rc" -eq 0 ] || fail "$command --help: exit $rc: $(cat "$tmp/help_$command.txt")"
  has "$tmp/help_$command.txt" "usage: kiln $command" "$command --help"
  has "$tmp/help_$command.txt" "-h, --help" "$command --help"
done
has "$tmp/help_train.txt" "--batch-size N" "train --help"
has "$tmp/help_train.txt" "--nproc N" "train --help"
has "$tmp/help_launch.txt" "--nproc N" "launch --help"
has "$tmp/help_export.txt" "-o, --output DIR" "export --help"
run help_h compile -h
[ "$rc" -eq 0 ] && has "$tmp/help_h.txt" "--cache-dir DIR" "compile -h"
run help_word help eval
[ "$rc" -eq 0 ] && has "$tmp/help_word.txt" "usage: kiln eval" "help eval"
run top --help
[ "$rc" -eq 0 ] && has "$tmp/top.txt" "compile  " "kiln --help"
run none
[ "$rc" -eq 2 ] || fail "no command: exit $rc"

# Did-you-mean: commands (exit 2), options, models, config keys.
run typo trian --model fashion_mlp
[ "$rc" -eq 2 ] || fail "unknown command: exit $rc"
has "$tmp/typo.txt" "unknown command 'trian'. Did you mean 'train'?" "unknown command"
refused opt_typo "Did you mean '--epochs'?" train --model fashion_mlp --epoch 3
refused model_typo "unknown model 'fashion_mpl'. Did you mean 'fashion_mlp'?" \
  summary --model fashion_mpl
refused key_typo "has no key 'd_hiden'. Did you mean 'd_hidden'?" \
  summary --model fashion_mlp --config '{"d_hiden": 64}'
refused backend_typo "Did you mean 'interp'?" bench --model fashion_mlp --backend intrp

# Model names: the catalog name, the same with '-' for '_', and an earlier name all name one
# model, shown by its catalog name; an unknown name lists the catalog names.
for spelling in residual_mlp residual-mlp; do
  run "spelling_$spelling" summary --model "$spelling"
  [ "$rc" -eq 0 ] || fail "--model $spelling: exit $rc: $(cat "$tmp/spelling_$spelling.txt")"
  has "$tmp/spelling_$spelling.txt" "model residual_mlp {" "--model $spelling"
done
for alias in bn_cnn bn-cnn; do
  run "alias_$alias" summary --model "$alias"
  [ "$rc" -eq 0 ] || fail "--model $alias: exit $rc: $(cat "$tmp/alias_$alias.txt")"
  has "$tmp/alias_$alias.txt" "model batch_norm_cnn {" "--model $alias"
done
refused model_unknown "unknown model 'resnet'. Models: fashion_mlp, residual_mlp, batch_norm_cnn, lazy_cnn, transformer_classifier, halving_mlp, halving_mlp_while." \
  summary --model resnet
refused model_alias_typo "unknown model 'transfomer'. Did you mean 'transformer_classifier'?" \
  summary --model transfomer
# A checkpoint saved under an earlier name ("halving-mlp-while") loads as its catalog name.
zero_checkpoint "$tmp/old_name.safetensors" \
  '{"model": "halving-mlp-while", "config": {"d_hidden": 1}, "input_shape": [1, 28, 28]}' \
  '{"fc1.weight": [1, 784], "fc1.bias": [1], "fc2.weight": [10, 1], "fc2.bias": [10]}'
run old_name compile --checkpoint "$tmp/old_name.safetensors" --backend interp
[ "$rc" -eq 0 ] || fail "checkpoint under an earlier name: exit $rc: $(cat "$tmp/old_name.txt")"
has "$tmp/old_name.txt" "model halving_mlp_while {" "checkpoint under an earlier name"
run top_models --help
has "$tmp/top_models.txt" "models: fashion_mlp, residual_mlp, batch_norm_cnn, lazy_cnn, transformer_classifier, halving_mlp, halving_mlp_while" \
  "kiln --help lists the catalog names"

# --flag=value is --flag value; a flag takes no value.
run equals summary --model=fashion_mlp --config='{"d_hidden": 32}'
[ "$rc" -eq 0 ] || fail "--model=NAME: exit $rc: $(cat "$tmp/equals.txt")"
has "$tmp/equals.txt" "\"d_hidden\":32" "--config=JSON"
refused flag_value "--fullgraph takes no value" explain --model fashion_mlp --fullgraph=yes

# Repeated and conflicting flags.
refused twice "--epochs is given twice ('2' and '3'). Fix: give it once." \
  train --model fashion_mlp --epochs 2 --epochs=3
refused twice_flag "--freeze is given twice" bench --model fashion_mlp --freeze --freeze
refused batch_max "--batch and --max-batch cannot be combined" \
  export --checkpoint x.safetensors -o "$tmp/x" --batch 4 --max-batch 8
refused info_input "--info and --input cannot be combined" run "$tmp" --info --input x
refused model_ckpt "--model and --checkpoint cannot be combined" \
  compile --model fashion_mlp --checkpoint x.safetensors

# One meaning per flag name: training's batch is --batch-size.
refused train_batch "use --batch-size N for the training batch" \
  train --model fashion_mlp --batch 64
refused demo_batch "use --batch-size N" demo --batch 64

# Numbers: ranges instead of a silent "all", integers without exponents, finite numbers.
refused max_train_0 "--max-train expects an integer in [1, 2147483647], got 0. Omit it to use every train image." \
  train --model fashion_mlp --max-train 0
refused max_train_neg "got -5" train --model fashion_mlp --max-train -5
refused max_test_0 "Omit it to use every test image." eval --checkpoint x --max-test 0
refused epochs_exp "Write it without a fraction or exponent." train --model fashion_mlp --epochs 1e12
refused lr_zero "--lr expects a number > 0, got 0" train --model fashion_mlp --lr 0
refused lr_inf "--lr expects a finite number, got 'inf'" train --model fashion_mlp --lr inf
refused lr_nan "--lr expects a finite number, got 'nan'" train --model fashion_mlp --lr nan
refused seed_neg "--seed expects an integer >= 0, got -1" train --model fashion_mlp --seed -1
refused config_exp "written with a fraction or an exponent. Fix: write the integer's digits in full" \
  summary --model fashion_mlp --config '{"d_hidden": 1e12}'

# Config errors say the --config fix, not a C++ one.
refused d_in "the fashion_mlp config sets d_in = 100, but \`kiln\` feeds Fashion-MNIST images [N, 1, 28, 28]" \
  summary --model fashion_mlp --config '{"d_in": 100}'
has "$tmp/d_in.txt" "Fix: drop \"d_in\" from --config" "d_in"
if grep -qF "Linear(" "$tmp/d_in.txt"; then fail "d_in: a C++ fix: $(cat "$tmp/d_in.txt")"; fi
refused classes "needs at least 10 classes" train --model bn_cnn --config '{"num_classes": 5}'

# No kiln source location in what the CLI prints, unless KILN_LOG asks for it.
for f in "$tmp"/*.txt; do
  if grep -qE '\[(kiln|frontend|runtime|backends|ir|passes)/[^]]*:[0-9]+\]' "$f"; then
    fail "a kiln source path in $(basename "$f"): $(cat "$f")"
  fi
done
set +e
KILN_LOG=recompiles "$kiln" summary --model nosuch > "$tmp/logged.txt" 2>&1
set -e
grep -qE '\[(frontend|kiln)/[^]]*:[0-9]+\]' "$tmp/logged.txt" ||
  fail "KILN_LOG set: no source location in $(cat "$tmp/logged.txt")"

# kiln compile: graphs, kernels, timings; --cache-dir fills a cache a second run reads.
run compile compile --model fashion_mlp --batch 4 --cache-dir "$tmp/cache" --graphs
[ "$rc" -eq 0 ] || fail "compile: exit $rc: $(cat "$tmp/compile.txt")"
has "$tmp/compile.txt" "input x float32[4, 1, 28, 28]" "compile"
has "$tmp/compile.txt" "kernels (one per fusion group):" "compile"
has "$tmp/compile.txt" "passes: " "compile"
has "$tmp/compile.txt" "after the passes:" "compile --graphs"
has "$tmp/compile.txt" "kernel cache: $tmp/cache" "compile --cache-dir"
ls "$tmp/cache"/*.o > /dev/null 2>&1 || fail "compile --cache-dir wrote no kernel to $tmp/cache"
run compile2 compile --model fashion_mlp --batch 4 --cache-dir "$tmp/cache"
[ "$rc" -eq 0 ] || fail "compile (cached): exit $rc: $(cat "$tmp/compile2.txt")"
has "$tmp/compile2.txt" "cache hit" "compile: the second run loads the cached kernels"
refused compile_none "expected --model NAME or --checkpoint FILE" compile
run compile_interp compile --model halving_mlp --backend interp
[ "$rc" -eq 0 ] || fail "compile halving_mlp: exit $rc: $(cat "$tmp/compile_interp.txt")"
has "$tmp/compile_interp.txt" "segments per call" "compile of a graph-breaking model"

echo "options.sh: all passed"
