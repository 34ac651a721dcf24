#!/usr/bin/env bash
# kiln's one entry point: installs missing Debian packages, configures, builds, runs.
#   ./run.sh demo              train the Fashion-MNIST demo and print its accuracy
#   ./run.sh test [--sanitize] run every test suite through ctest (ASan+UBSan with --sanitize)
#   ./run.sh test --tsan       the concurrency tests (tests/concurrency) under ThreadSanitizer
#   ./run.sh test --no-compiler  kiln without its code generator (-DKILN_COMPILER=OFF): the
#                              eager libraries and their tests, no LLVM or MLIR needed
#   ./run.sh bench [filter]    run the Google Benchmark programs
#   ./run.sh bench --peers [options]  kiln beside PyTorch, ONNX Runtime and JAX
#                              (bench/compare_peers.py; KILN_PEERS_PYTHON names a Python
#                              that has them, see the script's header)
#   ./run.sh build             configure and build only
#   ./run.sh fuzz [target|all] [seconds]  libFuzzer targets of the file readers, 60 s each by
#                              default (clang-19; tests/fuzz/run_fuzz.sh, docs/fuzzing.md)
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake ninja-build ccache pkg-config zlib1g-dev
  libeigen3-dev libopenblas-dev libgloo-dev libgtest-dev libgmock-dev libbenchmark-dev
  llvm-19-dev libmlir-19-dev mlir-19-tools dataset-fashion-mnist)

install_missing_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    [ -n "$p" ] || continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "kiln: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# configure_and_build BUILD_DIR [cmake args...]
configure_and_build() {
  local dir="$1"; shift
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  fi
  cmake --build "$dir" --parallel "$(nproc)"
}

cmd="${1:-demo}"; shift || true
# Fuzzing alone needs clang and its libFuzzer runtime.
[ "$cmd" = fuzz ] && PACKAGES+=(clang-19 libclang-rt-19-dev)
# Without the code generator kiln needs no LLVM or MLIR.
if [ "$cmd" = test ] && [ "${1:-}" = "--no-compiler" ]; then
  PACKAGES=("${PACKAGES[@]/llvm-19-dev/}"); PACKAGES=("${PACKAGES[@]/libmlir-19-dev/}")
  PACKAGES=("${PACKAGES[@]/mlir-19-tools/}")
fi
install_missing_packages
case "$cmd" in
  demo)
    configure_and_build build
    ./build/frontend/kiln demo "$@"
    # Ahead of time: export the checkpoint the demo saved, then run it from plain C on
    # libkiln_rt (docs/examples/fashion_classifier.c), latency next to the lines above.
    checkpoint="${TMPDIR:-/tmp}/kiln-demo.safetensors"
    for ((i = 1; i <= $#; i++)); do
      [ "${!i}" = "--save" ] && j=$((i + 1)) && checkpoint="${!j}"
    done
    echo
    echo "ahead-of-time export (docs/aot.md):"
    ./build/frontend/kiln export --checkpoint "$checkpoint" -o build/fashion_mlp.kiln
    ./build/docs/example_fashion_classifier build/fashion_mlp.kiln \
      "${KILN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
    ;;
  test)
    if [ "${1:-}" = "--sanitize" ]; then
      shift
      configure_and_build build-sanitize -DKILN_SANITIZE=ON
      # allocator_may_return_null: an allocation too large for ASan returns null, as malloc
      # does, so the tests see kiln's out-of-memory error instead of ASan aborting.
      ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        KILN_SKIP_SLOW=1 ctest --test-dir build-sanitize --output-on-failure "$@"
    elif [ "${1:-}" = "--tsan" ]; then
      shift
      # Only the concurrency tests' binary and what it links: the instrumented build stays
      # small enough for CI. A race fails the run (halt_on_error); tests/tsan.supp says why
      # each report it silences is not kiln's.
      [ -f build-tsan/build.ninja ] || cmake -S . -B build-tsan -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DKILN_TSAN=ON -DKILN_BUILD_BENCH=OFF
      cmake --build build-tsan --parallel "$(nproc)" --target kiln_concurrency_tests
      TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
        ctest --test-dir build-tsan -L concurrency --output-on-failure "$@"
    elif [ "${1:-}" = "--no-compiler" ]; then
      shift
      # A second build folder: what builds on a machine without the LLVM/MLIR packages.
      configure_and_build build-eager -DKILN_COMPILER=OFF -DKILN_BUILD_BENCH=OFF
      ctest --test-dir build-eager --output-on-failure "$@"
    else
      configure_and_build build
      ctest --test-dir build --output-on-failure "$@"
    fi
    ;;
  bench)
    configure_and_build build
    if [ "${1:-}" = "--peers" ]; then
      shift
      "${KILN_PEERS_PYTHON:-python3}" bench/compare_peers.py "$@"
    else
      for b in build/bench/bench_*; do "$b" --benchmark_filter="${1:-.}"; done
    fi
    ;;
  build)
    configure_and_build build
    ;;
  fuzz)
    tests/fuzz/run_fuzz.sh "$@"
    ;;
  *)
    echo "usage: ./run.sh {demo|test [--sanitize|--tsan|--no-compiler]|bench [filter]|bench --peers [options]|build|fuzz [target] [seconds]}" >&2
    exit 2
    ;;
esac
