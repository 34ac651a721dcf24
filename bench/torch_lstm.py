"""PyTorch eager beside bench/bench_recurrent.cpp: torch.nn.LSTM with the same shapes, the
forward alone (inference_mode) and forward + backward, in ms per call (median of 5 timed
repeats after warm-up), one fresh process per thread count.

Run by hand (needs `pip install torch` in a virtual environment outside the checkout; kiln
never depends on PyTorch), pinned like kiln:

    for t in 1 2; do taskset -c 0-$((t-1)) python bench/torch_lstm.py --threads $t; done
"""
import argparse
import statistics
import time

import torch


def time_ms(call, min_time=1.0):
    call()  # warm-up (and the allocator's first growth)
    start = time.perf_counter()
    call()
    per_call = time.perf_counter() - start
    iters = max(1, int(min_time / max(per_call, 1e-6)))
    repeats = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            call()
        repeats.append((time.perf_counter() - start) / iters * 1e3)
    return statistics.median(repeats)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    for batch, seq, width in ((64, 128, 512), (8, 32, 64)):
        lstm = torch.nn.LSTM(width, width)
        x = torch.randn(seq, batch, width)

        def forward():
            with torch.inference_mode():
                lstm(x)

        def forward_backward():
            lstm.zero_grad()
            out, _ = lstm(x)
            out.sum().backward()

        print("torch {} LSTM batch {} seq {} width {} threads {}: forward {:.3f} ms, "
              "forward+backward {:.3f} ms".format(torch.__version__, batch, seq, width,
                                                  args.threads, time_ms(forward),
                                                  time_ms(forward_backward)), flush=True)


if __name__ == "__main__":
    main()
