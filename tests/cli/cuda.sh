#!/usr/bin/env bash
# `kiln train --device cuda` and `kiln eval --device cuda` end to end on the fake driver
# (tests/cuda/fake_driver: kernels built and run on the host, matmul and convolutions by plain
# loops): the
# model trains and evaluates on the "GPU" with the CPU's results, the checkpoint evaluates
# alike on either device, a missing GPU or a bad --device fails with the reason, and the
# checkpoint exports as a GPU artifact without a GPU.
# Data-parallel training with --device cuda runs two ranks on the fake GPU over the fake NCCL.
# Usage: cuda.sh KILN FAKE_DRIVER FAKE_NVRTC FAKE_CUBLASLT FAKE_CUDNN FAKE_NCCL. Exits 77
# (skipped) when Fashion-MNIST is not installed.
set -euo pipefail
kiln="$1"
source "$(dirname "$0")/lib.sh"
on_fake_gpu() {
  KILN_CUDA_DRIVER="$2" KILN_NVRTC="$3" KILN_CUBLASLT="$4" KILN_CUDNN="$5" "$kiln" "${@:6}"
}
fakes=("$1" "$2" "$3" "$4" "$5")
fake_nccl="$6"

# Without a driver, or with a device that is not there, --device fails at once.
KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 refused no_driver \
  "kiln train: --device cuda: no CUDA device: the CUDA driver library /nonexistent/libcuda.so.1 could not be loaded" \
  train --model fashion_mlp --device cuda
has "$tmp/no_driver.txt" "Or run on the cpu (--device cpu, the default)." "no driver"
refused bad_device "kiln train: --device expects cpu, cuda or cuda:N, got 'tpu'." train --model fashion_mlp --device tpu
refused ddp_one_device "kiln train: --device cuda:0 with --nproc 2: each rank trains on its own GPU, cuda:<its local rank>. Fix: pass --device cuda." \
  train --model fashion_mlp --nproc 2 --device cuda:0
set +e
on_fake_gpu "${fakes[@]}" eval --checkpoint "$tmp/none.safetensors" --device cuda:1 > "$tmp/index.txt" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "cuda:1: exit $rc"
has "$tmp/index.txt" "kiln eval: --device cuda:1: this machine has 1 GPU(s), cuda:0 to cuda:0." "cuda:1"

# bench and explain on the GPU (through interp: the fake driver runs no generated PTX): bench
# names the GPU and counts what one call queues, a missing GPU fails in one line.
on_fake_gpu "${fakes[@]}" bench --model residual_mlp --device cuda --backend interp --iters 2 > "$tmp/bench_gpu.txt"
has "$tmp/bench_gpu.txt" "on cuda:0 (kiln fake GPU)" "bench --device cuda"
# ResidualMLP's 10 linear layers are one cuBLASLt call each, eagerly and compiled.
has "$tmp/bench_gpu.txt" "10 library calls), compiled " "bench --device cuda: launches per call"
on_fake_gpu "${fakes[@]}" explain --model residual_mlp --device cuda --backend interp > "$tmp/explain_gpu.txt"
has "$tmp/explain_gpu.txt" 'input %0 "x": float32[2, 1, 28, 28]@cuda:0' "explain --device cuda"
KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 refused bench_no_driver \
  "kiln bench: --device cuda: no CUDA device" bench --model residual_mlp --device cuda

dir="${KILN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -e "$dir/t10k-labels-idx1-ubyte.gz" ] && [ ! -e "$dir/t10k-labels-idx1-ubyte" ]; then
  echo "Fashion-MNIST not installed in $dir: skipping training on the fake GPU"
  exit 77
