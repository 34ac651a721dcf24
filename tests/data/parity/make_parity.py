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
    recurrent_cases()
    conv_pool_cases()
    decoder_cases()
    embedding_bag_cases()


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



def recurrent_cases():
    """RNN, LSTM, GRU and their cells (their own seed). Every case passes h0 (and c0), so both
    the sequence and the final state are checked; the *_lengths cases run padded batches
    through pack_padded_sequence / pad_packed_sequence, which kiln takes as a lengths tensor."""
    torch.manual_seed(20261204)
    pack = torch.nn.utils.rnn.pack_padded_sequence
    unpack = torch.nn.utils.rnn.pad_packed_sequence

    def run(m, x, h0, c0=None, lengths=None):
        batch_first = m.batch_first
        seq = x if lengths is None else pack(x, lengths, batch_first=batch_first,
                                              enforce_sorted=False)
        out, state = m(seq, h0 if c0 is None else (h0, c0))
        if lengths is not None:
            out, _ = unpack(out, batch_first=batch_first, total_length=x.shape[1 if batch_first else 0])
        if c0 is None:
            return {"y": out, "h_n": state}
        return {"y": out, "h_n": state[0], "c_n": state[1]}

    def case(name, m, seq_len=5, batch=3, lengths=None):
        randomize_(m, 0.4)
        dirs = 2 if m.bidirectional else 1
        shape = (batch, seq_len, m.input_size) if m.batch_first else (seq_len, batch, m.input_size)
        inputs = {"x": torch.randn(*shape),
                  "h0": torch.randn(m.num_layers * dirs, batch, m.hidden_size)}
        grads = ["x", "h0"]
        if isinstance(m, torch.nn.LSTM):
            inputs["c0"] = torch.randn(m.num_layers * dirs, batch, m.hidden_size)
            grads.append("c0")
        if lengths is not None:
            inputs["lengths"] = torch.tensor(lengths, dtype=torch.int64)
        write_case(name, m, inputs, run, grads)

    case("rnn_tanh_2layer", torch.nn.RNN(4, 6, num_layers=2))
    case("rnn_relu_bidirectional_batch_first",
         torch.nn.RNN(4, 5, nonlinearity="relu", bidirectional=True, batch_first=True))
    case("lstm_2layer_bidirectional", torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True))
    case("lstm_2layer_bidirectional_lengths",
         torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True),
         lengths=[5, 2, 4])
    case("lstm_no_bias", torch.nn.LSTM(3, 4, bias=False))
    case("gru_2layer_bidirectional_lengths", torch.nn.GRU(4, 6, num_layers=2, bidirectional=True),
         lengths=[3, 5, 1])
    case("gru_batch_first", torch.nn.GRU(4, 5, batch_first=True))
    case("rnn_tanh_lengths", torch.nn.RNN(3, 4, bidirectional=True), lengths=[2, 5, 4])

    def cell(name, m, hidden_size, lstm=False):
        randomize_(m, 0.4)
        inputs = {"x": torch.randn(3, m.input_size), "h0": torch.randn(3, hidden_size)}
        if lstm:
            inputs["c0"] = torch.randn(3, hidden_size)

            def call(m, x, h0, c0):
                h, c = m(x, (h0, c0))
                return {"h": h, "c": c}
        else:
            def call(m, x, h0):
                return {"h": m(x, h0)}
        write_case(name, m, inputs, call, list(inputs))

    cell("rnn_cell", torch.nn.RNNCell(4, 5, nonlinearity="relu"), 5)
    cell("lstm_cell", torch.nn.LSTMCell(4, 5), 5, lstm=True)
    cell("gru_cell", torch.nn.GRUCell(4, 5), 5)



