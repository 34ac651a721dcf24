#!/usr/bin/env python3
"""Writes a module checkpoint with PyTorch, for kiln's CheckpointTest.LoadsModuleWrittenByPyTorch.

torch_mlp.safetensors     the state dict of
                              nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(),
                                            nn.Linear(3, 2))
                          after three training-mode batches (so the BatchNorm running
                          statistics and num_batches_tracked are not their initial values),
                          written by safetensors.torch.save_file.
torch_mlp_io.safetensors  "input" [5, 4] and "output" [5, 2]: the model's output in eval mode.

kiln loads the state dict into the same architecture built with kiln layers and must
reproduce "output" from "input" within 1e-6.

Run by hand (never needed by the C++ tests), in a venv with torch and safetensors:
    python tests/data/checkpoint/make_checkpoint.py
"""
import os
import sys

import safetensors
import torch
from safetensors.torch import load_file, save_file
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
    model.train()
    with torch.no_grad():
        # Affine parameters away from their (1, 0) initialization, so a mix-up shows.
        model[1].weight.copy_(torch.rand(3) + 0.5)
        model[1].bias.copy_(torch.randn(3) * 0.5 + 0.5)
        for _ in range(3):
            model(torch.randn(8, 4) * 2 + 0.5)
    model.eval()
    x = torch.randn(5, 4)
    with torch.no_grad():
        y = model(x)

    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    model_path = os.path.join(HERE, "torch_mlp.safetensors")
    io_path = os.path.join(HERE, "torch_mlp_io.safetensors")
    save_file(state, model_path, metadata={"format": "pt"})
    save_file({"input": x, "output": y}, io_path, metadata={"format": "pt"})
    for path in (model_path, io_path):
        os.chmod(path, 0o644)

    # Read back with the package's own reader.
    back = load_file(model_path)
    assert sorted(back) == sorted(state), list(back)
    for k, v in state.items():
        assert torch.equal(back[k], v), k
    print(f"wrote {model_path} and {io_path} with torch {torch.__version__}, "
          f"safetensors {safetensors.__version__}")
    for k, v in state.items():
        print(f"  {k:24s} {str(v.dtype):14s} {list(v.shape)}")


if __name__ == "__main__":
    sys.exit(main())