fi
# close A B: two "test accuracy: X" lines agree within 0.01 (two of the 200 images): the GPU's
# sums round differently from the CPU's, which may flip a near tie.
close() { awk -v a="${1##* }" -v b="${2##* }" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }'; }
for model in fashion_mlp lazy_cnn; do
  small=(--epochs 1 --max-train 300 --max-test 200)
  "$kiln" train --model "$model" "${small[@]}" > "$tmp/cpu.txt"
  on_fake_gpu "${fakes[@]}" train --model "$model" "${small[@]}" --device cuda --save "$tmp/$model.safetensors" \
    > "$tmp/gpu.txt"
  has "$tmp/gpu.txt" ", on cuda:0" "$model: the training line names the device"
  on_cpu="$(grep '^test accuracy: ' "$tmp/cpu.txt")" || fail "$model: no accuracy on the cpu"
  on_gpu="$(grep '^test accuracy: ' "$tmp/gpu.txt")" || fail "$model: no accuracy on the gpu"
  close "$on_cpu" "$on_gpu" || fail "$model: the cpu trained to '$on_cpu', the gpu to '$on_gpu'"
  on_fake_gpu "${fakes[@]}" eval --checkpoint "$tmp/$model.safetensors" --max-test 200 --device cuda > "$tmp/eval_gpu.txt"
  "$kiln" eval --checkpoint "$tmp/$model.safetensors" --max-test 200 > "$tmp/eval_cpu.txt"
  # On the gpu, evaluation runs the kernels training's evaluation ran: the same figure.
  has "$tmp/eval_gpu.txt" "$on_gpu" "$model: eval on the gpu"
  close "$(grep '^test accuracy: ' "$tmp/eval_cpu.txt")" "$on_gpu" ||
    fail "$model: the gpu's checkpoint evaluated on the cpu: $(cat "$tmp/eval_cpu.txt")"
  echo "$model: $on_cpu trained on the cpu, $on_gpu on the fake gpu"
done

# Data-parallel on GPUs: two ranks, each on "its own" GPU (the fake driver's one), averaging their
# gradients over the fake NCCL; rank 0 alone prints, and its checkpoint evaluates to what it
# printed.
KILN_NCCL="$fake_nccl" on_fake_gpu "${fakes[@]}" train --model fashion_mlp --epochs 1 --max-train 300 \
  --max-test 200 --batch-size 64 --nproc 2 --device cuda --save "$tmp/ddp_gpu.safetensors" > "$tmp/ddp_gpu.txt" 2>&1 ||
  fail "train --nproc 2 --device cuda: $(cat "$tmp/ddp_gpu.txt")"
has "$tmp/ddp_gpu.txt" "[rank 0] training on 300 images, 1 epochs, batch 64 (32 on each of 2 ranks)" "ddp on the gpu"
has "$tmp/ddp_gpu.txt" "a GPU (nccl) per rank" "ddp on the gpu: the backend"
if grep -q '^\[rank 1\]' "$tmp/ddp_gpu.txt"; then fail "ddp on the gpu: rank 1 printed: $(cat "$tmp/ddp_gpu.txt")"; fi
trained="$(grep '^\[rank 0\] test accuracy: ' "$tmp/ddp_gpu.txt" | sed 's/^\[rank 0\] //')" ||
  fail "ddp on the gpu printed no accuracy: $(cat "$tmp/ddp_gpu.txt")"
on_fake_gpu "${fakes[@]}" eval --checkpoint "$tmp/ddp_gpu.safetensors" --max-test 200 --device cuda > "$tmp/eval_ddp_gpu.txt"
has "$tmp/eval_ddp_gpu.txt" "$trained" "ddp on the gpu: its checkpoint evaluates as rank 0 printed"
echo "fashion_mlp, 2 ranks on the fake gpu: $trained"

# A GPU artifact exports where there is no GPU (unchecked, and saying so); kiln_rt refuses to
# load it there, naming the reason, and --info describes it and says why it does not run.
KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$kiln" export --checkpoint "$tmp/fashion_mlp.safetensors" \
  -o "$tmp/gpu.kiln" --device cuda > "$tmp/export_gpu.txt"
has "$tmp/export_gpu.txt" "cuda target sm_90" "export --device cuda"
has "$tmp/export_gpu.txt" "not checked against eager: no GPU here" "export --device cuda"
# Both Linear layers (with the ReLU and the bias) are cuBLASLt calls with epilogues: no PTX.
grep -q 'kind="gemm"' "$tmp/gpu.kiln/graph0.kir" || fail "export --device cuda: no GEMM epilogue in graph0.kir"
KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 refused run_gpu_artifact \
  "is a GPU artifact (kernels for sm_90) and this process has no GPU" run "$tmp/gpu.kiln" \
  --input "$tmp/none.safetensors"
KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 run gpu_info run "$tmp/gpu.kiln" --info
[ "$rc" -eq 0 ] || fail "run --info on a GPU artifact without a GPU: exit $rc: $(cat "$tmp/gpu_info.txt")"
has "$tmp/gpu_info.txt" "device: cuda, kernels for sm_90 and newer GPUs" "run --info on a GPU artifact"
has "$tmp/gpu_info.txt" "runs here: no: [kiln_rt]" "run --info on a GPU artifact"
has "$tmp/gpu_info.txt" "is a GPU artifact (kernels for sm_90) and this process has no GPU" "run --info on a GPU artifact"
