#!/usr/bin/env python3
"""kiln's catalog models beside PyTorch eager, torch.compile, ONNX Runtime and JAX jit:
inference latency (µs per call, no gradients, eval mode) per model, batch and thread count.

Set-up, once, outside the checkout (kiln's own set-up, run.sh and CI install none of this,
and kiln never depends on it):

  python3 -m venv ~/kiln-peers && ~/kiln-peers/bin/pip install torch onnxruntime onnx "jax[cpu]" numpy

Run (after a build, from the repository root):

  ~/kiln-peers/bin/python bench/compare_peers.py                       # everything
  ~/kiln-peers/bin/python bench/compare_peers.py --models residual_mlp --batches 64 \
      --threads 1 --repeats 1 --iters 5 --systems kiln,torch               # a smoke run
  ... --markdown peers.md                                                  # also write the tables
  KILN_PEERS_PYTHON=~/kiln-peers/bin/python ./run.sh bench --peers [options]   # build, then run

What is measured, and how:
- Every figure comes from fresh processes (`--repeats`, default 3), and the table shows the
  median over them. Peers run in this script's hidden `--worker SYSTEM MODEL BATCH THREADS`
  mode, which prints one JSON line; kiln's figures come from `kiln bench` (eager and compiled,
  one process gives both) and `kiln run` on an artifact from `kiln export` (AOT).
- Inside a process: one first call (reported separately: torch.compile and JAX compile on
  it), 3 warm-up calls, then 5 timed repeats of `iters` calls and their median. `iters` is
  chosen so that one repeat lasts about `--min-time` seconds, unless `--iters` fixes it.
  `kiln bench` does the same (5 repeats, up to 3 warm-ups); a probe `kiln bench --iters 1`
  picks its `iters` (and warms kiln's on-disk kernel cache). `kiln run` has no iteration
  option: it times 5 single calls after 1 warm-up and prints ms with 3 decimals, so the AOT
  column is coarse for sub-100 µs calls.
- Threads are pinned the same way for every system: the process runs under
  `taskset -c 0..T-1`, with OMP_NUM_THREADS = MKL_NUM_THREADS = OPENBLAS_NUM_THREADS =
  KILN_NUM_THREADS = T; torch.set_num_threads(T) and set_num_interop_threads(1);
  ONNX Runtime intra_op_num_threads = T, inter_op_num_threads = 1, sequential execution;
  inductor compiles in-process (TORCHINDUCTOR_COMPILE_THREADS=1).
- JAX (jaxlib 0.10): XLA sizes its CPU thread pool from the process's CPU affinity, so
  taskset is what limits it. XLA_FLAGS=--xla_cpu_multi_thread_eigen=false is accepted (set
  at T = 1); `intra_op_parallelism_threads=T` is a TensorFlow session option, not an XLA
  flag: written without dashes XLA ignores it silently, with dashes it aborts ("Unknown flag
  in XLA_FLAGS"), so it is not passed.
- Inputs are random float32 images [N, 1, 28, 28] (what `kiln bench` feeds); weights are
  random. torch eager runs under torch.inference_mode() (its TransformerEncoder then takes
  PyTorch's fused "fast path"); JAX and torch.compile take the weights as arguments; ONNX
  Runtime gets them as initializers of a static-shape graph (torch.onnx.export, TorchScript
  exporter, opset 17, all graph optimizations); the AOT artifact is exported for the static
  batch (`kiln export --batch N`, which freezes the weights).

Models (the same architectures in every system; parameter counts are checked against
`kiln summary` at the start of each run):
- fashion_mlp, residual_mlp, bn_cnn, transformer: kiln's catalog defaults
  (frontend/include/kiln/models/*.h).
- bert_encoder: the catalog transformer at BERT-small size: 6 pre-norm layers, d_model 384,
  12 heads, FFN 1536, GELU, 8 sequences. kiln's TransformerClassifierConfig expresses those
  sizes, but its tokens are image rows (image_size tokens of image_size values, and
  `kiln bench` feeds 28x28 images), so the sequences are 28 tokens, and the model takes no
  padding mask.
- bert_encoder_masked: the same at 41 tokens with a key-padding mask (sequence lengths
  41, 37, 33, ...), peers only: no kiln CLI command can feed a mask or another input shape
  (the kiln columns show '–').

Standard library plus the peers only; the peers are imported inside the workers.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from importlib import metadata

WARMUP_CALLS = 3
INNER_REPEATS = 5  # as kiln bench's kRepeats
DASH = "–"

# ---------------------------------------------------------------------------------------
# The models: kiln's config defaults per family, and the rows of the comparison.
# ---------------------------------------------------------------------------------------

DEFAULTS = {
    "fashion_mlp": dict(d_in=784, d_hidden=256, d_out=10, dropout=0.3),
    "residual_mlp": dict(d_in=784, d_hidden=256, num_blocks=4, d_out=10),
    "batch_norm_cnn": dict(in_channels=1, image_size=28, channels1=32, channels2=64,
                           d_hidden=128, num_classes=10, dropout=0.25),
    "transformer_classifier": dict(image_size=28, d_model=64, nhead=4, num_layers=2,
                                   dim_feedforward=128, dropout=0.1, num_classes=10),
}
BERT = dict(d_model=384, nhead=12, num_layers=6, dim_feedforward=1536)

# row name -> family (kiln's catalog name), config overrides (kiln's --config), default batches,
# whether kiln's CLI can run it, whether it takes a key-padding mask.
MODELS = {
    "fashion_mlp": dict(family="fashion_mlp", overrides={}, batches=[1, 64, 1024]),
    "residual_mlp": dict(family="residual_mlp", overrides={}, batches=[1, 64, 1024]),
    "bn_cnn": dict(family="batch_norm_cnn", overrides={}, batches=[1, 64, 1024]),
    "transformer": dict(family="transformer_classifier", overrides={}, batches=[1, 64, 1024]),
    "bert_encoder": dict(family="transformer_classifier", overrides=BERT, batches=[8]),
    "bert_encoder_masked": dict(family="transformer_classifier",
                                overrides=dict(BERT, image_size=41), batches=[8], kiln=False,
                                mask=True),
}


def config_of(name):
    spec = MODELS[name]
    return dict(DEFAULTS[spec["family"]], **spec["overrides"])


def runs_on_kiln(name):
    return MODELS[name].get("kiln", True)


def example_inputs(name, batch):
    """The inputs as numpy arrays, in forward's order: images, and the padding mask (bool,
    True = a padded key) for the masked model."""
    import numpy as np
    rng = np.random.default_rng(0)
    side = config_of(name).get("image_size", 28)
    inputs = [rng.standard_normal((batch, 1, side, side), dtype=np.float32)]
    if MODELS[name].get("mask"):
        lengths = [side - (4 * i) % (side // 2) for i in range(batch)]
        inputs.append(np.arange(side)[None, :] >= np.array(lengths)[:, None])
    return inputs


# ---------------------------------------------------------------------------------------
# PyTorch: the catalog's modules with kiln's child names, so their state dicts are kiln
# checkpoints key for key (frontend/src/models/*.cpp).
# ---------------------------------------------------------------------------------------

def torch_model(name):
    import torch
    from torch import nn

    c = config_of(name)
    family = MODELS[name]["family"]

    class FashionMLP(nn.Module):  # fashion_mlp.cpp
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.fc1 = nn.Linear(c["d_in"], c["d_hidden"])
            self.fc2 = nn.Linear(c["d_hidden"], c["d_hidden"])
            self.fc3 = nn.Linear(c["d_hidden"], c["d_out"])
            self.act = nn.ReLU()
            self.drop = nn.Dropout(c["dropout"])

        def forward(self, x):
            x = self.drop(self.act(self.fc1(self.flatten(x))))
            x = self.drop(self.act(self.fc2(x)))
            return self.fc3(x)

    class ResidualBlock(nn.Module):  # residual_mlp.cpp: x + down(relu(up(x)))
        def __init__(self, width):
            super().__init__()
            self.up = nn.Linear(width, width)
            self.down = nn.Linear(width, width)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(x)))

    class ResidualMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.stem = nn.Linear(c["d_in"], c["d_hidden"])
            self.blocks = nn.ModuleList(ResidualBlock(c["d_hidden"])
                                        for _ in range(c["num_blocks"]))
            self.head = nn.Linear(c["d_hidden"], c["d_out"])

        def forward(self, x):
            x = torch.relu(self.stem(self.flatten(x)))
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    class BatchNormCNN(nn.Module):  # batch_norm_cnn.cpp; bias-free convs feed the norms
        def __init__(self):
            super().__init__()
            c1, c2 = c["channels1"], c["channels2"]
            side = c["image_size"] // 4
            self.features = nn.Sequential(
                nn.Conv2d(c["in_channels"], c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1),
                nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2),
                nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(c2 * side * side, c["d_hidden"]), nn.ReLU(),
                nn.Dropout(c["dropout"]), nn.Linear(c["d_hidden"], c["num_classes"]))

        def forward(self, x):
            return self.classifier(self.features(x))

    class TransformerClassifier(nn.Module):  # transformer_classifier.cpp: one token per row
        def __init__(self):
            super().__init__()
            s, d = c["image_size"], c["d_model"]
            self.embed = nn.Linear(s, d)
            self.pos_embedding = nn.Parameter(torch.zeros(1, s, d))
            nn.init.trunc_normal_(self.pos_embedding, 0.0, 0.02)
            layer = nn.TransformerEncoderLayer(
                d, c["nhead"], dim_feedforward=c["dim_feedforward"], dropout=c["dropout"],
                activation="gelu", batch_first=True, norm_first=True)  # pre-norm
            self.encoder = nn.TransformerEncoder(layer, c["num_layers"], norm=nn.LayerNorm(d),
                                                 enable_nested_tensor=False)
            self.head = nn.Linear(d, c["num_classes"])

        def forward(self, x, padding=None):
            s = c["image_size"]
            h = self.embed(x.reshape(x.shape[0], s, s)) + self.pos_embedding
            return self.head(self.encoder(h, src_key_padding_mask=padding).mean(1))

    classes = {"fashion_mlp": FashionMLP, "residual_mlp": ResidualMLP,
               "batch_norm_cnn": BatchNormCNN, "transformer_classifier": TransformerClassifier}
    torch.manual_seed(0)
    return classes[family]().eval()


# ---------------------------------------------------------------------------------------
# JAX: the same forwards in jax.numpy. Weights are random, laid out [in, out] for x @ w;
# BatchNorm's running statistics sit in the params tree under "buffers" (not counted).
# ---------------------------------------------------------------------------------------

def jax_model(name):
    """(forward(params, *inputs), params)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    c = config_of(name)
    family = MODELS[name]["family"]
    rng = np.random.default_rng(0)

    def rand(*shape):
        return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) * 0.05)

    def linear(n_in, n_out):
        return {"w": rand(n_in, n_out), "b": rand(n_out)}

    def apply(p, x):
        return x @ p["w"] + p["b"]

    relu = jax.nn.relu

    if family == "fashion_mlp":
        params = {"fc1": linear(c["d_in"], c["d_hidden"]),
                  "fc2": linear(c["d_hidden"], c["d_hidden"]),
                  "fc3": linear(c["d_hidden"], c["d_out"])}

        def forward(p, x):
            x = x.reshape(x.shape[0], -1)
            x = relu(apply(p["fc2"], relu(apply(p["fc1"], x))))
            return apply(p["fc3"], x)

    elif family == "residual_mlp":
        w = c["d_hidden"]
        params = {"stem": linear(c["d_in"], w), "head": linear(w, c["d_out"]),
                  "blocks": [{"up": linear(w, w), "down": linear(w, w)}
                             for _ in range(c["num_blocks"])]}

        def forward(p, x):
            x = relu(apply(p["stem"], x.reshape(x.shape[0], -1)))
            for b in p["blocks"]:
                x = x + apply(b["down"], relu(apply(b["up"], x)))
            return apply(p["head"], x)

    elif family == "batch_norm_cnn":
        c1, c2, side = c["channels1"], c["channels2"], c["image_size"] // 4

        def norm(ch):
            return {"weight": rand(ch), "bias": rand(ch)}

        params = {"conv1": rand(c1, c["in_channels"], 3, 3), "bn1": norm(c1),
                  "conv2": rand(c2, c1, 3, 3), "bn2": norm(c2),
                  "fc1": linear(c2 * side * side, c["d_hidden"]),
                  "fc2": linear(c["d_hidden"], c["num_classes"]),
                  "buffers": {"bn1": {"mean": jnp.zeros(c1), "var": jnp.ones(c1)},
                              "bn2": {"mean": jnp.zeros(c2), "var": jnp.ones(c2)}}}

        def conv(x, w):  # 3x3, padding 1, no bias, NCHW / OIHW as PyTorch
            return jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                                dimension_numbers=("NCHW", "OIHW", "NCHW"))

        def batch_norm(x, p, stats, eps=1e-5):  # eval mode: the running statistics
            scale = p["weight"] / jnp.sqrt(stats["var"] + eps)
            shift = p["bias"] - stats["mean"] * scale
            return x * scale[None, :, None, None] + shift[None, :, None, None]

        def max_pool(x):  # 2x2, stride 2
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                         "VALID")

        def forward(p, x):
            s = p["buffers"]
            x = max_pool(relu(batch_norm(conv(x, p["conv1"]), p["bn1"], s["bn1"])))
            x = max_pool(relu(batch_norm(conv(x, p["conv2"]), p["bn2"], s["bn2"])))
            x = relu(apply(p["fc1"], x.reshape(x.shape[0], -1)))
            return apply(p["fc2"], x)

    else:  # transformer: pre-norm encoder layers, exact GELU, a final LayerNorm, mean pool
        s, d, heads, ff = c["image_size"], c["d_model"], c["nhead"], c["dim_feedforward"]

        def norm():
            return {"w": jnp.ones(d), "b": jnp.zeros(d)}

        def layer():
            return {"norm1": norm(), "in_proj": linear(d, 3 * d), "out_proj": linear(d, d),
                    "norm2": norm(), "linear1": linear(d, ff), "linear2": linear(ff, d)}

        params = {"embed": linear(s, d), "pos_embedding": rand(1, s, d),
                  "layers": [layer() for _ in range(c["num_layers"])], "norm": norm(),
                  "head": linear(d, c["num_classes"])}

        def layer_norm(x, p, eps=1e-5):
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            return (x - mean) / jnp.sqrt(var + eps) * p["w"] + p["b"]

        def attention(x, p, bias):
            n = x.shape[0]
            q, k, v = jnp.split(apply(p["in_proj"], x), 3, axis=-1)

            def split_heads(t):  # [N, S, E] -> [N, H, S, E / H]
                return t.reshape(n, s, heads, d // heads).transpose(0, 2, 1, 3)

            q, k, v = split_heads(q), split_heads(k), split_heads(v)
            scores = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d // heads)
            if bias is not None:
                scores = scores + bias[:, None, None, :]
            out = jax.nn.softmax(scores, axis=-1) @ v
            return apply(p["out_proj"], out.transpose(0, 2, 1, 3).reshape(n, s, d))

        def forward(p, x, padding=None):
            bias = None if padding is None else jnp.where(padding, -jnp.inf, 0.0)
            h = apply(p["embed"], x.reshape(x.shape[0], s, s)) + p["pos_embedding"]
            for lp in p["layers"]:
                h = h + attention(layer_norm(h, lp["norm1"]), lp, bias)
                y = jax.nn.gelu(apply(lp["linear1"], layer_norm(h, lp["norm2"])),
                                approximate=False)
                h = h + apply(lp["linear2"], y)
            return apply(p["head"], layer_norm(h, p["norm"]).mean(1))

    return forward, params


def jax_param_count(params):
    import jax
    counted = {k: v for k, v in params.items() if k != "buffers"}
    return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(counted))


