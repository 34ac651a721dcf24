#!/usr/bin/env bash
# Usage: build_and_run.sh installed KILN_BUILD_DIR   (cmake --install into a temp prefix, then
#                                                     find_package(kiln))
#        build_and_run.sh subdirectory KILN_SOURCE_DIR  (add_subdirectory(kiln))
# Builds docs/examples/consumer in a temp folder the given way and runs it.
set -euo pipefail
mode="$1"; kiln="$2"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A project outside kiln's folder, as a user's is.
cp "$here/CMakeLists.txt" "$here/main.cpp" "$work/"
here="$work"
case "$mode" in
  installed)
    cmake --install "$kiln" --prefix "$work/prefix" > "$work/install.log"
    cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
    ;;
  subdirectory)
    cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKILN_SOURCE_DIR="$kiln" > "$work/configure.log"
    ;;
  *) echo "usage: $0 installed KILN_BUILD_DIR | subdirectory KILN_SOURCE_DIR" >&2; exit 2 ;;
esac
cmake --build "$work/build" --target consumer --parallel "$(nproc)" > "$work/build.log" ||
  { tail -40 "$work/build.log"; exit 1; }
"$work/build/consumer"
