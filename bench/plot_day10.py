#!/usr/bin/env python3
"""Day 10's charts from one bench run (bench.csv) and, optionally, the PyTorch comparison of the
same device session (the text output of compare_torch_day10.py):

  day10_tensor_cores.png   the staircase fp32 tuned flash -> WMMA -> mma.sync (fp16, bf16) ->
                           PyTorch SDPA flash (FlashAttention-2) and cuDNN, TFLOP/s per N,
                           one panel per head dim and mask
  day10_block_sparse.png   block-sparse speed-up over the dense tuned kernel vs layout density
  day10_decode.png         decode bandwidth vs batch: day 06's paged kernel (fp32) and split-KV
                           (fp16), as % of the copy roof measured in the same run

    python3 bench/plot_day10.py bench/results/bench.csv [--torch-log ct10.log] [--out DIR]
Needs matplotlib.
"""
import argparse
import csv
import os
import re
import sys


def rows_of(path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["median_ms"] or r["impl"] == "roof"]


def torch_tflops(log_path):
    """{(n, d, causal, dtype, backend): TFLOP/s} from compare_torch_day10's prefill16 rows."""
    out = {}
    if not log_path:
        return out
    pat = re.compile(r"^0[45]_\S+\s+b\d+_h\d+_n(\d+)_d(\d+)(_causal)?\s+\S+\s+(flash|cudnn)\s+(fp16|bf16)"
                     r".*theirs\s+([\d.]+)")
    for line in open(log_path):
        m = pat.match(line)
        if m:
            n, d, causal, backend, dtype, tf = m.groups()
            out[(int(n), int(d), bool(causal), dtype, backend)] = float(tf)
    return out


def tensor_cores(plt, rows, theirs, out):
    fam = [r for r in rows if r["family"] in ("prefill_fp16", "prefill_bf16")]
    if not fam:
        return None
    series = [("01_flash_tuned (fp32)", "prefill_fp16", "01_flash_tuned", None),
              ("04_fp16_wmma (fp16)", "prefill_fp16", "04_fp16_wmma", None),
              ("05_fp16_mma (fp16)", "prefill_fp16", "05_fp16_mma", None),
              ("05_fp16_mma (bf16)", "prefill_bf16", "05_fp16_mma", None),
              ("PyTorch flash (fp16)", None, None, ("fp16", "flash")),
              ("PyTorch cuDNN (fp16)", None, None, ("fp16", "cudnn"))]
    if not theirs:
        series = series[:4]
    dims = sorted({int(r["head_dim"]) for r in fam})
    fig, axes = plt.subplots(len(dims), 2, figsize=(13, 4.2 * len(dims)), squeeze=False)
    for i, d in enumerate(dims):
        for j, causal in enumerate((0, 1)):
            ax = axes[i][j]
            ns = sorted({int(r["seq_q"]) for r in fam if int(r["head_dim"]) == d})
            width = 0.8 / len(series)
            for si, (label, family, kernel, torch_key) in enumerate(series):
                ys = []
                for n in ns:
                    if torch_key:
                        ys.append(theirs.get((n, d, bool(causal), *torch_key), 0.0))
                    else:
                        hit = [float(r["tflops"]) for r in fam if r["family"] == family and r["kernel"] == kernel
                               and int(r["head_dim"]) == d and int(r["causal"]) == causal and int(r["seq_q"]) == n]
                        ys.append(hit[0] if hit else 0.0)
                xs = [k + (si - (len(series) - 1) / 2) * width for k in range(len(ns))]
                ax.bar(xs, ys, width, label=label, hatch="//" if torch_key else None)
            ax.set_xticks(range(len(ns)), [str(n) for n in ns])
            ax.set_xlabel("N (B·N = 16k tokens, H·D = 2048)")
            ax.set_ylabel("TFLOP/s")
            ax.set_title(f"D = {d}, {'causal' if causal else 'no mask'}")
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="upper left")
    fig.suptitle("Tensor cores: fp32 tuned flash -> WMMA -> mma.sync -> PyTorch (one device session)")
    fig.tight_layout()
    path = os.path.join(out, "day10_tensor_cores.png")
    fig.savefig(path, dpi=110)
    return path


def block_sparse(plt, rows, out):
    sp = [r for r in rows if r["family"] == "block_sparse"]
    if not sp:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for d in sorted({int(r["head_dim"]) for r in sp}):
        pts = []
        for r in sp:
            if r["kernel"] != "03_block_sparse" or int(r["head_dim"]) != d:
                continue
            dense = [float(x["median_ms"]) for x in sp if x["kernel"] == "01_flash_tuned" and x["shape"] == r["shape"]]
            if dense:
                pts.append((100 * float(r["density"]), dense[0] / float(r["median_ms"])))
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"D = {d}")
        ax.plot([p[0] for p in pts], [100 / p[0] for p in pts], ":", color="gray",
                label="1 / density (ideal)" if d == 64 else None)
    ax.set_xlabel("layout density (% of 64×64 tiles listed), BigBird, N = 8192")
    ax.set_ylabel("speed-up over the dense tuned kernel")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "day10_block_sparse.png")
    fig.savefig(path, dpi=110)
    return path


def decode(plt, rows, out):
    copy = [float(r["gbs"]) for r in rows if r["kernel"] == "roof_copy"]
    series = [("04_paged_attention (fp32)", "decode", "04_paged_attention"),
              ("06_split_kv_decode (fp16)", "decode_fp16", "06_split_kv_decode")]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    drew = False
    for label, family, kernel in series:
        pts = sorted((int(r["batch"]), float(r["pct_copy"])) for r in rows
                     if r["family"] == family and r["kernel"] == kernel and r["context"] == "4096"
                     and r["heads_q"] == "32" and r["heads_kv"] == "8"
                     and r.get("splits", "") in ("", "auto"))  # forced split counts are another chart
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
            drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences), context 4096, Hq/Hkv = 32/8, D = 128")
    ax.set_ylabel("% of copy bandwidth" + (f" ({copy[0]:.0f} GB/s)" if copy else ""))
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "day10_decode.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--torch-log", help="output of compare_torch_day10.py from the same session")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_day10: needs matplotlib (pip install matplotlib)")
        return 2
    out = args.out or os.path.dirname(os.path.abspath(args.csv))
    os.makedirs(out, exist_ok=True)
    rows = rows_of(args.csv)
    for path in (tensor_cores(plt, rows, torch_tflops(args.torch_log), out), block_sparse(plt, rows, out),
                 decode(plt, rows, out)):
        if path:
            print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
