#!/usr/bin/env python3
"""Checks with PyTorch that a checkpoint written by kiln loads into the PyTorch model.

CheckpointTest.WritesCheckpointForPyTorch writes, into $KILN_CHECKPOINT_OUT:
  kiln_model.safetensors  kiln::save of the kiln equivalent of
                              nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(),
                                            nn.Linear(3, 2))
                          with config {"layers": [4, 3, 2], "norm": "batch"};
  kiln_io.safetensors     "input" [5, 4] and kiln's eval-mode "output" [5, 2].
This script reads them with safetensors.torch.load_file (the reader PyTorch users call),
checks the metadata, loads the state dict strictly into the PyTorch model and compares its
output with kiln's (within 1e-6).

Run by hand (never needed by the C++ tests), in a venv with torch and safetensors:
    mkdir -p /tmp/kiln_ckpt
    KILN_CHECKPOINT_OUT=/tmp/kiln_ckpt build/tests/kiln_tests \\
        --gtest_filter=CheckpointTest.WritesCheckpointForPyTorch
    python tests/data/checkpoint/read_kiln_checkpoint.py /tmp/kiln_ckpt
"""
import argparse
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

EXPECTED_KEYS = [
    "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
    "1.num_batches_tracked", "3.weight", "3.bias",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the directory $KILN_CHECKPOINT_OUT the test wrote into")
    args = ap.parse_args()
    model_path = os.path.join(args.dir, "kiln_model.safetensors")
    io_path = os.path.join(args.dir, "kiln_io.safetensors")

    state = load_file(model_path)
    assert sorted(state) == sorted(EXPECTED_KEYS), sorted(state)
    assert state["1.num_batches_tracked"].dtype == torch.int64
    assert state["1.num_batches_tracked"].shape == ()

    with safe_open(model_path, framework="pt") as f:
        meta = f.metadata()
    assert meta["format"] == "pt", meta
    info = json.loads(meta["kiln"])
    assert info["format_version"] == 1, info
    assert isinstance(info["kiln_version"], str) and info["kiln_version"], info
    assert info["contents"] == "model", info
    assert info["config"] == {"layers": [4, 3, 2], "norm": "batch"}, info
    assert meta["written_by"] == "CheckpointTest.WritesCheckpointForPyTorch", meta
    print(f"metadata ok: format={meta['format']} kiln={meta['kiln']}")

    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
    result = model.load_state_dict(state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys, result
    model.eval()
    io = load_file(io_path)
    with torch.no_grad():
        out = model(io["input"])
    diff = (out - io["output"]).abs().max().item()
    assert out.shape == io["output"].shape, out.shape
    assert diff <= 1e-6, f"max |torch - kiln| = {diff}"
    print(f"loaded {len(state)} tensors strictly into torch {torch.__version__}; "
          f"max |torch - kiln| output difference = {diff:.3g}")


if __name__ == "__main__":
    sys.exit(main())
