#!/usr/bin/env python3
"""Charts from the bench's CSV (make plot): PNG files next to it, or in --out.

  prefill_staircase.png   TFLOP/s per sequence length, one bar per prefill kernel (naive ->
                          cuBLAS baseline -> simple flash -> tuned flash -> GQA), for each
                          head dim and mask, with the fp32 and fp16 GEMM roofs measured in the
                          same run (log scale, so both roofs fit)
  decode_bandwidth.png    paged decode GB/s per (batch, context) against the copy roof
  basics_bandwidth.png    day 01's memory-bound kernels against the copy roof

Bars are named by exercise id (the CSV's `kernel` column), with the launcher added where one
exercise has several (02_matmul, 04_softmax) and the group size on GQA shapes.

Needs matplotlib (present on the course's GPU machine; pip install matplotlib elsewhere).
"""
import argparse
import csv
import os
import sys
from collections import OrderedDict


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    roofs = {r["kernel"]: r for r in rows if r["impl"] == "roof"}
    data = [r for r in rows if r["impl"] != "roof" and r["median_ms"]]
    launchers = {}
    for r in data:
        launchers.setdefault(r["kernel"], set()).add(r["launcher"])
    for r in data:
        r["label"] = r["kernel"] + (f" ({r['launcher']})" if len(launchers[r["kernel"]]) > 1 else "")
        if r["family"] == "prefill" and r["heads_q"] != r["heads_kv"]:
            r["label"] += f" · GQA-{int(r['heads_q']) // int(r['heads_kv'])}"
    return rows, roofs, data


def roof_value(roofs, name, key):
    r = roofs.get(name)
    return float(r[key]) if r and r.get(key) else None


def staircase(plt, data, roofs, out, device):
    pre = [r for r in data if r["family"] == "prefill"]
    if not pre:
        return None
    kernels = list(OrderedDict.fromkeys(r["label"] for r in pre))
    dims = sorted({int(r["head_dim"]) for r in pre})
    masks = sorted({int(r["causal"]) for r in pre})
    fig, axes = plt.subplots(len(dims), len(masks), figsize=(6.5 * len(masks), 4.2 * len(dims)),
                             squeeze=False)
    sgemm = roof_value(roofs, "roof_sgemm_fp32", "tflops")
    hgemm = roof_value(roofs, "roof_hgemm_fp16", "tflops")
    for i, d in enumerate(dims):
        for j, c in enumerate(masks):
            ax = axes[i][j]
            sub = [r for r in pre if int(r["head_dim"]) == d and int(r["causal"]) == c]
            ns = sorted({int(r["seq_q"]) for r in sub})
            width = 0.8 / max(1, len(kernels))
            for ki, k in enumerate(kernels):
                xs, ys = [], []
                for xi, n in enumerate(ns):
                    hit = [r for r in sub if r["label"] == k and int(r["seq_q"]) == n]
                    if hit:
                        xs.append(xi + (ki - (len(kernels) - 1) / 2) * width)
                        ys.append(float(hit[0]["tflops"]))
                if xs:
                    ax.bar(xs, ys, width, label=k)
            for val, name, style in ((sgemm, "cuBLAS fp32 GEMM", "--"), (hgemm, "cuBLAS fp16 GEMM", ":")):
                if val:
                    ax.axhline(val, color="black", linestyle=style, linewidth=1)
                    ax.text(len(ns) - 0.5, val, f" {name} {val:.0f}", va="bottom", ha="right", fontsize=8)
            ax.set_xticks(range(len(ns)))
            ax.set_xticklabels([str(n) for n in ns])
            ax.set_yscale("log")
            ax.set_xlabel("sequence length N (B·N = 16k tokens)")
            ax.set_ylabel("TFLOP/s")
            ax.set_title(f"D = {d}, {'causal' if c else 'no mask'}")
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"prefill attention, {device}")
    fig.tight_layout()
    path = os.path.join(out, "prefill_staircase.png")
    fig.savefig(path, dpi=120)
    return path


def decode(plt, data, roofs, out, device):
    dec = [r for r in data if r["family"] == "decode"]
    if not dec:
        return None
    copy = roof_value(roofs, "roof_copy", "gbs")
    groups = sorted({(int(r["heads_q"]), int(r["heads_kv"])) for r in dec}, key=lambda g: -g[1])
    kernels = list(OrderedDict.fromkeys(r["label"] for r in dec))
    fig, axes = plt.subplots(1, len(groups), figsize=(6.5 * len(groups), 4.2), squeeze=False)
    for gi, (hq, hkv) in enumerate(groups):
        ax = axes[0][gi]
        sub = [r for r in dec if int(r["heads_q"]) == hq and int(r["heads_kv"]) == hkv]
        keys = sorted({(int(r["batch"]), int(r["context"])) for r in sub})
        width = 0.8 / max(1, len(kernels))
        for ki, k in enumerate(kernels):
            xs, ys = [], []
            for xi, key in enumerate(keys):
                hit = [r for r in sub if r["label"] == k and (int(r["batch"]), int(r["context"])) == key]
                if hit:
                    xs.append(xi + (ki - (len(kernels) - 1) / 2) * width)
                    ys.append(float(hit[0]["gbs"]))
            ax.bar(xs, ys, width, label=k)
        if copy:
            ax.axhline(copy, color="black", linestyle="--", linewidth=1)
            ax.text(len(keys) - 0.5, copy, f" copy roof {copy:.0f} GB/s", va="bottom", ha="right", fontsize=8)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"B{b}\nctx {c // 1024}k" for b, c in keys], fontsize=8)
        ax.set_ylabel("GB/s (Q, K, V read once, O written once)")
        ax.set_title(f"Hq/Hkv = {hq}/{hkv}, D = 128, block 16")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"paged decode bandwidth, {device}")
    fig.tight_layout()
    path = os.path.join(out, "decode_bandwidth.png")
    fig.savefig(path, dpi=120)
    return path


def basics(plt, data, roofs, out, device):
    rows = [r for r in data if r["family"] in ("vector", "reduce", "softmax")]
    if not rows:
        return None
    copy = roof_value(roofs, "roof_copy", "gbs")
    labels = [f"{r['label']}\n{r['shape']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4.2))
    ax.bar(range(len(rows)), [float(r["gbs"]) for r in rows])
    if copy:
        ax.axhline(copy, color="black", linestyle="--", linewidth=1)
        ax.text(len(rows) - 0.5, copy, f" copy roof {copy:.0f} GB/s", va="bottom", ha="right", fontsize=8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("GB/s (inputs read once, outputs written once)")
    ax.set_title(f"day 01 memory-bound kernels, {device}")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, "basics_bandwidth.png")
    fig.savefig(path, dpi=120)
    return path


def main():
    ap = argparse.ArgumentParser(description="charts from the bench CSV")
    ap.add_argument("csv")
    ap.add_argument("--out", default=None, help="folder for the PNGs (default: the CSV's)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is not installed (pip install matplotlib); no charts drawn")
        return 2
    rows, roofs, data = load(args.csv)
    out = args.out or os.path.dirname(os.path.abspath(args.csv))
    os.makedirs(out, exist_ok=True)
    device = next((r["device"].split(" (")[0] for r in rows if r.get("device")), "GPU")
    made = [p for p in (staircase(plt, data, roofs, out, device), decode(plt, data, roofs, out, device),
                        basics(plt, data, roofs, out, device)) if p]
    if not made:
        print(f"plot: {args.csv} holds no timed rows")
        return 1
    for p in made:
        print("plot: wrote", p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
