#!/usr/bin/env bash
# The GPU checks, in one call on a GPU machine (tests/gpu/prepare.sh made gpu-carry/ here
# first; carry it). Writes to $OUT (default: ./gpu-out): results.txt (the machine, the driver,
# every CUDA test's outcome, the generated kernels' run against the CPU's results, the GPU
# benchmarks, PyTorch on the same work and the targets as ratios of the two), gtest.json,
# bench_gpu.json and torch_peers.json. Each step has a time limit; all of them together stay
# under 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
{
  echo "# kiln GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi: not found"
  echo
} > "$OUT/results.txt"
if [ ! -x gpu-carry/kiln_eager_tests ]; then
  echo "device_check.sh: gpu-carry/kiln_eager_tests is missing: run tests/gpu/prepare.sh on the build machine and carry gpu-carry" | tee -a "$OUT/results.txt"
  exit 1
fi
# The binary's shared libraries travel gzipped (tests/gpu/prepare.sh).
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
tar -C "$libs" -xzf gpu-carry/lib.tar.gz
export LD_LIBRARY_PATH="$libs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN for the convolutions: the one the loader finds, else the one PyTorch's wheels carry
# (its sub-libraries are found beside it through the loader path). Without either, they run as
# im2col + cuBLASLt and the cuDNN test skips with the reason.
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9'; then
  cudnn_dir=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/libcudnn.so.9" ]; then
    export LD_LIBRARY_PATH="$cudnn_dir:$LD_LIBRARY_PATH"
  fi
fi
# NCCL for the nccl process group (tests/distributed/nccl_test.cpp, the nccl benchmarks): the
# one the loader finds, else the one PyTorch's wheels carry.
if [ -z "${KILN_NCCL:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
  nccl_lib=$(python3 -c 'import glob, nvidia; print(next(iter(sorted(f for p in nvidia.__path__ for f in glob.glob(p + "/**/libnccl.so.2", recursive=True))), ""))' 2>/dev/null || true)
  [ -n "$nccl_lib" ] && [ -e "$nccl_lib" ] && export KILN_NCCL="$nccl_lib"
fi
echo "NCCL: ${KILN_NCCL:-found by the dynamic loader}" >> "$OUT/results.txt"
# The generated eager kernels' host build (tests/cuda/generated_kernels.h) reads the runtime's
# headers from this tree.
export KILN_TEST_RUNTIME_INCLUDE="$PWD/runtime/include"
# The code generator's kernels (tests/cuda/fused_kernels_test.cpp runs them).
export KILN_GPU_KERNEL_BUNDLE="$PWD/gpu-carry/kernels.safetensors"
# Seed models exported for the GPU, run through kiln_rt (tests/cuda/artifact_test.cpp).
export KILN_GPU_ARTIFACTS="$PWD/gpu-carry/artifacts"
# Every CUDA suite.
timeout 100 gpu-carry/kiln_eager_tests --gtest_filter='Cuda*' --gtest_output="json:$OUT/gtest.json" \
  2>&1 | tee -a "$OUT/results.txt"
status=${PIPESTATUS[0]}
# Every op of the table on the GPU against the CPU (CudaOpTable): 411 cases whose kernels NVRTC
# compiles one at a time, about 0.6 s a case on an H200 machine, so in 8 processes at once
# (gtest's shards), whose logs are appended in order.
{ echo; echo "## The op table on the GPU (8 shards)"; } >> "$OUT/results.txt"
shards=8
pids=()
for ((i = 0; i < shards; i++)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout 120 gpu-carry/kiln_eager_tests \
    --gtest_filter='Table/CudaOpTable.*' > "$libs/optable_$i.txt" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < shards; i++)); do
  wait "${pids[$i]}" || status=$?
  cat "$libs/optable_$i.txt" >> "$OUT/results.txt"
done
grep -hE '^\[  (PASSED|FAILED) ' "$libs"/optable_*.txt | sed 's/^/op table shard: /' | tee -a "$OUT/results.txt"
# The tests that skipped, with their reasons.
skipped=$(grep -cE '^\[  SKIPPED \] [A-Za-z/]+\.[A-Za-z]+[/A-Za-z0-9_]* \(' "$OUT/results.txt")
echo "skipped tests: $skipped (a GPU machine skips only the op table's factory cases, checked in CudaTensor, and the nccl groups of more ranks than GPUs)" >> "$OUT/results.txt"
# The GPU benchmarks (bench/gpu/bench_gpu.cpp: compiled work through kiln_rt on device
# buffers, eager work through kiln), PyTorch on the same work, and the targets as ratios.
tar -C "$libs" -xzf gpu-carry/bench-artifacts.tar.gz
{ echo; echo "## GPU benchmarks"; } >> "$OUT/results.txt"
KILN_GPU_BENCH_ARTIFACTS="$libs/bench-artifacts" timeout 70 gpu-carry/bench_gpu \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/bench_gpu.json" --benchmark_out_format=json 2>&1 | tee -a "$OUT/results.txt"
{ echo; echo "## PyTorch on the same work"; } >> "$OUT/results.txt"
timeout 110 python3 tests/gpu/torch_peers.py "$OUT/torch_peers.json" 2>&1 | tee -a "$OUT/results.txt"
{ echo; echo "## Targets"; } >> "$OUT/results.txt"
python3 tests/gpu/gpu_targets.py "$OUT/bench_gpu.json" "$OUT/torch_peers.json" 2>&1 | tee -a "$OUT/results.txt"
echo "exit status: $status" >> "$OUT/results.txt"
exit "$status"