# ---------------------------------------------------------------------------------------
# Workers: one figure per process. Each prints one JSON line on stdout.
# ---------------------------------------------------------------------------------------

def measure(call, iters, min_time):
    """{"us_per_call", "first_call_ms", "iters"} of a blocking call (see the file comment)."""
    start = time.perf_counter()
    call()
    first_ms = (time.perf_counter() - start) * 1e3
    for _ in range(WARMUP_CALLS):
        call()
    if not iters:
        start = time.perf_counter()
        call()
        one = time.perf_counter() - start
        iters = max(1, min(100_000, int(min_time / max(one, 1e-9))))
    samples = []
    for _ in range(INNER_REPEATS):
        start = time.perf_counter()
        for _ in range(iters):
            call()
        samples.append((time.perf_counter() - start) / iters)
    return {"us_per_call": statistics.median(samples) * 1e6, "first_call_ms": first_ms,
            "iters": iters}


def worker_torch(name, batch, threads, args, compiled):
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    model = torch_model(name)
    inputs = [torch.from_numpy(a) for a in example_inputs(name, batch)]
    if compiled:
        model = torch.compile(model)  # inductor, default mode
    with torch.inference_mode():
        return measure(lambda: model(*inputs), args.iters, args.min_time)


def worker_onnxruntime(name, batch, threads, args):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    start = time.perf_counter()
    session = ort.InferenceSession(os.path.join(args.workdir, "model.onnx"), options,
                                   providers=["CPUExecutionProvider"])
    session_ms = (time.perf_counter() - start) * 1e3
    feeds = {i.name: a for i, a in zip(session.get_inputs(), example_inputs(name, batch))}
    result = measure(lambda: session.run(None, feeds), args.iters, args.min_time)
    result["first_call_ms"] += session_ms  # session creation (graph optimization) + first run
    return result


