"""Writes the PyTorch parity files that tests/frontend/parity_test.cpp checks kiln against.

Rerun by hand (needs torch, safetensors and numpy from pip) from the repository root:

    python tests/data/parity/make_parity.py [case-prefix ...]

With prefixes, only the cases whose names start with one of them are written (every case is
still computed, so the random streams and therefore the files do not depend on the filter).

One <case>.safetensors per case, float32, seeded, a few KB each. Keys:
    param.<name>        the module's state dict (PyTorch's key names), before the step
    input.<name>        forward inputs (masks are bool)
    output.<name>       forward outputs
    loss_weight.<name>  fixed random weights: loss = sum over outputs of (output * loss_weight)
    grad.input.<name>   d loss / d input (floating inputs only)
    grad.param.<name>   d loss / d parameter
    buffer_after.<name> buffers after the forward (BatchNorm's running statistics)
The metadata entry "source" holds the torch version that wrote the file and the module's repr.
"""

import os
import sys

import torch
from safetensors.torch import save_file

OUT_DIR = os.path.dirname(os.path.abspath(__file__))


def write_case(name, module, inputs, call, grad_inputs=()):
    """Runs call(module, **inputs) -> {output name: tensor}, backpropagates a fixed random
    weighting of the outputs and saves everything under `name`."""
    tensors = {}
    for key, value in module.state_dict().items():
        tensors["param." + key] = value.detach().clone()
    buffers_before = {k: v.clone() for k, v in module.named_buffers()}
    for key in grad_inputs:
        inputs[key].requires_grad_(True)
    outputs = call(module, **inputs)
    loss = 0
    for key, out in outputs.items():
        weight = torch.randn(out.shape)
        tensors["loss_weight." + key] = weight
        tensors["output." + key] = out.detach().clone()
        loss = loss + (out * weight).sum()
    loss.backward()
    for key, value in inputs.items():
        tensors["input." + key] = value.detach().clone()
    for key in grad_inputs:
        tensors["grad.input." + key] = inputs[key].grad.clone()
    for key, p in module.named_parameters():
        tensors["grad.param." + key] = p.grad.clone()
    for key, b in module.named_buffers():
        if not torch.equal(b, buffers_before[key]):
            tensors["buffer_after." + key] = b.clone()
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    if len(sys.argv) > 1 and not any(name.startswith(p) for p in sys.argv[1:]):
        return
    # One metadata entry: the writer keeps entries in a hash map, so two would be written in
    # a different order on each run and the files would not be byte-for-byte reproducible.
    metadata = {"source": "torch {}\n{!r}".format(torch.__version__, module)}
    path = os.path.join(OUT_DIR, name + ".safetensors")
    save_file(tensors, path, metadata=metadata)
    os.chmod(path, 0o644)