def conv_pool_cases():
    """1-D and 3-D convolutions, transposed convolutions and pools (their own seed)."""
    torch.manual_seed(20261205)
    nn = torch.nn

    def layer(name, module, shape):
        randomize_(module, 0.4)
        write_case(name, module, {"x": torch.randn(*shape)}, single, ["x"])

    layer("conv1d", nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9))
    layer("conv1d_reflect_dilation", nn.Conv1d(3, 4, 3, padding=2, dilation=2, padding_mode="reflect"),
          (2, 3, 9))
    layer("conv3d", nn.Conv3d(2, 4, (3, 2, 2), stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1)),
          (2, 2, 5, 6, 5))
    layer("conv3d_groups", nn.Conv3d(4, 6, 2, groups=2, bias=False), (1, 4, 3, 4, 4))
    layer("conv_transpose1d", nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
          (2, 3, 5))
    layer("conv_transpose2d_groups_output_padding",
          nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                             groups=2), (2, 4, 4, 3))
    layer("conv_transpose2d_dilation", nn.ConvTranspose2d(3, 2, 3, stride=2, padding=2, dilation=2),
          (1, 3, 4, 4))
    layer("conv_transpose3d",
          nn.ConvTranspose3d(4, 2, (2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 1),
                             output_padding=(1, 0, 1), groups=2, dilation=(2, 1, 1)), (1, 4, 3, 4, 3))
    layer("max_pool1d_ceil", nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True), (2, 3, 8))
    layer("avg_pool1d_ceil_exclude_pad",
          nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (2, 3, 8))
    layer("max_pool3d", nn.MaxPool3d((2, 3, 2), stride=(2, 2, 1), padding=(1, 1, 0), dilation=(1, 1, 2)),
          (2, 2, 5, 6, 5))
    layer("max_pool3d_ceil", nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 5, 7))
    layer("avg_pool3d_ceil_exclude_pad",
          nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 6, 5, 7))
    layer("avg_pool3d_include_pad", nn.AvgPool3d((2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 1)),
          (1, 2, 4, 5, 5))
    layer("avg_pool3d_divisor", nn.AvgPool3d(2, divisor_override=3), (1, 2, 4, 4, 5))
    layer("adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(4), (2, 3, 10))
    layer("adaptive_max_pool2d", nn.AdaptiveMaxPool2d((3, 4)), (2, 3, 7, 9))

    pool = nn.MaxPool2d(2, stride=2, return_indices=True)

    def unpool_call(m, x):
        values, indices = pool(x)
        return {"y": m(values, indices, output_size=(5, 7))}

    write_case("max_unpool2d", nn.MaxUnpool2d(2, stride=2), {"x": torch.randn(2, 3, 5, 7)}, unpool_call,
               ["x"])



def decoder_cases():
    """TransformerDecoderLayer (post-norm relu batch first, pre-norm gelu sequence first) and a
    small Transformer with causal and padding masks (their own seed)."""
    torch.manual_seed(20261206)
    nn = torch.nn

    def decoder_call(m, tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                     memory_key_padding_mask):
        return {"y": m(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                       tgt_key_padding_mask=tgt_key_padding_mask,
                       memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=True)}

    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    for norm_first, activation, batch_first in ((False, "relu", True), (True, "gelu", False)):
        layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation=activation,
                                           batch_first=batch_first, norm_first=norm_first)
        randomize_(layer, 0.3)
        shape = (lambda n, l: (n, l, 8)) if batch_first else (lambda n, l: (l, n, 8))
        memory_mask = torch.zeros(4, 5, dtype=torch.bool)
        memory_mask[0, 4] = True
        write_case("decoder_layer_{}_{}".format("pre" if norm_first else "post", activation), layer,
                   {"tgt": torch.randn(*shape(2, 4)), "memory": torch.randn(*shape(2, 5)),
                    "tgt_mask": causal, "memory_mask": memory_mask,
                    "tgt_key_padding_mask": torch.tensor([[False, False, False, True], [False] * 4]),
                    "memory_key_padding_mask": torch.tensor([[False] * 5, [False, False, False, True, True]])},
                   decoder_call, ["tgt", "memory"])

    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                           dim_feedforward=16, dropout=0.0, batch_first=True)
    randomize_(model, 0.3)

    def transformer_call(m, src, tgt, tgt_mask, src_key_padding_mask, memory_key_padding_mask):
        return {"y": m(src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=src_key_padding_mask,
                       memory_key_padding_mask=memory_key_padding_mask)}

    padding = torch.tensor([[False] * 5, [False, False, False, False, True]])
    write_case("transformer", model,
               {"src": torch.randn(2, 5, 8), "tgt": torch.randn(2, 4, 8),
                "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4),
                "src_key_padding_mask": padding, "memory_key_padding_mask": padding.clone()},
               transformer_call, ["src", "tgt"])



def embedding_bag_cases():
    """EmbeddingBag: sum with offsets, an empty bag and per-sample weights; mean over the rows
    of a 2-D input with padding_idx (one row all padding); max with include_last_offset."""
    torch.manual_seed(20261207)
    nn = torch.nn

    def bag_call(m, input, offsets=None, per_sample_weights=None):
        return {"y": m(input, offsets, per_sample_weights=per_sample_weights)}

    write_case("embedding_bag_sum_offsets_weights", nn.EmbeddingBag(10, 3, mode="sum"),
               {"input": torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), "offsets": torch.tensor([0, 3, 3, 6]),
                "per_sample_weights": torch.randn(8)}, bag_call, ["per_sample_weights"])
    write_case("embedding_bag_mean_2d_padding", nn.EmbeddingBag(10, 3, mode="mean", padding_idx=0),
               {"input": torch.tensor([[1, 0, 4, 5], [0, 0, 0, 0], [7, 7, 0, 2]])}, bag_call)
    write_case("embedding_bag_max_last_offset",
               nn.EmbeddingBag(10, 3, mode="max", include_last_offset=True),
               {"input": torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]),
                "offsets": torch.tensor([0, 2, 5, 5, 8])}, bag_call)


if __name__ == "__main__":
    main()