def worker_jax(name, batch, threads, args):
    import jax
    forward, params = jax_model(name)
    fn = jax.jit(forward)
    inputs = [jax.numpy.asarray(a) for a in example_inputs(name, batch)]
    return measure(lambda: fn(params, *inputs).block_until_ready(), args.iters, args.min_time)


def worker_params(name):
    """Parameter counts of the torch and JAX models (parameters only, as `kiln summary`)."""
    model = torch_model(name)
    _, params = jax_model(name)
    return {"torch": sum(p.numel() for p in model.parameters()),
            "jax": jax_param_count(params)}


def worker_prepare(name, batch, threads, args):
    """Writes, into --workdir: model.onnx (static shapes), and for kiln-runnable models a
    kiln checkpoint of the same weights (checkpoint.safetensors) and the input file for
    `kiln run` (input.safetensors)."""
    import torch
    torch.set_num_threads(threads)
    model = torch_model(name)
    inputs = example_inputs(name, batch)
    names = ["x", "padding"][:len(inputs)]
    torch.onnx.export(model, tuple(torch.from_numpy(a) for a in inputs),
                      os.path.join(args.workdir, "model.onnx"), input_names=names,
                      output_names=["logits"], opset_version=17, dynamo=False)
    if runs_on_kiln(name):
        state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        entry = {"model": MODELS[name]["family"], "config": config_of(name),
                 "input_shape": [1, 28, 28]}
        kiln_info = {"format_version": 1, "kiln_version": "compare_peers.py",
                     "contents": "model", "config": entry}
        write_safetensors(os.path.join(args.workdir, "checkpoint.safetensors"), state,
                          {"kiln": json.dumps(kiln_info), "format": "pt"})
        write_safetensors(os.path.join(args.workdir, "input.safetensors"), {"x": inputs[0]})
    return {"prepared": sorted(os.listdir(args.workdir))}


