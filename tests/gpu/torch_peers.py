#!/usr/bin/env python3
"""PyTorch on the work bench/gpu/bench_gpu.cpp times, on the same GPU in the same run of
tests/gpu/device_check.sh: what kiln's GPU targets are ratios against (tests/gpu/gpu_targets.py).

    python3 tests/gpu/torch_peers.py OUT.json

Writes {"results": {name: {"seconds": median seconds per call, ...}}} (after every figure)
with a line per figure on stdout.
GPU work is timed by CUDA events (the GPU's time), batch-1 calls by the wall clock with a
synchronize per call (what a caller waits). Each figure is the median of its calls after a
warm-up; torch.compile's compile time is left out. Needs PyTorch with CUDA, nothing of kiln.
"""
import json
import sys
import time

import torch
import torch.nn as nn


def gpu_seconds(fn, iters=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def wall_seconds(fn, iters=300, warmup=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


class ResidualMLP(nn.Module):
    """kiln's ResidualMLP seed config (kiln/models/residual_mlp.h): 729,866 parameters."""

    def __init__(self, d_in=784, d_hidden=256, num_blocks=4, d_out=10):
        super().__init__()
        self.stem = nn.Linear(d_in, d_hidden)
        self.blocks = nn.ModuleList(
            nn.ModuleDict({"up": nn.Linear(d_hidden, d_hidden), "down": nn.Linear(d_hidden, d_hidden)})
            for _ in range(num_blocks))
        self.head = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = torch.relu(self.stem(x.flatten(1)))
        for b in self.blocks:
            x = x + b["down"](torch.relu(b["up"](x)))
        return self.head(x)


def ddp_figures(record, dev):
    """The nccl figures of bench_gpu.cpp: all-reduces on a one-rank NCCL group, and a training
    step of an MLP 784-2048-2048-10 at batch 256 (SGD), plain and under DistributedDataParallel."""
    import tempfile

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    store = dist.FileStore(tempfile.mktemp(prefix="kiln_torch_peers_"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda", 0))
    try:
        for name, numel in (("nccl_all_reduce_1mib", 1 << 18), ("nccl_all_reduce_64mib", 1 << 24)):
            t = torch.zeros(numel, device=dev)
            record(name, wall_seconds(lambda: dist.all_reduce(t), iters=100, warmup=10),
                   bytes_per_second=None)
        torch.manual_seed(0)
        x = torch.randn(256, 784, device=dev)
        y = torch.randint(0, 10, (256,), device=dev)
        for name, wrap in (("mlp_step_plain", False), ("mlp_step_ddp", True)):
            mlp = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                                nn.Linear(2048, 10)).to(dev)
            model = DistributedDataParallel(mlp) if wrap else mlp
            opt = torch.optim.SGD(mlp.parameters(), lr=0.01)

            def step():
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            record(name, wall_seconds(step, iters=100, warmup=10))
    finally:
        dist.destroy_process_group()


def main():
    out_path = sys.argv[1]
    results = {}

    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)

    # Written after every figure, so a run cut short by device_check.sh's time limit keeps
    # what it measured.
    def record(name, seconds, **extra):
        extra = {k: v for k, v in extra.items() if v is not None}
        results[name] = {"seconds": seconds, **extra}
        detail = "".join(f", {k} {v:.4g}" for k, v in extra.items())
        print(f"{name}: {seconds * 1e6:.1f} us{detail}", flush=True)
        with open(out_path, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "results": results}, f, indent=1)

    print(f"PyTorch {torch.__version__} on {gpu}", flush=True)
    # First, while the time limit is far: NCCL (the distributed issue's comparison).
    try:
        ddp_figures(record, dev)
    except Exception as e:  # no NCCL in this PyTorch: the targets say unmeasured
        print(f"nccl figures: {e}", flush=True)
    with torch.no_grad():
        # Memory-bound work: a copy, the elementwise chain, the row kernels.
        x = torch.randn(262144, 1024, device=dev)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * 4
        s = gpu_seconds(lambda: y.copy_(x))
        record("copy", s, bytes_per_second=moved / s)

        def chain(t):
            return torch.relu(t * 1.5 + 0.25) * 2.0 - 0.5
        s = gpu_seconds(lambda: chain(x))
        record("chain_eager", s, bytes_per_second=moved / s)
        chain_c = torch.compile(chain)
        s = gpu_seconds(lambda: chain_c(x))
        record("chain_compiled", s, bytes_per_second=moved / s)
        del x, y

        rows = torch.randn(16384, 4096, device=dev)
        moved = 2 * rows.numel() * 4
        softmax_c = torch.compile(lambda t: torch.softmax(t, -1))
        s = gpu_seconds(lambda: softmax_c(rows))
        record("softmax_compiled", s, bytes_per_second=moved / s)
        norm = nn.LayerNorm(4096).to(dev)
        norm_c = torch.compile(norm)
        s = gpu_seconds(lambda: norm_c(rows))
        record("layer_norm_compiled", s, bytes_per_second=moved / s)
        del rows

        # GEMMs 4096³ through cuBLAS (torch.matmul).
        n = 4096
        torch.backends.cuda.matmul.allow_tf32 = True
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        s = gpu_seconds(lambda: a @ b)
        record("gemm_float32_tf32", s, flops=2 * n**3 / s)
        torch.backends.cuda.matmul.allow_tf32 = False
        a, b = a.bfloat16(), b.bfloat16()
        s = gpu_seconds(lambda: a @ b)
        record("gemm_bfloat16", s, flops=2 * n**3 / s)
        del a, b

        # ResidualMLP: batch 1 under torch.compile(mode="reduce-overhead") (CUDA graphs), and
        # cuBLAS alone on its GEMMs at batch 4096.
        mlp = ResidualMLP().to(dev).eval()
        one = torch.randn(1, 1, 28, 28, device=dev)
        record("residual_mlp_batch1_eager", wall_seconds(lambda: mlp(one)))
        mlp_ro = torch.compile(mlp, mode="reduce-overhead")
        record("residual_mlp_batch1_reduce_overhead", wall_seconds(lambda: mlp_ro(one)))
        batch = 4096
        shapes = [(784, 256)] + [(256, 256)] * 8 + [(256, 10)]
        inputs = [(torch.randn(batch, k, device=dev), torch.randn(k, m, device=dev)) for k, m in shapes]
        flops = sum(2 * batch * k * m for k, m in shapes)

        def gemms():
            for p, q in inputs:
                torch.matmul(p, q)
        s = gpu_seconds(gemms)
        record("residual_mlp_batch4096_cublas_gemms", s, flops=flops / s)
        images = torch.randn(batch, 1, 28, 28, device=dev)
        s = gpu_seconds(lambda: mlp(images))
        record("residual_mlp_batch4096_eager", s, flops=flops / s)

        # A BERT-sized encoder: 6 layers of d384, 12 heads, FFN 1536, batch 32 x 128 tokens.
        layer = nn.TransformerEncoderLayer(384, 12, 1536, dropout=0.0, batch_first=True)
        encoder = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).to(dev).eval()
        tokens = torch.randn(32, 128, 384, device=dev)
        record("encoder_eager", gpu_seconds(lambda: encoder(tokens)))
        encoder_c = torch.compile(encoder)
        record("encoder_compiled", gpu_seconds(lambda: encoder_c(tokens)))


if __name__ == "__main__":
    main()
