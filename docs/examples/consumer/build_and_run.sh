#!/usr/bin/env bash
# Usage: build_and_run.sh installed KILN_BUILD_DIR WORK   (cmake --install into a prefix in
#                                                         WORK, then find_package(kiln))
#        build_and_run.sh subdirectory KILN_SOURCE_DIR WORK  (add_subdirectory(kiln))
# Builds docs/examples/consumer in the folder WORK (emptied first) the given way and runs it.
# WORK has a fixed place in kiln's build folder, so the compiler cache, which keys kiln's files
# by their path relative to the build folder, serves add_subdirectory(kiln) from an earlier run.
set -euo pipefail
mode="$1"; kiln="$2"; work="$3"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work" && mkdir -p "$work"
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