def write_safetensors(path, arrays, metadata=None):
    """The safetensors format: an 8-byte little-endian header length, a JSON header (padded
    with spaces to 8 bytes) of dtype/shape/offsets per tensor, then the raw bytes."""
    dtypes = {"float32": "F32", "int64": "I64", "bool": "BOOL"}
    header, blobs, offset = {}, [], 0
    for key, a in arrays.items():
        data = a.tobytes()  # C order, little-endian on x86
        header[key] = {"dtype": dtypes[str(a.dtype)], "shape": list(a.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_worker(argv_tail, args):
    system, name, batch, threads = argv_tail[0], argv_tail[1], int(argv_tail[2]), int(argv_tail[3])
    if system == "torch":
        result = worker_torch(name, batch, threads, args, compiled=False)
    elif system == "torch_compile":
        result = worker_torch(name, batch, threads, args, compiled=True)
    elif system == "onnxruntime":
        result = worker_onnxruntime(name, batch, threads, args)
    elif system == "jax":
        result = worker_jax(name, batch, threads, args)
    elif system == "params":
        result = worker_params(name)
    elif system == "prepare":
        result = worker_prepare(name, batch, threads, args)
    else:
        raise SystemExit(f"unknown worker system {system!r}")
    result.update(system=system, model=name, batch=batch, threads=threads)
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------------------------------
# The parent: pinned subprocesses, kiln's own output parsed, medians, tables.
# ---------------------------------------------------------------------------------------

def pinned(threads):
    """(command prefix, environment) that pin a process to `threads` cores."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "KILN_NUM_THREADS"):
        env[var] = str(threads)
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    env.pop("XLA_FLAGS", None)
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
    cpus = ",".join(str(i) for i in range(threads))
    return ["taskset", "-c", cpus], env


def run_pinned(cmd, threads, timeout):
    """(stdout, error or None) of `cmd` run pinned."""
    prefix, env = pinned(threads)
    try:
        p = subprocess.run(prefix + cmd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "", f"timed out after {timeout} s: {' '.join(cmd)}"
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-3:]
        return p.stdout, f"exit {p.returncode}: {' '.join(cmd)}: " + " | ".join(tail)
    return p.stdout, None


def run_self(system, name, batch, threads, args, workdir=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", system, name, str(batch),
           str(threads), "--min-time", str(args.min_time)]
    if args.iters:
        cmd += ["--iters", str(args.iters)]
    if workdir:
        cmd += ["--workdir", workdir]
    out, error = run_pinned(cmd, threads, args.timeout)
    if error:
        return {"error": error}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": f"no JSON line from {system} worker"}


def kiln_cmd(args, *words):
    return [args.kiln, *words]


def kiln_bench(name, batch, threads, iters, args):
    """{"eager", "compiled", "compile_ms", "backend"} from one `kiln bench` process."""
    cmd = kiln_cmd(args, "bench", "--model", MODELS[name]["family"], "--batch", str(batch),
                   "--iters", str(iters))
    if MODELS[name]["overrides"]:
        cmd += ["--config", json.dumps(MODELS[name]["overrides"])]
    out, error = run_pinned(cmd, threads, args.timeout)
    if error:
        return {"error": error}
    # bench.cpp prints "  eager   123.45 µs/call", "  compiled   12.34 µs/call (backend cpu)",
    # "  compile   45.6 ms (the first compiled call: ...)" and "backend: ...".
    found = {}
    for key, pattern in (("eager", r"^\s+eager\s+([\d.]+) µs/call"),
                         ("compiled", r"^\s+compiled\s+([\d.]+) µs/call"),
                         ("compile_ms", r"^\s+compile\s+([\d.]+) ms"),
                         ("backend", r"^backend: (.*)$"), ("note", r"^note: (.*)$")):
        m = re.search(pattern, out, re.MULTILINE)
        if m:
            found[key] = m.group(1) if key in ("backend", "note") else float(m.group(1))
    if "compiled" not in found or "eager" not in found:
        return {"error": "could not parse `kiln bench` output:\n" + out}
    return found


def kiln_aot(name, batch, threads, workdir, args):
    """{"aot"} (µs, the median `kiln run` prints) from one `kiln run` process."""
    out, error = run_pinned(kiln_cmd(args, "run", os.path.join(workdir, "artifact"), "--input",
                                     os.path.join(workdir, "input.safetensors")),
                            threads, args.timeout)
    if error:
        return {"error": error}
    m = re.search(r"^run: ([\d.]+) ms \(median of (\d+) runs", out, re.MULTILINE)  # run.cpp
    if not m:
        return {"error": "could not parse `kiln run` output:\n" + out}
    return {"aot": float(m.group(1)) * 1e3}


def kiln_params(name, args):
    cmd = kiln_cmd(args, "summary", "--model", MODELS[name]["family"])
    if MODELS[name]["overrides"]:
        cmd += ["--config", json.dumps(MODELS[name]["overrides"])]
    out, error = run_pinned(cmd, 1, args.timeout)
    m = re.search(r"^Total params: ([\d,]+)", out, re.MULTILINE)  # nn/summary.cpp
    if error or not m:
        return None, error or "no 'Total params' line in `kiln summary`"
    return int(m.group(1).replace(",", "")), None


class Prepared:
    """Per (model, batch), once per run: the ONNX file, and the kiln checkpoint exported to an
    AOT artifact. Kept in a temporary folder removed at the end."""

    def __init__(self, args):
        self.args = args
        self.root = tempfile.mkdtemp(prefix="kiln-peers-")
        self.done = {}

    def get(self, name, batch, want_aot):
        key = (name, batch)
        if key not in self.done:
            workdir = os.path.join(self.root, f"{name}-b{batch}")
            os.makedirs(workdir)
            r = run_self("prepare", name, batch, 1, self.args, workdir)
            self.done[key] = {"dir": workdir, "error": r.get("error"), "aot_error": None,
                              "aot": False}
        entry = self.done[key]
        if want_aot and not entry["aot"] and not entry["aot_error"] and not entry["error"]:
            # Exported once, pinned to one core; the kernel cache makes later exports cheap.
            _, error = run_pinned(kiln_cmd(self.args, "export", "--checkpoint",
                                           os.path.join(entry["dir"], "checkpoint.safetensors"),
                                           "--batch", str(batch), "-o",
                                           os.path.join(entry["dir"], "artifact")),
                                  1, self.args.timeout)
            entry["aot"], entry["aot_error"] = error is None, error
        return entry

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


PEERS = ["torch", "torch_compile", "onnxruntime", "jax"]
SYSTEMS = ["kiln", "kiln_aot"] + PEERS
COLUMNS = [("kiln_eager", "kiln eager"), ("kiln_compiled", "kiln compiled"),
           ("kiln_aot", "kiln AOT"), ("torch", "torch eager"),
           ("torch_compile", "torch.compile"), ("onnxruntime", "ONNX Runtime"),
           ("jax", "JAX jit")]


def measure_row(name, batch, threads, systems, prepared, args, errors):
    """{column: [µs per repeat]} and {column: [first-call ms per repeat]} for one row."""
    times = {key: [] for key, _ in COLUMNS}
    first = {key: [] for key in ("kiln_compiled", "torch_compile", "onnxruntime", "jax")}

    def fail(system, message):
        errors.append(f"{name} batch {batch}, {threads} thread(s), {system}: {message}")

    kiln_iters = args.iters
    if "kiln" in systems and runs_on_kiln(name) and not kiln_iters:
        probe = kiln_bench(name, batch, threads, 1, args)
        if "error" in probe:
            fail("kiln", probe["error"])
            systems = [s for s in systems if s != "kiln"]
        else:
            slowest = max(probe["eager"], probe["compiled"])
            kiln_iters = max(1, int(args.min_time * 1e6 / slowest))
    workdir = None
    if "onnxruntime" in systems or ("kiln_aot" in systems and runs_on_kiln(name)):
        entry = prepared.get(name, batch, "kiln_aot" in systems and runs_on_kiln(name))
        workdir = entry["dir"]
        if entry["error"]:
            fail("prepare (ONNX export, checkpoint)", entry["error"])
            systems = [s for s in systems if s not in ("onnxruntime", "kiln_aot")]
        elif entry["aot_error"]:
            fail("kiln export", entry["aot_error"])
            systems = [s for s in systems if s != "kiln_aot"]

    for _ in range(args.repeats):  # interleaved, so that drifting load moves every column
        for system in systems:
            if system in ("kiln", "kiln_aot") and not runs_on_kiln(name):
                continue
            if system == "kiln":
                r = kiln_bench(name, batch, threads, kiln_iters, args)
                if "error" in r:
                    fail(system, r["error"])
                    continue
                times["kiln_eager"].append(r["eager"])
                times["kiln_compiled"].append(r["compiled"])
                first["kiln_compiled"].append(r.get("compile_ms"))
                if r.get("note") or "graph-breaks" in r.get("backend", ""):
                    note = f"{name} batch {batch}: kiln: {r.get('backend')} {r.get('note', '')}"
                    if note not in errors:
                        errors.append(note)
            elif system == "kiln_aot":
                r = kiln_aot(name, batch, threads, workdir, args)
                if "error" in r:
                    fail(system, r["error"])
                    continue
                times["kiln_aot"].append(r["aot"])
            else:
                r = run_self(system, name, batch, threads, args, workdir)
                if "error" in r:
                    fail(system, r["error"])
                    continue
                print("   ", json.dumps(r), flush=True)
                times[system].append(r["us_per_call"])
                if system in first:
                    first[system].append(r["first_call_ms"])
    return times, first


def fmt_us(values):
    if not values:
        return DASH
    v = statistics.median(values)
    return f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def fmt_ratio(peer, base):
    if not peer or not base:
        return DASH
    return f"{statistics.median(peer) / statistics.median(base):.2f}x"


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def thread_tables(threads, results):
    """The latency table and the first-call table of one thread count."""
    ratio_cols = [("kiln_aot", "AOT"), ("torch", "torch"), ("torch_compile", "t.compile"),
                  ("onnxruntime", "ORT"), ("jax", "JAX")]
    header = (["model", "batch"] + [f"{label} µs" for _, label in COLUMNS] +
              [f"{label}/kc" for _, label in ratio_cols])
    rows, first_rows = [], []
    for (name, batch), (times, first) in results.items():
        rows.append([name, str(batch)] + [fmt_us(times[k]) for k, _ in COLUMNS] +
                    [fmt_ratio(times[k], times["kiln_compiled"]) for k, _ in ratio_cols])
        first_rows.append([name, str(batch)] +
                          [fmt_us([v for v in first[k] if v is not None])
                           for k in ("kiln_compiled", "torch_compile", "onnxruntime", "jax")])
    pins = f"taskset -c {','.join(str(i) for i in range(threads))}"
    text = (f"### {threads} thread{'s' if threads > 1 else ''} ({pins})\n\n"
            "µs per call (median over fresh processes); x/kc = that system's time / kiln "
            "compiled (above 1: kiln compiled is faster).\n\n" + markdown_table(header, rows) +
            "\n\nFirst call, ms (kiln: `kiln bench`'s compile line: trace, passes, codegen, "
            "run; torch.compile: dynamo + inductor; ONNX Runtime: session creation + first run; "
            "JAX: trace + XLA compile + first run). kiln's and inductor's on-disk caches are "
            "warm after a figure's first process, so these are mostly cache hits:\n\n" +
            markdown_table(["model", "batch", "kiln compiled", "torch.compile", "ONNX Runtime",
                            "JAX jit"], first_rows))
    return text


def preamble(args):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = []
    for pkg in ("torch", "onnxruntime", "onnx", "jax", "jaxlib", "numpy"):
        try:
            versions.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{pkg} (not installed)")
    repo = os.path.dirname(os.path.abspath(args.kiln))
    git = subprocess.run(["git", "-C", repo, "log", "-1", "--format=%h %cs"],
                         capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    kiln_rev = (git.stdout.strip() or "unknown") + (" + local changes" if dirty else "")
    load = os.getloadavg()[0]
    busy = (" (busy: other work competes for the cores; threaded figures, PyTorch's OpenMP "
            "above all, suffer)" if load > 0.5 else "")
    return "\n".join([
        f"## kiln vs peers, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        "",
        f"- CPU: {cpu}, {os.cpu_count()} logical cores; Python {sys.version.split()[0]}; "
        f"load average at start {load:.2f}{busy}",
        f"- peers: {', '.join(versions)}",
        f"- kiln: {args.kiln} (checkout {kiln_rev})",
        f"- {args.repeats} fresh process(es) per figure; in each, 5 timed repeats of "
        + (f"{args.iters} calls" if args.iters else f"~{args.min_time} s") + " after warm-up",
        "- pinning: taskset -c 0..T-1; OMP/MKL/OPENBLAS/KILN_NUM_THREADS=T; "
        "torch.set_num_threads(T); ORT intra_op=T, inter_op=1, sequential; "
        "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false at T=1 (JAX follows the affinity)",
        "- kiln AOT: `kiln export --batch N` then `kiln run` (median of 5 single calls, "
        "ms with 3 decimals: coarse below ~100 µs)",
    ])


def check_params(models, args, systems):
    """Lines comparing kiln summary's total with the torch and JAX models' counts."""
    lines = ["Parameters (kiln summary / torch / JAX):"]
    for name in models:
        r = run_self("params", name, 0, 1, args)
        kiln_n, error = None, "kiln not in --systems"
        if not runs_on_kiln(name):
            error = "kiln's CLI cannot run it"
        elif "kiln" in systems or "kiln_aot" in systems:
            kiln_n, error = kiln_params(name, args)
        if "error" in r:
            lines.append(f"  {name}: {r['error']}")
            continue
        kiln_s = f"{kiln_n:,}" if kiln_n is not None else f"{DASH} ({error})"
        same = kiln_n in (None, r["torch"]) and r["torch"] == r["jax"]
        lines.append(f"  {name}: {kiln_s} / {r['torch']:,} / {r['jax']:,}"
                     + ("" if same else "   <-- MISMATCH"))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default="build/frontend/kiln", help="the kiln binary")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of: {', '.join(MODELS)}")
    p.add_argument("--batches", help="comma-separated batch sizes for every model (default: "
                   "1,64,1024; 8 for the BERT-sized encoders)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per figure")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated, of: {', '.join(SYSTEMS)}")
    p.add_argument("--min-time", type=float, default=0.2,
                   help="seconds per timed repeat, when --iters is not given")
    p.add_argument("--iters", type=int, default=0,
                   help="calls per timed repeat, for every system (default: from --min-time)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per subprocess")
    p.add_argument("--markdown", help="also write the tables to this file")
    p.add_argument("--worker", nargs=4, metavar=("SYSTEM", "MODEL", "BATCH", "THREADS"),
                   help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return run_worker(args.worker, args)

    models = args.models.split(",")
    systems = args.systems.split(",")
    threads_list = [int(t) for t in args.threads.split(",")]
    for name in models:
        if name not in MODELS:
            p.error(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    for s in systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    if max(threads_list) > os.cpu_count():
        p.error(f"--threads {max(threads_list)} exceeds the {os.cpu_count()} cores")
    if any(s.startswith("kiln") for s in systems) and not os.access(args.kiln, os.X_OK):
        p.error(f"no kiln binary at {args.kiln} (build first, or pass --kiln PATH, or leave "
                "kiln out of --systems)")

    head = preamble(args)
    print(head + "\n", flush=True)
    params = check_params(models, args, systems)
    print(params + "\n", flush=True)

    prepared = Prepared(args)
    sections, errors = [], []
    try:
        for threads in threads_list:
            results = {}
            for name in models:
                batches = ([int(b) for b in args.batches.split(",")] if args.batches
                           else MODELS[name]["batches"])
                for batch in batches:
                    print(f"  {threads} thread(s): {name} batch {batch} ...", flush=True)
                    results[(name, batch)] = measure_row(name, batch, threads, systems,
                                                         prepared, args, errors)
            sections.append(thread_tables(threads, results))
            print("\n" + sections[-1] + "\n", flush=True)
    finally:
        prepared.cleanup()
    notes = "\n".join(["Notes and errors:"] + [f"- {e}" for e in errors]) if errors else ""
    if notes:
        print(notes)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n\n".join([head, "```\n" + params + "\n```"] + sections +
                                ([notes] if notes else [])) + "\n")
        print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
