#!/usr/bin/env python3
"""Summarizes Google Benchmark JSON files from the kiln bench programs: the median of each
benchmark, and kiln-vs-baseline ratios computed within each run (then the median over
runs), so machine noise between runs does not enter a ratio.

  build/bench/bench_ops --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_out=ops1.json --benchmark_out_format=json
  python3 bench/summarize.py ops1.json ops2.json ops3.json gemm1.json ...
"""
import json
import re
import statistics
import sys
from collections import defaultdict


def load(path):
    """{run_name: {"time_ns": median real time, "bytes": B/s, "flops": FLOP/s}} of one file."""
    with open(path) as f:
        data = json.load(f)
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    out = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            continue
        name = b["run_name"]
        out[name] = {
            "time_ns": b["real_time"] * scale[b["time_unit"]],
            "bytes": b.get("bytes_per_second"),
            "flops": b.get("FLOP/s"),
        }
    return out


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_time(ns):
    if ns is None:
        return "-"
    for unit, s in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= s:
            return f"{ns / s:.3g} {unit}"
    return f"{ns:.3g} ns"


def main(paths):
    runs = [load(p) for p in paths]
    # Sorted, so kiln and its baseline sit together (random interleaving shuffles the files).
    def key(name):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

    names = sorted({n for r in runs for n in r}, key=key)

    print("| benchmark | median time | rate | runs |")
    print("|---|---|---|---|")
    for n in names:
        vals = [r[n] for r in runs if n in r]
        t = med([v["time_ns"] for v in vals])
        rate = med([v["flops"] for v in vals])
        rate_s = f"{rate / 1e9:.1f} GFLOP/s" if rate else ""
        if not rate:
            b = med([v["bytes"] for v in vals])
            rate_s = f"{b / 1e9:.2f} GB/s" if b else ""
        print(f"| {n} | {fmt_time(t)} | {rate_s} | {len(vals)} |")

    # Ratios within one run: (label, numerator, denominator, metric). metric "time":
    # num_time / den_time (lower is better for kiln); "bytes"/"flops": num_rate / den_rate.
    ratios = []
    for threads in (1, 2):
        t = f"threads:{threads}/real_time"
        ratios += [
            (f"add 16M bandwidth / memcpy bandwidth, {threads}T", f"BM_Add16M/{t}", f"BM_Memcpy16M_Baseline/{t}", "bytes"),
            (f"add_ 16M bandwidth / memcpy bandwidth, {threads}T", f"BM_Add16M_Inplace/{t}", f"BM_Memcpy16M_Baseline/{t}", "bytes"),
            (f"plain add loop bandwidth / memcpy bandwidth, {threads}T", f"BM_Add16M_BaselineLoop/{t}", f"BM_Memcpy16M_Baseline/{t}", "bytes"),
            (f"add 16M time / plain loop time, {threads}T", f"BM_Add16M/{t}", f"BM_Add16M_BaselineLoop/{t}", "time"),
            (f"chain eager time / fused loop time, {threads}T", f"BM_Chain16M/{t}", f"BM_Chain16M_BaselineFused/{t}", "time"),
        ]
    ratios += [("add(1 elem) time / scalar add time", "BM_Dispatch_Add", "BM_Dispatch_BaselineScalarAdd", "time")]
    for n in (256, 1024, 2048):
        for threads in (1, 2):
            k = f"n:{n}/threads:{threads}/real_time"
            ratios += [
                (f"sgemm {n} {threads}T kiln / OpenBLAS", f"BM_Sgemm_Kiln/{k}", f"BM_Sgemm_OpenBLAS/{k}", "flops"),
                (f"sgemm {n} {threads}T kiln / oneDNN", f"BM_Sgemm_Kiln/{k}", f"BM_Sgemm_OneDNN/{k}", "flops"),
                (f"sgemm {n} {threads}T OpenBLAS / oneDNN", f"BM_Sgemm_OpenBLAS/{k}", f"BM_Sgemm_OneDNN/{k}", "flops"),
            ]
            if threads == 1:
                ratios += [
                    (f"sgemm {n} 1T kiln / Eigen", f"BM_Sgemm_Kiln/{k}", f"BM_Sgemm_Eigen/{k}", "flops"),
                    (f"sgemm {n} 1T OpenBLAS / Eigen", f"BM_Sgemm_OpenBLAS/{k}", f"BM_Sgemm_Eigen/{k}", "flops"),
                ]
        ratios += [
            (f"sgemm {n} kiln 2T / 1T", f"BM_Sgemm_Kiln/n:{n}/threads:2/real_time", f"BM_Sgemm_Kiln/n:{n}/threads:1/real_time", "flops"),
            (f"sgemm {n} OpenBLAS 2T / 1T", f"BM_Sgemm_OpenBLAS/n:{n}/threads:2/real_time", f"BM_Sgemm_OpenBLAS/n:{n}/threads:1/real_time", "flops"),
        ]
    for n in names:
        m = re.match(r"BM_(Softmax|LayerNorm|Conv2d)/(.*)", n)
        if m:
            base = [b for b in names if b.startswith(f"BM_{m.group(1)}_Baseline") and b.endswith("/" + m.group(2))]
            for b in base:
                ratios.append((f"{m.group(1)} {m.group(2).replace('/real_time', '')} kiln time / baseline time", n, b, "time"))

    print()
    print("| ratio (median over runs of the ratio within a run) | value | runs |")
    print("|---|---|---|")
    for label, num, den, metric in ratios:
        values = []
        for r in runs:
            if num in r and den in r:
                if metric == "time":
                    values.append(r[num]["time_ns"] / r[den]["time_ns"])
                elif r[num][metric] and r[den][metric]:
                    values.append(r[num][metric] / r[den][metric])
        if values:
            print(f"| {label} | {statistics.median(values):.2f} | {len(values)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
