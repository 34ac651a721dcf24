"""Data-parallel scaling of kiln and of PyTorch DDP (gloo) on this machine.

For global batches 128 and 512 of a FashionMLP training step (784-256-256-10, SGD with
momentum, synthetic data), measures one process with 1 thread on the whole batch and N
processes with 1 thread each on batch/N (DistributedDataParallel), each rank pinned to its
own core, and prints per system:

    scaling efficiency = time(1 process, batch B) / (N x time(N processes, batch B/N))

(1.0 = perfect strong scaling), plus kiln's step time over PyTorch's. Every figure is the
median of --runs fresh launches. Also prints kiln's all-reduce bus bandwidth beside memcpy.

    python3 bench/ddp_scaling.py [--nproc 2] [--runs 3] [--build build]

PyTorch is only needed for its half (pip install torch into any venv and run this script
with that python); kiln never depends on it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def kiln_runs(build, nproc, runs, env):
    bench = os.path.join(build, "bench", "bench_distributed")
    kiln = os.path.join(build, "frontend", "kiln")
    single, multi, busbw, memcpy = {}, {}, [], []
    for _ in range(runs):
        out = subprocess.run(["taskset", "-c", "0", bench, "--benchmark_filter=TrainStep",
                              "--benchmark_format=json"], env=env, capture_output=True, text=True,
                             check=True).stdout
        for b in json.loads(out)["benchmarks"]:
            single.setdefault(b["name"].split("/")[1], []).append(b["real_time"])
        # Rank 0's JSON: the launcher prefixes every line with "[rank R] ".
        out = subprocess.run([kiln, "launch", "--nproc", str(nproc), "--", bench,
                              "--benchmark_format=json"], env=dict(env, KILN_BENCH_PIN="1"),
                             capture_output=True, text=True, check=True).stdout
        rank0 = "\n".join(line[len("[rank 0] "):] for line in out.splitlines()
                          if line.startswith("[rank 0] "))
        for b in json.loads(rank0)["benchmarks"]:
            name = b["name"]
            if name.startswith("BM_TrainStep"):
                multi.setdefault(name.split("/")[1], []).append(b["real_time"])
            elif name.startswith("BM_AllReduce/26214400"):
                busbw.append(b["busbw_GBps"])
            elif name.startswith("BM_Memcpy"):
                memcpy.append(b["GBps"])
    return single, multi, busbw, memcpy


TORCH_WORKER = r"""
import os, sys, time, torch, torch.distributed as dist
from torch import nn
rank, world, batch, iters = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.sched_setaffinity(0, {rank})
torch.set_num_threads(1)
if world > 1:
    dist.init_process_group("gloo", rank=rank, world_size=world)
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                      nn.Linear(256, 10))
step_model = nn.parallel.DistributedDataParallel(model) if world > 1 else model
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(batch // world, 784), torch.randint(0, 10, (batch // world,))
def step():
    loss = nn.functional.cross_entropy(step_model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
for _ in range(3): step()
if world > 1: dist.barrier()
start = time.perf_counter()
for _ in range(iters): step()
elapsed = (time.perf_counter() - start) / iters * 1e3
if rank == 0: print(elapsed)
if world > 1: dist.destroy_process_group()
"""


def torch_time(python, world, batch, iters=100):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29600 + (os.getpid() % 1000)),
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([python, "-c", TORCH_WORKER, str(r), str(world), str(batch), str(iters)],
                              env=env, stdout=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("a PyTorch rank failed")
    return float(outs[0].strip())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--build", default="build")
    parser.add_argument("--torch-python", default=sys.executable,
                        help="a python that has torch (default: this one)")
    args = parser.parse_args()
    env = dict(os.environ, KILN_NUM_THREADS="1", OMP_NUM_THREADS="1")
    single, multi, busbw, memcpy = kiln_runs(args.build, args.nproc, args.runs, env)
    print(f"kiln all-reduce 25 MiB, {args.nproc} ranks: bus bandwidth {statistics.median(busbw):.2f} GB/s "
          f"(memcpy {statistics.median(memcpy):.2f} GB/s)")
    have_torch = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True).returncode == 0
    for batch in sorted(single, key=int):
        t1, tn = statistics.median(single[batch]), statistics.median(multi[batch])
        line = (f"batch {batch}: kiln 1 proc {t1:.3f} ms, {args.nproc} procs {tn:.3f} ms, "
                f"efficiency {t1 / (args.nproc * tn):.2f}")
        if have_torch:
            p1 = statistics.median(torch_time(args.torch_python, 1, int(batch)) for _ in range(args.runs))
            pn = statistics.median(torch_time(args.torch_python, args.nproc, int(batch)) for _ in range(args.runs))
            line += (f" | PyTorch 1 proc {p1:.3f} ms, {args.nproc} procs {pn:.3f} ms, efficiency "
                     f"{p1 / (args.nproc * pn):.2f} | kiln/PyTorch step time: 1 proc {t1 / p1:.2f}, "
                     f"{args.nproc} procs {tn / pn:.2f}")
        print(line)


if __name__ == "__main__":
    main()
