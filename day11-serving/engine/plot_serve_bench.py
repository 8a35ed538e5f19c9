#!/usr/bin/env python3
"""Tokens per second against batch size, from serve_bench's CSV and serve_bench_torch.py's.

    python3 day11-serving/engine/plot_serve_bench.py bench/results/serve_bench.csv \
        [bench/results/serve_bench_torch.csv] --out bench/results/serve_bench.png

One panel per model: the engine (CUDA graphs on) and transformers, log-log. Needs matplotlib;
without it the script says so and exits 0 (the CSVs are the result, the plot is a view of them).
"""
import argparse
import csv
import sys


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine_csv")
    ap.add_argument("torch_csv", nargs="?")
    ap.add_argument("--out", default="serve_bench.png")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no plot: matplotlib is not installed)")
        return 0
    eng = [r for r in read(args.engine_csv) if r["workload"] == "batch" and r["graphs"] == "1"]
    hf = [r for r in read(args.torch_csv) if r["workload"] == "batch" and r.get("status") == "ok"] \
        if args.torch_csv else []
    models = sorted({r["model"] for r in eng})
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False)
    for ax, m in zip(axes[0], models):
        for rows, label in ((eng, "course engine"), (hf, "transformers (eager, fp16)")):
            pts = sorted((int(r["batch"]), float(r["tokens_per_s"])) for r in rows if r["model"] == m)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (requests of 512 + 128 tokens)")
        ax.set_ylabel("generated tokens / s")
        ax.set_title(m + (f" · {eng[0]['device']}" if eng else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"(written: {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
