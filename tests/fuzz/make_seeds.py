#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/): small valid inputs
of every kind each reader accepts. Standard library only; run from anywhere:

    python3 tests/fuzz/make_seeds.py

The IR seeds are the graphs written in the IR and pass tests (tests/ir, tests/passes), so
new test graphs become seeds when this is run again. Files are named by content, so
running it twice changes nothing.
"""
import gzip
import hashlib
import json
import pathlib
import re
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def write(target, data, name=None):
    if isinstance(data, str):
        data = data.encode()
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / (name or hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)


# ---- safetensors ----

ST_FORMAT = {"BOOL": "?", "I32": "i", "I64": "q", "F16": "e", "F32": "f", "F64": "d"}


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, values)], stored in the given order."""
    header, blob = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in tensors:
        if dtype == "BF16":
            raw = b"".join(struct.pack("<f", v)[2:] for v in values)
        else:
            raw = struct.pack("<%d%s" % (len(values), ST_FORMAT[dtype]), *values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def safetensors_seeds():
    write("safetensors", safetensors([("w", "F32", [2, 3], [1, 2, 3, 4, 5, 6.5])]))
    write("safetensors", safetensors([], {"format": "pt"}))
    write("safetensors", safetensors([
        ("b", "F64", [2], [0.5, -1e300]), ("i", "I64", [3], [1, -2, 2**62]),
        ("j", "I32", [1, 2], [7, -7]), ("m", "BOOL", [4], [True, False, True, True]),
        ("h", "F16", [2], [1.5, -2.0]), ("z", "BF16", [2], [3.0, 0.25]),
        ("s", "F32", [], [42.0]), ("e", "F32", [0, 5], []),
    ], {"kiln_version": "0.1.0", "note": "h\u00e9llo"}))
    write("safetensors", safetensors([("blocks.0.up.weight", "F32", [4, 1], [1, 2, 3, 4]),
                                      ("blocks.0.up.bias", "F32", [4], [0, 0, 0, 0])]))
    # Files written by kiln and by numpy / PyTorch, from the tests' own data.
    for path in ["safetensors/kiln_written.safetensors", "safetensors/reference_numpy.safetensors",
                 "checkpoint/torch_mlp_io.safetensors", "checkpoint/torch_mlp.safetensors"]:
        write("safetensors", (ROOT / "tests" / "data" / path).read_bytes())


# ---- JSON ----

def json_seeds():
    docs = [
        '{}', '[]', 'null', 'true', 'false', '0', '-0', '12345678901234567890', '-9223372036854775808',
        '3.141592653589793', '1e-320', '2.5E+10', '"plain"', '"esc \\" \\\\ \\/ \\b \\f \\n \\r \\t"',
        '"\\u00e9\\ud83d\\ude00 \u00e9\U0001F600"', ' [1, 2.5, "x", null, true, {"a": [[]]}] ',
        '{"d_hidden": 256, "layers": [{"kind": "linear", "bias": true}], "lr": 0.001}',
        '{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}',
        '[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]',
    ]
    for d in docs:
        write("json", d)


# ---- IR text ----

STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "0": "\0"}


def c_string_runs(source):
    """The C++ string literals of a file, adjacent ones concatenated (raw strings too)."""
    runs = [m.group(1) for m in re.finditer(r'R"\((.*?)\)"', source, re.S)]
    pos, current = 0, None
    for m in STRING.finditer(source):
        if current is not None and source[pos:m.start()].strip() == "":
            current += m.group(1)
        else:
            if current is not None:
                runs.append(current)
            current = m.group(1)
        pos = m.end()
    if current is not None:
        runs.append(current)
    return [re.sub(r"\\(.)", lambda e: ESCAPES.get(e.group(1), e.group(0)), r) for r in runs]


def ir_seeds():
    """Writes the IR seeds and returns them, in a stable order."""
    seen = set()
    for folder in ["ir", "passes", "export", "backends"]:
        for path in sorted((ROOT / "tests" / folder).glob("*.cpp")):
            for text in c_string_runs(path.read_text()):
                text = text.strip() + "\n"
                if text.startswith("graph ") and "return" in text and text not in seen:
                    seen.add(text)
                    write("ir_parse", text)
    return sorted(seen)


