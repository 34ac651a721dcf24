#!/usr/bin/env python3
"""kiln's GPU targets as ratios measured in one run of tests/gpu/device_check.sh: kiln's
figures (bench/gpu/bench_gpu.cpp, Google Benchmark JSON, medians of its repetitions) beside
each other and beside PyTorch's on the same GPU (tests/gpu/torch_peers.py).

    python3 tests/gpu/gpu_targets.py bench_gpu.json torch_peers.json

Prints one line per target (what was measured, the ratio, the bar, met or not) and a count.
A figure that is missing (a benchmark that skipped, PyTorch absent) makes its target
"unmeasured", with the reason where one was given. Exits 0 either way: the check reports.
"""
import json
import sys


def kiln_figures(path):
    """{benchmark name without its time suffix: {"seconds", "bytes_per_second", "flops"}}."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    figures, errors = {}, {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return figures, {"*": f"no kiln figures ({e})"}
    for b in data.get("benchmarks", []):
        name = b["run_name"].split("/")[0]
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
            continue
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        figures[name] = {
            "seconds": b["real_time"] * scale[b["time_unit"]],
            "bytes_per_second": b.get("bytes_per_second"),
            "flops": b.get("flops"),
        }
    return figures, errors


def torch_figures(path):
    try:
        with open(path) as f:
            return json.load(f).get("results", {}), None
    except (OSError, ValueError) as e:
        return {}, f"no PyTorch figures ({e})"


def main():
    kiln, kiln_errors = kiln_figures(sys.argv[1])
    torch, torch_error = torch_figures(sys.argv[2])
    rows = []

    def why_missing(names):
        for n in names:
            if n.startswith("torch:"):
                if n[6:] not in torch:
                    return torch_error or f"PyTorch has no figure {n[6:]}"
            elif n not in kiln:
                return kiln_errors.get(n) or kiln_errors.get("*") or f"kiln has no figure {n}"
        return None

    def k(name, field):
        return kiln[name][field]

    def t(name, field):
        return torch[name][field]

    def target(what, needs, ratio, bar, higher_is_better=True, unit="x"):
        missing = why_missing(needs)
        if missing:
            rows.append((what, None, bar, None, missing, higher_is_better))
            return
        value = ratio()
        met = value >= bar if higher_is_better else value <= bar
        rows.append((what, value, bar, met, unit, higher_is_better))

    target("chain relu(x*a+b)*c-d, 256M float32: compiled / copy bandwidth",
           ["BM_ChainCompiled", "BM_CopyOnDevice"],
           lambda: k("BM_ChainCompiled", "bytes_per_second") / k("BM_CopyOnDevice", "bytes_per_second"), 0.80)
    target("chain: compiled / kiln eager speed",
           ["BM_ChainCompiled", "BM_ChainEager"],
           lambda: k("BM_ChainEager", "seconds") / k("BM_ChainCompiled", "seconds"), 3.0)
    target("softmax [16384, 4096]: compiled / copy bandwidth",
           ["BM_SoftmaxCompiled", "BM_CopyOnDevice"],
           lambda: k("BM_SoftmaxCompiled", "bytes_per_second") / k("BM_CopyOnDevice", "bytes_per_second"), 0.70)
    target("layer_norm [16384, 4096]: compiled / copy bandwidth",
           ["BM_LayerNormCompiled", "BM_CopyOnDevice"],
           lambda: k("BM_LayerNormCompiled", "bytes_per_second") / k("BM_CopyOnDevice", "bytes_per_second"), 0.70)
    target("GEMM 4096^3 float32 (TF32): kiln / cuBLAS through torch",
           ["BM_GemmFloat32Tf32", "torch:gemm_float32_tf32"],
           lambda: k("BM_GemmFloat32Tf32", "flops") / t("gemm_float32_tf32", "flops"), 0.90)
    target("GEMM 4096^3 bfloat16: kiln / cuBLAS through torch",
           ["BM_GemmBFloat16", "torch:gemm_bfloat16"],
           lambda: k("BM_GemmBFloat16", "flops") / t("gemm_bfloat16", "flops"), 0.90)
    target("ResidualMLP batch 1, replayed as a CUDA graph: us per call",
           ["BM_ResidualMlpBatch1Replayed"],
           lambda: k("BM_ResidualMlpBatch1Replayed", "seconds") * 1e6, 20.0, higher_is_better=False,
           unit=" us")
    target("ResidualMLP batch 1: torch.compile(reduce-overhead) time / kiln's",
           ["BM_ResidualMlpBatch1Replayed", "torch:residual_mlp_batch1_reduce_overhead"],
           lambda: t("residual_mlp_batch1_reduce_overhead", "seconds") / k("BM_ResidualMlpBatch1Replayed", "seconds"),
           1.0)
    target("ResidualMLP batch 4096: kiln's GEMM rate / cuBLAS on its GEMMs",
           ["BM_ResidualMlpBatch4096", "torch:residual_mlp_batch4096_cublas_gemms"],
           lambda: k("BM_ResidualMlpBatch4096", "flops") / t("residual_mlp_batch4096_cublas_gemms", "flops"), 0.80)
    target("encoder 6 x d384, batch 32 x 128: torch.compile time / kiln compiled",
           ["BM_EncoderCompiled", "torch:encoder_compiled"],
           lambda: t("encoder_compiled", "seconds") / k("BM_EncoderCompiled", "seconds"), 1.0)

    # The nccl group on one GPU (one rank): what a collective costs a caller, and what DDP adds
    # to a training step, beside PyTorch's DDP on NCCL.
    target("all-reduce 1 MiB, one-rank nccl group: PyTorch time / kiln's",
           ["BM_NcclAllReduce1MiB", "torch:nccl_all_reduce_1mib"],
           lambda: t("nccl_all_reduce_1mib", "seconds") / k("BM_NcclAllReduce1MiB", "seconds"), 0.8)
    target("all-reduce 64 MiB, one-rank nccl group: PyTorch time / kiln's",
           ["BM_NcclAllReduce64MiB", "torch:nccl_all_reduce_64mib"],
           lambda: t("nccl_all_reduce_64mib", "seconds") / k("BM_NcclAllReduce64MiB", "seconds"), 0.8)
    target("MLP step under DDP / plain step, kiln (one GPU)",
           ["BM_MlpStepDdp", "BM_MlpStepPlain"],
           lambda: k("BM_MlpStepDdp", "seconds") / k("BM_MlpStepPlain", "seconds"), 1.15, higher_is_better=False)
    target("MLP step under DDP: PyTorch DDP time / kiln DDP time (one GPU)",
           ["BM_MlpStepDdp", "torch:mlp_step_ddp"],
           lambda: t("mlp_step_ddp", "seconds") / k("BM_MlpStepDdp", "seconds"), 0.8)

    met = sum(1 for r in rows if r[3])
    measured = sum(1 for r in rows if r[1] is not None)
    for what, value, bar, ok, unit, higher_is_better in rows:
        if value is None:
            print(f"unmeasured  {what}: {unit}")
        else:
            sign = ">=" if higher_is_better else "<="
            print(f"{'met' if ok else 'MISSED':10}  {what}: {value:.3g}{unit} (target {sign} {bar:g}{unit})")
    print(f"targets met: {met} of {len(rows)} ({measured} measured)")


if __name__ == "__main__":
    main()
