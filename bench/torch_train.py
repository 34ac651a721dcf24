"""PyTorch eager training throughput for the models in bench_train.cpp (same shapes, same
batch, Adam, synthetic data), printed as samples/s at 1 and 2 threads.

Run by hand beside ./build/bench/bench_train (needs `pip install torch`); kiln never
depends on PyTorch. The numbers go into docs/perf.md as ratios measured on one machine.
"""
import time

import torch
from torch import nn


def fashion_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.3),
                         nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, 10))


class ResidualBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = nn.Linear(width, width)
        self.down = nn.Linear(width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def residual_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                         *[ResidualBlock(256) for _ in range(4)], nn.Linear(256, 10))


def bn_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))


def samples_per_second(make, threads, batch=128, seconds=3.0):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = make()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))

    def step():
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    return steps * batch / (time.perf_counter() - start)


if __name__ == "__main__":
    print(f"torch {torch.__version__}")
    for name, make in [("FashionMLP", fashion_mlp), ("ResidualMLP", residual_mlp),
                       ("BatchNormCNN", bn_cnn)]:
        for threads in (1, 2):
            print(f"{name:14s} threads={threads}  {samples_per_second(make, threads):9.0f} samples/s")