# ---- artifact: a graph, the weights' symbols record, a kernel library's target record ----

PART_SEPARATOR = "\n%%kiln-part%%\n"  # tests/fuzz/artifact_target.cpp
TARGET_RECORD = "kiln-target 1\narch x86_64\ncpu znver3\nfeatures +avx,+avx2,+fma,+f16c\n"


def artifact_seeds(graphs):
    symbols = '[["s0",1,9223372036854775807],["s1",2,64]]'
    # The graphs with symbolic sizes first: their signature and ranges are the interesting part.
    chosen = [g for g in graphs if "[s0" in g][:20] + [g for g in graphs if "[s0" not in g][:10]
    for g in chosen:
        write("artifact", g + PART_SEPARATOR + symbols + PART_SEPARATOR + TARGET_RECORD)


# ---- artifact manifest ----

def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def manifest(graphs, inputs, outputs, symbols, config, weights_embedded=False):
    m = {"format": "kiln-artifact", "format_version": 3, "kiln_version": "0.1.0",
         "model": "FashionMLP",
         "target": {"arch": "x86_64", "cpu": "x86-64-v3", "features": ["avx2", "fma"]},
         "inputs": inputs, "outputs": outputs, "symbols": symbols, "graphs": graphs,
         "weights": "weights.so" if weights_embedded else "weights.safetensors",
         "weights_embedded": weights_embedded, "config": config,
         "metadata": {"test_accuracy": "0.8463"}}
    files = []
    for g in graphs:
        files += [g["graph"]] + ([g["kernels"], g["object"]] if g["kernel_count"] > 0 else [])
    files.append(m["weights"])
    digests = {f: hashlib.sha256(f.encode()).hexdigest() for f in sorted(set(files))}
    text = compact(m) + "\n" + "".join(f"{k} {v}\n" for k, v in sorted(digests.items()))
    m["sha256"] = digests
    m["artifact_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps(m, indent=1)


def manifest_seeds():
    big = 9223372036854775807
    write("manifest", manifest(
        [{"graph": "graph0.kir", "kernels": "kernels0.so", "object": "kernels0.o",
          "kernel_count": 3, "symbols": {"s0": [2, big]}},
         {"graph": "graph1.kir", "kernels": "", "object": "", "kernel_count": 0,
          "symbols": {"s0": [1, 1]}}],
        [{"name": "x", "dtype": "float32", "shape": ["s0", 1, 28, 28]}],
        [{"name": "output0", "dtype": "float32", "shape": ["s0*10"]}],
        [{"name": "s0", "min": 1, "max": big}], {"d_hidden": 256}))
    write("manifest", manifest(
        [{"graph": "graph0.kir", "kernels": "", "object": "", "kernel_count": 0, "symbols": {}}],
        [{"name": "a", "dtype": "int64", "shape": [3]}, {"name": "b", "dtype": "bool", "shape": []}],
        [{"name": "output0", "dtype": "float64", "shape": [3, 2]}], [], None, True))


# ---- IDX ----

IDX_CODES = {0x08: "B", 0x09: "b", 0x0B: "h", 0x0C: "i", 0x0D: "f", 0x0E: "d"}


def idx(code, dims, values):
    head = bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + struct.pack(">%d%s" % (len(values), IDX_CODES[code]), *values)


def idx_seeds():
    files = [idx(0x08, [3], [0, 9, 255]), idx(0x08, [2, 2, 2], list(range(8))),
             idx(0x09, [2], [-128, 127]), idx(0x0B, [2, 1], [-300, 300]),
             idx(0x0C, [3], [-(2**31), 0, 2**31 - 1]), idx(0x0D, [2], [1.5, -0.25]),
             idx(0x0E, [1, 2], [1e300, -2.5]), idx(0x08, [0, 28, 28], [])]
    for f in files:
        write("idx", f)
    for f in files[:2] + files[5:6]:
        write("idx", gzip.compress(f, mtime=0))


if __name__ == "__main__":
    safetensors_seeds()
    json_seeds()
    artifact_seeds(ir_seeds())
    manifest_seeds()
    idx_seeds()
    for d in sorted(CORPUS.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")
