#!/usr/bin/env bash
# Prepares what tests/gpu/device_check.sh runs on a GPU machine, which has no LLVM/MLIR, no
# network and none of kiln's Debian packages, in gpu-carry/ (ignored by git; carry it):
#   - the test binary of the build without the code generator (./run.sh test --no-compiler
#     builds it) and, gzipped into lib.tar.gz (OpenBLAS alone is 36 MB of the 64 MiB that
#     may travel), the shared libraries it needs that are not part of the C runtime;
#   - kernels.safetensors: the GPU code generator's kernels (PTX for sm_90) with their inputs
#     and the CPU's results, written by the code generator's tests (./run.sh test builds
#     them), which the binary runs on the GPU (tests/cuda/kernel_bundle.h);
#   - artifacts/: seed models exported for the GPU with their inputs and the CPU's outputs
#     (tests/export/gpu_export_test.cpp), which the binary runs through kiln_rt
#     (tests/cuda/artifact_test.cpp);
#   - bench_gpu (bench/gpu/bench_gpu.cpp, from the same build) and bench-artifacts.tar.gz: the
#     work it times compiled for the GPU (the elementwise chain, the row kernels, a BERT-sized
#     encoder whose constant weights compress to almost nothing).
#
#   tests/gpu/prepare.sh            # then carry gpu-carry/ and run tests/gpu/device_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=build-eager/tests/kiln_eager_tests
[ -x "$binary" ] || { echo "prepare.sh: $binary is missing; run ./run.sh test --no-compiler first" >&2; exit 1; }
generator=build/tests/kiln_codegen_tests
[ -x "$generator" ] || { echo "prepare.sh: $generator is missing; run ./run.sh test first" >&2; exit 1; }
# The GPU benchmarks, from the build without the code generator.
cmake -S . -B build-eager -DKILN_BUILD_BENCH=ON > /dev/null
ninja -C build-eager bench_gpu > /dev/null
bench=build-eager/bench/bench_gpu
rm -rf gpu-carry && mkdir -p gpu-carry/lib
cp "$binary" "$bench" gpu-carry/
strip gpu-carry/kiln_eager_tests gpu-carry/bench_gpu
# Every library ldd resolves, except the C runtime and the dynamic loader, which every Linux
# machine has in a compatible version.
{ ldd "$binary"; ldd "$bench"; } | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    *) cp -L "$lib" gpu-carry/lib/
       strip --strip-unneeded "gpu-carry/lib/$(basename "$lib")" 2>/dev/null || true ;;
  esac
done
KILN_GPU_KERNEL_BUNDLE="$PWD/gpu-carry/kernels.safetensors" \
  "$generator" --gtest_filter=CudaCodegen.WritesTheGpuKernelBundle --gtest_brief=1
[ -s gpu-carry/kernels.safetensors ] || { echo "prepare.sh: the kernel bundle was not written" >&2; exit 1; }
KILN_GPU_ARTIFACTS="$PWD/gpu-carry/artifacts" \
  build/tests/kiln_tests --gtest_filter=GpuExport.WritesTheDeviceCheckArtifacts --gtest_brief=1
ls gpu-carry/artifacts/*.kiln/manifest.json > /dev/null || { echo "prepare.sh: the GPU artifacts were not written" >&2; exit 1; }
KILN_GPU_BENCH_ARTIFACTS="$PWD/gpu-carry/bench-artifacts" \
  build/tests/kiln_tests --gtest_filter=GpuExport.WritesTheGpuBenchArtifacts --gtest_brief=1
ls gpu-carry/bench-artifacts/encoder.kiln/manifest.json > /dev/null || { echo "prepare.sh: the GPU bench artifacts were not written" >&2; exit 1; }
tar -C gpu-carry -czf gpu-carry/bench-artifacts.tar.gz bench-artifacts && rm -rf gpu-carry/bench-artifacts
tar -C gpu-carry -czf gpu-carry/lib.tar.gz lib && rm -rf gpu-carry/lib
du -sh gpu-carry
