#!/usr/bin/env python3
"""Interop proof between kiln and the reference `safetensors` package.

Writes reference_numpy.safetensors with the Python package (the file kiln's test
SafetensorsTest.ReadsFileWrittenByPython reads and checks value by value), and with
--verify PATH checks a file written by kiln (tests/data/safetensors/kiln_written.safetensors,
the bytes that SafetensorsTest.WritesFileForPython reproduces) using the package's own
reader.

Run by hand (never needed by the C++ tests), in a throwaway venv:
    python3 -m venv /tmp/st && /tmp/st/bin/pip install safetensors numpy
    /tmp/st/bin/python tests/data/safetensors/make_reference.py            # rewrite the file
    /tmp/st/bin/python tests/data/safetensors/make_reference.py --verify \\
        tests/data/safetensors/kiln_written.safetensors
"""
import argparse
import os
import sys

import numpy as np
import safetensors
from safetensors import TensorSpec, deserialize, safe_open, serialize_file

HERE = os.path.dirname(os.path.abspath(__file__))


def bf16_bits(values):
    """bfloat16 bits of float32 values (round to nearest even), as numpy has no bfloat16."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def write_reference(path):
    tensors = {
        "f32": (np.arange(6, dtype=np.float32) * 0.25 - 0.5).reshape(2, 3),
        "f64": np.array([np.pi, -np.e, 1e-310, 1e300], dtype=np.float64),
        "i32": np.array([-(2**31), 0, 2**31 - 1], dtype=np.int32),
        "i64": np.array([[-(2**62)], [2**62 + 1]], dtype=np.int64),
        "b": np.array([True, False, False, True, True]),
        "f16": np.array([[0.1, -1.5], [65504.0, 2.0**-24]], dtype=np.float16),
        "scalar": np.array(7.25, dtype=np.float32),  # 0-d
        "empty": np.zeros((0,), dtype=np.int64),
        "empty2d": np.zeros((3, 0), dtype=np.float32),
    }
    # The Rust writer keeps metadata in a hash map, so the key order in the header varies
    # between runs; everything else (tensor order, offsets, bytes) is deterministic.
    metadata = {"description": "kiln reference", "framework": "numpy", "unicode": "ünï \"q\""}
    # safetensors.numpy.save_file(tensors, path, metadata) turns each array into a
    # TensorSpec; do the same by hand so a bfloat16 tensor (which numpy lacks) can join, the
    # way safetensors.torch passes one: dtype "bfloat16" and the raw 16-bit words.
    arrays = dict(tensors, bf16=bf16_bits([1.0, -2.5, 3.140625]))
    specs = {
        name: TensorSpec(dtype="bfloat16" if name == "bf16" else a.dtype.name, shape=list(a.shape),
                         data_ptr=a.ctypes.data, data_len=a.nbytes)
        for name, a in arrays.items()
    }
    serialize_file(specs, path, metadata=metadata)
    size = os.path.getsize(path)
    print(f"wrote {path} ({size} bytes) with safetensors {safetensors.__version__}")


# What kiln writes in SafetensorsTest.WritesFileForPython (keep the two in sync).
KILN_EXPECTED = {
    "weight": ("F32", [2, 3], np.array([-1, -0.5, 0, 0.5, 1, 1.5], dtype=np.float32)),
    "bias": ("F64", [3], np.array([0.1, -2.5, 1e-300])),
    "step": ("I64", [], np.array(2**40 + 7, dtype=np.int64)),
    "counts": ("I32", [2, 2], np.array([-3, 0, 7, 2**31 - 1], dtype=np.int32)),
    "mask": ("BOOL", [4], np.array([True, False, True, True])),
    "half": ("F16", [3], np.array([1.0, -0.5, 65504.0], dtype=np.float16)),
    "brain": ("BF16", [2], np.array([1.5, -3.0], dtype=np.float32)),
    "empty": ("F32", [0, 4], np.zeros((0, 4), dtype=np.float32)),
}
KILN_METADATA = {"format": "kiln", "note": "h\u00e9llo \"quoted\"\n\ttab"}


def verify(path):
    with open(path, "rb") as f:
        raw = deserialize(f.read())  # the Rust reader validates header and offsets
    names = [name for name, _ in raw]
    assert sorted(names) == sorted(KILN_EXPECTED), f"tensor names {names}"
    with safe_open(path, framework="np") as f:
        assert f.metadata() == KILN_METADATA, f"metadata {f.metadata()}"
        for name, info in raw:
            dtype, shape, want = KILN_EXPECTED[name]
            got_dtype = info["dtype"]
            assert list(info["shape"]) == shape, f"{name}: shape {info['shape']} != {shape}"
            assert got_dtype == dtype, f"{name}: dtype {got_dtype} != {dtype}"
            if dtype == "BF16":
                got = bf16_values(np.frombuffer(bytes(info["data"]), dtype=np.uint16))
            else:
                got = f.get_tensor(name)
                assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
            assert got.shape == tuple(shape), f"{name}: shape {got.shape}"
            assert np.array_equal(got.reshape(-1), want.reshape(-1)), f"{name}: {got} != {want}"
            print(f"  {name:8s} {dtype:5s} {shape} ok")
    print(f"verified {path}: {len(names)} tensors and metadata match")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verify", metavar="PATH", help="check a file written by kiln")
    ap.add_argument("--out", default=os.path.join(HERE, "reference_numpy.safetensors"))
    args = ap.parse_args()
    if args.verify:
        verify(args.verify)
    else:
        write_reference(args.out)


if __name__ == "__main__":
    sys.exit(main())
