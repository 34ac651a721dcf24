#!/usr/bin/env bash
# Builds the libFuzzer targets into build-fuzz/ (clang-19, ASan + UBSan) and runs one or all
# of them for a bounded time on the committed corpus: ./run.sh fuzz [target|all] [seconds].
# New corpus entries go to build-fuzz/fuzz-corpus/, never into tests/fuzz/corpus/; a crash
# makes the exit status non-zero and names the saved input (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

TARGETS=(safetensors json ir_parse manifest artifact idx)
target="${1:-all}"
seconds="${2:-60}"
if [ "$target" = all ]; then
  selected=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $target "* ]]; then
  selected=("$target")
else
  echo "kiln fuzz: unknown target '$target'; expected all or one of: ${TARGETS[*]}" >&2
  exit 2
fi
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "kiln fuzz: expected a number of seconds >= 1, got '$seconds'" >&2
  exit 2
fi

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKILN_FUZZ=ON
fi
cmake --build build-fuzz --parallel "$(nproc)"

status=0
summary=()
for t in "${selected[@]}"; do
  scratch="build-fuzz/fuzz-corpus/$t"      # grows run after run; libFuzzer writes here only
  crashes="build-fuzz/fuzz-crashes/$t"
  log="build-fuzz/fuzz-logs/$t.log"
  mkdir -p "$scratch" "$crashes" "$(dirname "$log")"
  seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  echo "kiln fuzz: $t for ${seconds}s (log: $log)"
  rc=0
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb also caps single allocations,
  # so a reader that allocates what a header claims instead of what the file holds is caught.
  "build-fuzz/tests/fuzz/fuzz_$t" "$scratch" "${seeds[@]}" \
    -dict="tests/fuzz/$t.dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E "^(==[0-9]+== ?ERROR|SUMMARY|terminate called|  what\(\))" "$log" | head -5 || true
    for f in $(grep -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //'); do
      echo "kiln fuzz: $t crashed; the input is saved at $f"
      echo "  reproduce:  build-fuzz/tests/fuzz/fuzz_$t $f"
      echo "  after fixing the reader, keep it as a regression input (./run.sh test replays it):"
      echo "    cp $f tests/fuzz/regressions/$t/<what-it-broke> && git add tests/fuzz/regressions/$t"
    done
    [ -n "$(grep -oE "Test unit written to" "$log")" ] || tail -20 "$log"
  fi
  summary+=("$(printf '%-12s %6ss %12s execs  %s' "$t" "$seconds" "${execs:-?}" \
    "$([ "$rc" -eq 0 ] && echo "0 crashes" || echo "CRASHED (exit $rc)")")")
done
echo
echo "kiln fuzz summary:"
printf '  %s\n' "${summary[@]}"
exit "$status"