def randomize_(module, scale=0.5):
    """Non-trivial values for every parameter (norm weights around 1)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                p.copy_(1 + scale * torch.randn(p.shape))
            else:
                p.copy_(scale * torch.randn(p.shape))


def single(module, x):
    return {"y": module(x)}


def main():
    torch.manual_seed(20240601)

    write_case("linear", torch.nn.Linear(5, 3), {"x": torch.randn(4, 5)}, single, ["x"])

    conv = torch.nn.Conv2d(3, 4, kernel_size=(3, 2), stride=(2, 1), padding=(1, 1))
    write_case("conv2d", conv, {"x": torch.randn(2, 3, 7, 6)}, single, ["x"])

    for mode in ("train", "eval"):
        bn = torch.nn.BatchNorm2d(3)
        randomize_(bn)
        with torch.no_grad():
            bn.running_mean.copy_(0.3 * torch.randn(3))
            bn.running_var.copy_(0.5 + torch.rand(3))
        bn.train(mode == "train")
        write_case("batchnorm2d_" + mode, bn, {"x": 2 + 1.5 * torch.randn(4, 3, 3, 3)}, single,
                   ["x"])

    ln = torch.nn.LayerNorm([4, 5])
    randomize_(ln)
    write_case("layernorm", ln, {"x": torch.randn(3, 4, 5)}, single, ["x"])

    # Cross-attention, sequence first, keys padded per batch element; both outputs checked.
    mha = torch.nn.MultiheadAttention(8, 2)
    randomize_(mha)
    padding = torch.tensor([[False, False, False, False, True], [False, False, True, True, True]])

    def mha_padded(m, query, key, value, key_padding_mask):
        out, weights = m(query, key, value, key_padding_mask=key_padding_mask,
                         need_weights=True)
        return {"out": out, "weights": weights}

    write_case("mha_padding", mha,
               {"query": torch.randn(3, 2, 8), "key": torch.randn(5, 2, 8),
                "value": torch.randn(5, 2, 8), "key_padding_mask": padding},
               mha_padded, ["query", "key", "value"])

    # Causal self-attention, batch first, per-head weights.
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    randomize_(mha)
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)

    def mha_causal(m, x, attn_mask):
        out, weights = m(x, x, x, attn_mask=attn_mask, need_weights=True,
                         average_attn_weights=False)
        return {"out": out, "weights": weights}

    write_case("mha_causal", mha, {"x": torch.randn(2, 4, 8), "attn_mask": causal},
               mha_causal, ["x"])

    # Encoder layers: post-norm and pre-norm, relu and gelu, with a causal mask given as the
    # is_causal hint plus its mask, and a key padding mask (both bool: PyTorch deprecates
    # mixing mask types).
    for norm_first in (False, True):
        for activation in ("relu", "gelu"):
            layer = torch.nn.TransformerEncoderLayer(
                8, 2, dim_feedforward=16, dropout=0.0, activation=activation,
                batch_first=True, norm_first=norm_first)
            randomize_(layer, 0.3)
            mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
            pad = torch.tensor([[False, False, False, True], [False, False, False, False]])

            def encoder_layer(m, src, src_mask, src_key_padding_mask):
                return {"y": m(src, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                               is_causal=True)}

            name = "encoder_layer_{}_{}".format("pre" if norm_first else "post", activation)
            write_case(name, layer,
                       {"src": torch.randn(2, 4, 8), "src_mask": mask,
                        "src_key_padding_mask": pad},
                       encoder_layer, ["src"])

    layer_cases()


def layer_cases():
    """Normalization, padding and resampling layers (their own seed, so adding cases above
    changes none of these)."""
    torch.manual_seed(20261203)
    gn = torch.nn.GroupNorm(2, 6)
    randomize_(gn)
    write_case("groupnorm", gn, {"x": 1 + torch.randn(3, 6, 4, 5)}, single, ["x"])

    inorm = torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    randomize_(inorm)
    write_case("instancenorm2d_train", inorm, {"x": 2 + 1.5 * torch.randn(4, 3, 5, 5)}, single, ["x"])
    inorm = torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    randomize_(inorm)
    with torch.no_grad():
        inorm.running_mean.copy_(0.3 * torch.randn(3))
        inorm.running_var.copy_(0.5 + torch.rand(3))
    inorm.eval()
    write_case("instancenorm1d_eval", inorm, {"x": torch.randn(2, 3, 7)}, single, ["x"])
    write_case("instancenorm1d_plain", torch.nn.InstanceNorm1d(3), {"x": torch.randn(2, 3, 7)}, single, ["x"])

    rms = torch.nn.RMSNorm([4, 5])
    randomize_(rms)
    write_case("rmsnorm", rms, {"x": torch.randn(3, 4, 5)}, single, ["x"])

    write_case("pixel_shuffle", torch.nn.PixelShuffle(2), {"x": torch.randn(2, 8, 3, 4)}, single, ["x"])
    write_case("pixel_unshuffle", torch.nn.PixelUnshuffle(2), {"x": torch.randn(2, 3, 4, 6)}, single, ["x"])

    x = torch.randn(2, 3, 4, 5)
    write_case("upsample_nearest_scale", torch.nn.Upsample(scale_factor=2), {"x": x.clone()}, single, ["x"])
    write_case("upsample_nearest_size", torch.nn.Upsample(size=(7, 9)), {"x": x.clone()}, single, ["x"])
    write_case("upsample_bilinear", torch.nn.Upsample(size=(7, 9), mode="bilinear"), {"x": x.clone()}, single,
               ["x"])
    write_case("upsample_bilinear_corners", torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
               {"x": x.clone()}, single, ["x"])
    write_case("upsample_bilinear_down", torch.nn.Upsample(size=(3, 2), mode="bilinear"), {"x": x.clone()}, single,
               ["x"])
    write_case("upsample_linear_scale", torch.nn.Upsample(scale_factor=2.5, mode="linear"),
               {"x": torch.randn(2, 3, 6)}, single, ["x"])

    write_case("reflection_pad2d", torch.nn.ReflectionPad2d((1, 2, 2, 0)), {"x": torch.randn(2, 3, 4, 5)}, single,
               ["x"])
    write_case("replication_pad1d", torch.nn.ReplicationPad1d((3, 1)), {"x": torch.randn(2, 3, 4)}, single, ["x"])
    write_case("constant_pad3d", torch.nn.ConstantPad3d(1, 0.5), {"x": torch.randn(1, 2, 2, 3, 2)}, single, ["x"])


if __name__ == "__main__":
    main()
