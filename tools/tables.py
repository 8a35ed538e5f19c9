#!/usr/bin/env python3
"""Measurement tables in the lessons and docs come from committed CSVs, so they cannot drift.

    python3 tools/tables.py            # same as --check
    python3 tools/tables.py --check    # exit 1 naming every stale or unknown table block
    python3 tools/tables.py --write    # regenerate every table block (make tables)
    python3 tools/tables.py --list     # the table names and what each shows

In a markdown file a table is a block between two markers; everything between them is
generated, never edited by hand:

    <!-- table: 02_flash_attention -->
    <!-- /table -->

The name picks a definition in TABLES below: which reference CSV (bench/results/reference/,
recorded by bench/record_reference.sh on a real GPU), which rows, which columns. Each table ends
with a line naming the GPU, driver, CUDA, PyTorch and cuDNN versions and the date the CSV's
`# key: value` header records, and links the CSV. A new measurement run is: record the CSVs,
`make tables`, commit both.

Markdown files scanned: the same as tools/snippets.py (README.md and README.zh.md, day*/**/*.md, docs/**/*.md).
"""
import argparse
import csv
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
REFERENCE = "bench/results/reference"
BEGIN = re.compile(r"^<!--\s*table:\s*(\S+)\s*-->\s*$")
END = re.compile(r"^<!--\s*/table\s*-->\s*$")


# ------------------------------------------------------------------ reading the CSVs
def load(name, _cache={}):
    """(metadata dict, rows) of bench/results/reference/<name>.csv."""
    if name not in _cache:
        path = ROOT / REFERENCE / f"{name}.csv"
        meta, lines = {}, []
        for line in path.read_text().splitlines():
            m = re.match(r"^#\s*([\w-]+):\s*(.*)$", line)
            if m:
                meta[m.group(1)] = m.group(2).strip()
            elif line.strip():
                lines.append(line)
        _cache[name] = (meta, list(csv.DictReader(lines)))
    return _cache[name]


def matches(row, where):
    for col, want in where.items():
        have = row.get(col, "")
        if callable(want):
            if not want(row):
                return False
        elif isinstance(want, (set, frozenset, list, tuple)):
            if have not in {str(w) for w in want}:
                return False
        elif have != str(want):
            return False
    return True


# ------------------------------------------------------------------ formatting
def f0(x): return f"{float(x):.0f}"
def f1(x): return f"{float(x):.1f}"
def f2(x): return f"{float(x):.2f}"
def f3(x): return f"{float(x):.3f}"
def ms(x):
    v = float(x)
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"
def pct(x): return f"{float(x):.0f} %"
def ratio(x): return f"{float(x):.2f}×"


def col(name):
    return lambda r: r.get(name, "")


def size(n):
    n = int(n)
    for unit, div in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return str(n)


def causal(r):
    return "yes" if r.get("causal") == "1" else "no"


def gqa(r):
    return f"{r['heads_q']}/{r['heads_kv']}"


def torch_dims(r):
    """b8_h32_kv8_n2048_d64 (a torch CSV shape) -> its parts."""
    return dict(re.findall(r"([a-z]+)(\d+)", r["shape"]))


class Table:
    """Rows: distinct `keys` tuples of the rows that pass `where`, in CSV order. Columns: the
    keys, then one per series (header, extra filter, value column, formatter), then `derived`
    columns computed from the series' raw values."""

    def __init__(self, what, src, where, keys, series, derived=(), note=""):
        self.what, self.src, self.where = what, src, where
        self.keys, self.series, self.derived, self.note = keys, series, derived, note

    def render(self, page):
        meta, rows = load(self.src)
        rows = [r for r in rows if matches(r, self.where)]
        order, cells = [], {}
        for r in rows:
            for i, (_, filt, value, _) in enumerate(self.series):
                if not matches(r, filt) or r.get(value, "") in ("", "nan"):
                    continue
                key = tuple(k(r) for _, k in self.keys)
                if key not in cells:
                    order.append(key)
                    cells[key] = {}
                cells[key].setdefault(i, r[value])
        if not order:
            raise ValueError(f"no rows in {self.src}.csv match")
        head = [h for h, _ in self.keys] + [s[0] for s in self.series] + [h for h, _ in self.derived]
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i < len(self.keys) else "---:"
                                                             for i in range(len(head))) + "|"]
        for key in order:
            vals = cells[key]
            line = list(key) + [fmt(vals[i]) if i in vals else "–" for i, (_, _, _, fmt) in enumerate(self.series)]
            for _, fn in self.derived:
                try:
                    line.append(fn([float(vals[i]) if i in vals else None for i in range(len(self.series))]))
                except (TypeError, ZeroDivisionError):
                    line.append("–")
            out.append("| " + " | ".join(line) + " |")
        out.append("")
        out.append(source_line(self.src, meta, page) + (f" {self.note}" if self.note else ""))
        return out


def source_line(src, meta, page):
    link = os.path.relpath(ROOT / REFERENCE / f"{src}.csv", page.parent)
    parts = [meta.get("gpu", "?"), f"driver {meta.get('driver', '?')}", f"CUDA {meta.get('cuda', '?')}"]
    if meta.get("pytorch", "none") != "none":
        parts.append(f"PyTorch {meta['pytorch']}")
        if "cudnn" in meta:
            parts.append(f"cuDNN {meta['cudnn']}")
    if "transformers" in meta:
        parts.append(f"transformers {meta['transformers']}")
    if "nccl" in meta:
        parts.append(f"NCCL {meta['nccl']}")
    return f"<sub>{', '.join(parts)}; recorded {meta.get('date', '?')} ([{src}.csv]({link})).</sub>"


def shape_nd(r):
    return f"N = {r['seq_q']}, D = {r['head_dim']}"


MHA = {"heads_kv": lambda r: r.get("heads_kv") == r.get("heads_q")}
GQA4 = {"heads_kv": lambda r: r.get("heads_kv") and int(r["heads_q"]) == 4 * int(r["heads_kv"])}
TF = ("TFLOP/s", "tflops")


def speedup(a, b):
    return lambda v: f"{v[a] / v[b]:.1f}×"


def series(kernel, header, value="tflops", fmt=f1, **extra):
    return (header, dict(kernel=kernel, **extra), value, fmt)


# ------------------------------------------------------------------ the tables
TABLES = {
    # day 01
    "01_vector_add": Table("vector add: bandwidth against the copy roof", "h100", dict(family="vector"),
                           [("elements", lambda r: size(r["n"]))],
                           [("ms", {}, "median_ms", ms), ("GB/s", {}, "gbs", f0), ("% of copy", {}, "pct_copy", pct)]),
    "02_matmul": Table("naive vs tiled C = A·Bᵀ, fp32", "h100", dict(family="matmul"),
                       [("M = N = K", col("m"))],
                       [("naive TFLOP/s", dict(launcher="matmul_naive"), "tflops", f2),
                        ("tiled TFLOP/s", dict(launcher="matmul_tiled"), "tflops", f2),
                        ("tiled, % of cuBLAS fp32", dict(launcher="matmul_tiled"), "pct_sgemm", pct)],
                       [("tiled / naive", speedup(1, 0))]),
    "03_reduction": Table("row max + row sum: bandwidth", "h100", dict(family="reduce"),
                          [("rows × cols", lambda r: f"{r['rows']} × {r['cols']}")],
                          [("ms", {}, "median_ms", ms), ("GB/s", {}, "gbs", f0), ("% of copy", {}, "pct_copy", pct)]),
    "04_softmax": Table("safe (three passes) vs online (two passes) softmax", "h100", dict(family="softmax"),
                        [("rows × cols", lambda r: f"{r['rows']} × {r['cols']}")],
                        [("safe GB/s", dict(launcher="softmax_safe"), "gbs", f0),
                         ("online GB/s", dict(launcher="softmax_online"), "gbs", f0),
                         ("safe ms", dict(launcher="softmax_safe"), "median_ms", ms),
                         ("online ms", dict(launcher="softmax_online"), "median_ms", ms)]),
    "05_streams": Table("host → GPU → host in chunks", "h100", dict(family="streams"),
                        [("elements, chunks, streams", lambda r: f"{size(r['n'])}, {r['chunks']}, {r['streams']}"),
                         ("host memory; streams", lambda r: r["launcher"].split("(")[1].rstrip(")"))],
                        [("ms", {}, "median_ms", ms), ("GB/s over PCIe", {}, "gbs", f1)]),
    # day 06
    "01_naive_attention": Table("naive attention vs the cuBLAS baseline, fp32, MHA, D = 64", "h100",
                                dict(family="prefill", head_dim="64", causal="0", **MHA),
                                [("N", col("seq_q")), ("batch", col("batch"))],
                                [series("01_naive_attention", "naive ms", "median_ms", ms),
                                 series("01_naive_attention", "naive TFLOP/s"),
                                 series("baseline", "cuBLAS + softmax TFLOP/s")],
                                note="Rows at N = 8192 are skipped by default (gigabytes of N×N scratch)."),
    "02_flash_attention": Table("simple flash vs naive and cuBLAS, fp32, MHA, not causal", "h100",
                                dict(family="prefill", causal="0", **MHA),
                                [("N", col("seq_q")), ("D", col("head_dim"))],
                                [series("01_naive_attention", "naive TFLOP/s"),
                                 series("baseline", "cuBLAS TFLOP/s"),
                                 series("02_flash_attention", "flash (02) TFLOP/s"),
                                 series("02_flash_attention", "flash, % of cuBLAS fp32", "pct_sgemm", pct)]),
    "03_gqa_attention": Table("GQA (Hq/Hkv = 4) vs the simple kernel on MHA, fp32, not causal", "h100",
                              dict(family="prefill", causal="0"),
                              [("N", col("seq_q")), ("D", col("head_dim"))],
                              [series("02_flash_attention", "02 on MHA TFLOP/s", **MHA),
                               series("03_gqa_attention", "03 on GQA TFLOP/s", **GQA4),
                               series("03_gqa_attention", "03 ms", "median_ms", ms, **GQA4)]),
    "04_paged_attention": Table("paged decode, fp32, D = 128, block 16", "h100", dict(family="decode"),
                                [("batch", col("batch")), ("context", col("context")), ("Hq/Hkv", gqa)],
                                [("ms", {}, "median_ms", ms), ("GB/s", {}, "gbs", f0), ("% of copy", {}, "pct_copy", pct)]),
    "05_flash_backward": Table("flash backward, fp32", "h100", dict(family="backward_fp32", causal="0"),
                               [("N", col("seq_q")), ("D", col("head_dim")), ("Hq/Hkv", gqa)],
                               [("ms", {}, "median_ms", ms), ("TFLOP/s", {}, "tflops", f1),
                                ("% of cuBLAS fp32", {}, "pct_sgemm", pct)]),
    # day 10
    "01_flash_tuned": Table("the fp32 staircase: simple (02) → tuned (01), MHA, not causal", "h100",
                            dict(family="prefill", causal="0", seq_q={"1024", "4096", "8192"}, **MHA),
                            [("N", col("seq_q")), ("D", col("head_dim"))],
                            [series("02_flash_attention", "02 simple TFLOP/s"),
                             series("01_flash_tuned", "01 tuned TFLOP/s"),
                             series("01_flash_tuned", "tuned, % of cuBLAS fp32", "pct_sgemm", pct),
                             series("baseline", "cuBLAS TFLOP/s")],
                            [("tuned / simple", speedup(1, 0))]),
    "02_sliding_window": Table("sliding window vs the tuned dense causal kernel, fp32", "h100",
                               dict(family="sliding_window"),
                               [("N", col("seq_q")), ("D", col("head_dim")), ("w", col("window"))],
                               [series("01_flash_tuned", "dense causal ms", "median_ms", ms),
                                series("02_sliding_window", "window ms", "median_ms", ms)],
                               [("speed-up", speedup(0, 1))]),
    "03_block_sparse": Table("BigBird block-sparse vs the tuned dense kernel, fp32, N = 8192", "h100",
                             dict(family="block_sparse"),
                             [("random blocks per row", col("random_per_row")), ("D", col("head_dim")),
                              ("density", lambda r: f"{100 * float(r['density']):.1f} %")],
                             [series("01_flash_tuned", "dense ms", "median_ms", ms),
                              series("03_block_sparse", "sparse ms", "median_ms", ms)],
                             [("speed-up", speedup(0, 1))]),
    "04_fp16_wmma": Table("fp16 on tensor cores (WMMA) vs the tuned fp32 kernel, MHA, not causal", "h100",
                          dict(family="prefill_fp16", causal="0", **MHA),
                          [("N", col("seq_q")), ("D", col("head_dim"))],
                          [series("01_flash_tuned", "01 fp32 TFLOP/s"),
                           series("04_fp16_wmma", "04 WMMA TFLOP/s"),
                           series("04_fp16_wmma", "WMMA, % of fp16 cuBLAS", "pct_hgemm", pct)]),
    "05_fp16_mma": Table("mma.sync + ldmatrix (05) vs WMMA (04), MHA, not causal", "h100",
                         dict(family={"prefill_fp16", "prefill_bf16"}, causal="0", **MHA),
                         [("N", col("seq_q")), ("D", col("head_dim"))],
                         [series("04_fp16_wmma", "04 fp16 TFLOP/s", family="prefill_fp16"),
                          series("05_fp16_mma", "05 fp16 TFLOP/s", family="prefill_fp16"),
                          series("05_fp16_mma", "05 bf16 TFLOP/s", family="prefill_bf16"),
                          series("05_fp16_mma", "05 fp16, % of cuBLAS", "pct_hgemm", pct, family="prefill_fp16")]),
    "06_split_kv_decode": Table("split-KV decode over the paged fp16 cache, Hq/Hkv = 32/8, D = 128",
                                "h100", dict(family="decode_fp16"),
                                [("batch", col("batch")), ("context", col("context"))],
                                [("µs", {}, "median_ms", lambda x: f"{1000 * float(x):.0f}"),
                                 ("GB/s", {}, "gbs", f0), ("% of copy", {}, "pct_copy", pct)]),
    "07_rope_yarn": Table("RoPE (YaRN where marked) on Q and K, out of place", "h100", dict(family="rope"),
                          [("batch", col("batch")), ("tokens", col("seq_q")), ("Hq/Hkv", gqa), ("D", col("head_dim")),
                           ("layout", col("layout")), ("dtype", col("dtype")),
                           ("YaRN", lambda r: "yes" if "_yarn" in r["shape"] else "no")],
                          [("µs", {}, "median_ms", lambda x: f"{1000 * float(x):.0f}"),
                           ("GB/s", {}, "gbs", f0), ("% of copy", {}, "pct_copy", pct)]),
    "08_kv_compress": Table("compressing a 32k cache to 4k vs decoding over it", "h100", dict(family="kv_compress"),
                            [("what", lambda r: "compress 32k → 4k (08)" if r["kernel"] == "08_kv_compress"
                              else f"one decode step over {size(r['context'])} tokens (06)")],
                            [("µs", {}, "median_ms", lambda x: f"{1000 * float(x):.0f}")]),
    "09_fp16_mma_backward": Table("fp16/bf16 backward on mma.sync (09) vs the fp32 backward (05), not causal", "h100",
                                  dict(family={"backward_fp16", "backward_fp32"}, causal="0", **MHA),
                                  [("N", col("seq_q")), ("D", col("head_dim"))],
                                  [("05 fp32 TFLOP/s", dict(kernel="05_flash_backward"), "tflops", f1),
                                   ("09 fp16 TFLOP/s", dict(kernel="09_fp16_mma_backward", dtype="fp16"), "tflops", f0),
                                   ("09 bf16 TFLOP/s", dict(kernel="09_fp16_mma_backward", dtype="bf16"), "tflops", f0),
                                   ("09 fp16, % of cuBLAS fp16", dict(kernel="09_fp16_mma_backward", dtype="fp16"),
                                    "pct_hgemm", pct)]),
    "10_hopper_wgmma": Table("the Hopper staircase, fp16, MHA, not causal", "h100",
                             dict(family="prefill_fp16", causal="0", **MHA),
                             [("N", col("seq_q")), ("D", col("head_dim"))],
                             [series("05_fp16_mma", "05 mma.sync"),
                              ("serial", dict(launcher="flash_attention_wgmma_step(kSerial)"), "tflops", f0),
                              ("2 stages", dict(launcher="flash_attention_wgmma_step(kTwoStages)"), "tflops", f0),
                              ("overlapped", dict(launcher="flash_attention_wgmma_step(kOverlapped)"), "tflops", f0),
                              ("ping-pong", dict(launcher="flash_attention_wgmma"), "tflops", f0)],
                             note="TFLOP/s; ping-pong is what `flash_attention_wgmma` runs."),
    "11_hopper_backward": Table("the Hopper backward's staircase, fp16, MHA", "h100",
                                dict(family="backward_fp16", dtype="fp16", **MHA),
                                [("N", col("seq_q")), ("D", col("head_dim")), ("causal", causal)],
                                [("09 mma.sync", dict(kernel="09_fp16_mma_backward"), "tflops", f0),
                                 ("serial", dict(launcher="flash_attention_wgmma_backward_step(kSerial)"), "tflops", f0),
                                 ("2 stages", dict(launcher="flash_attention_wgmma_backward_step(kTwoStages)"), "tflops",
                                  f0),
                                 ("dQ reduce", dict(launcher="flash_attention_wgmma_backward"), "tflops", f0),
                                 ("deterministic", dict(launcher="flash_attention_wgmma_backward(deterministic)"),
                                  "tflops", f0)],
                                note="TFLOP/s (2.5 × 4·B·H·N²·D, halved when causal); dQ reduce is what "
                                "`flash_attention_wgmma_backward` runs."),
    "12_ring_attention": Table("ring attention, causal, fp16, B = 1, H = 16, D = 128: time on 1, 2 and 4 H100s",
                               "h100x4-ring", dict(kernel="12_ring_attention"),
                               [("N", col("seq_q")), ("split", col("split"))],
                               [("1 GPU ms", dict(ranks="1"), "median_ms", f0), ("2 GPUs ms", dict(ranks="2"), "median_ms", f0),
                                ("4 GPUs ms", dict(ranks="4"), "median_ms", f0),
                                ("2 GPUs, % of ideal", dict(ranks="2"), "pct_ideal", pct),
                                ("4 GPUs, % of ideal", dict(ranks="4"), "pct_ideal", pct)],
                               note="% of ideal = speed-up over 1 GPU / number of GPUs; the naive split's rows use the "
                                    "zigzag 1-GPU time (the same computation)."),
}


def torch_table(what, script, kernels, backends, dtype, keys=None):
    keys = keys or [("shape", lambda r: r["shape"])]
    return Table(what, "h100-torch", dict(script=script, kernel=kernels, dtype=dtype), keys,
                 [(f"{b} ms", dict(backend=b), "theirs_ms", ms) for b in backends] + [("ours ms", {}, "ours_ms", ms)],
                 [(f"{b} / ours", (lambda i: lambda v: f"{v[i] / v[-1]:.2f}×")(i)) for i, b in enumerate(backends)])


def torch_shape(r):
    d = torch_dims(r)
    return f"B={d.get('b')}, H={d.get('h')}" + (f"/{d['kv']}" if "kv" in d else "") + \
        f", N={d.get('n')}, D={d.get('d')}" + (", causal" if "causal" in r["shape"] else "")


# docs/performance.md: the whole of each family, and the PyTorch comparisons.
def family_table(family, what, keys, kernels, value="tflops", fmt=f1):
    return Table(what, "h100", dict(family=family), keys,
                 [(h, f, value, fmt) for h, f in kernels])


PREFILL_KEYS = [("N", col("seq_q")), ("D", col("head_dim")), ("Hq/Hkv", gqa), ("causal", causal)]
TABLES.update({
    "perf_roofs": Table("the roofs measured in the same run", "h100", dict(family="roof"),
                        [("roof", lambda r: {"roof_copy": "device-to-device copy (GB/s, read + write)",
                                             "roof_sgemm_fp32": "cuBLAS SGEMM fp32, no TF32 (TFLOP/s)",
                                             "roof_hgemm_fp16": "cuBLAS HGEMM fp16, fp32 accumulate (TFLOP/s)"}[r["kernel"]])],
                        [("value", {"kernel": "roof_copy"}, "gbs", f0), ("value", {}, "tflops", f1)]),
    "perf_prefill": family_table("prefill", "prefill fp32, TFLOP/s", PREFILL_KEYS,
                                 [("naive", dict(kernel="01_naive_attention")), ("cuBLAS", dict(kernel="baseline")),
                                  ("02 simple", dict(kernel="02_flash_attention")), ("01 tuned", dict(kernel="01_flash_tuned")),
                                  ("03 GQA", dict(kernel="03_gqa_attention"))]),
    "perf_prefill_fp16": family_table("prefill_fp16", "prefill fp16, TFLOP/s", PREFILL_KEYS,
                                      [("01 fp32", dict(kernel="01_flash_tuned")), ("04 WMMA", dict(kernel="04_fp16_wmma")),
                                       ("05 mma.sync", dict(kernel="05_fp16_mma")),
                                       ("10 serial", dict(launcher="flash_attention_wgmma_step(kSerial)")),
                                       ("10 2 stages", dict(launcher="flash_attention_wgmma_step(kTwoStages)")),
                                       ("10 overlapped", dict(launcher="flash_attention_wgmma_step(kOverlapped)")),
                                       ("10 ping-pong", dict(launcher="flash_attention_wgmma"))]),
    "perf_prefill_bf16": family_table("prefill_bf16", "prefill bf16, TFLOP/s", PREFILL_KEYS,
                                      [("05 mma.sync", dict(kernel="05_fp16_mma")),
                                       ("10 serial", dict(launcher="flash_attention_wgmma_step(kSerial)")),
                                       ("10 2 stages", dict(launcher="flash_attention_wgmma_step(kTwoStages)")),
                                       ("10 overlapped", dict(launcher="flash_attention_wgmma_step(kOverlapped)")),
                                       ("10 ping-pong", dict(launcher="flash_attention_wgmma"))]),
    "perf_decode": Table("paged decode fp32 (04)", "h100", dict(family="decode"),
                         [("batch", col("batch")), ("context", col("context")), ("Hq/Hkv", gqa)],
                         [("GB/s", {}, "gbs", f0), ("% of copy", {}, "pct_copy", pct)]),
    "perf_decode_fp16": family_table("decode_fp16", "split-KV decode fp16 (06), GB/s",
                                     [("batch", col("batch")), ("context", col("context")), ("Hq/Hkv", gqa)],
                                     [("GB/s", {})], value="gbs", fmt=f0),
    "perf_backward": Table("backward, TFLOP/s", "h100", dict(family={"backward_fp32", "backward_fp16"}),
                           PREFILL_KEYS + [("dtype", lambda r: r.get("dtype") or "fp32")],
                           [("05 fp32", dict(kernel="05_flash_backward"), "tflops", f1),
                            ("09 mma.sync", dict(kernel="09_fp16_mma_backward"), "tflops", f1),
                            ("11 wgmma", dict(launcher="flash_attention_wgmma_backward"), "tflops", f1)]),
    "perf_sparse": Table("sliding window and block-sparse vs dense, ms", "h100",
                         dict(family={"sliding_window", "block_sparse", "ring_decode"}),
                         [("family", col("family")), ("shape", col("shape"))],
                         [("dense 01 ms", dict(kernel="01_flash_tuned"), "median_ms", ms),
                          ("02 / 03 ms", dict(kernel={"02_sliding_window", "03_block_sparse"}), "median_ms", ms),
                          ("GB/s", dict(kernel={"02_sliding_window"}), "gbs", f0)]),
    "perf_basics": Table("day 01 kernels", "h100", dict(family={"vector", "matmul", "reduce", "softmax", "streams"}),
                         [("kernel", col("launcher")), ("shape", col("shape"))],
                         [("ms", {}, "median_ms", ms), ("GB/s", {}, "gbs", f0), ("TFLOP/s", dict(family="matmul"), "tflops", f2)]),
    "perf_rope_compress": Table("RoPE (07) and KV compression (08)", "h100", dict(family={"rope", "kv_compress"}),
                                [("kernel", col("kernel")), ("shape", col("shape"))],
                                [("µs", {}, "median_ms", lambda x: f"{1000 * float(x):.0f}"), ("GB/s", {}, "gbs", f0)]),
    "perf_torch_fp32": torch_table("fp32 prefill vs SDPA (inputs in fp32)", "compare_torch",
                                   {"02_flash_attention", "01_flash_tuned", "03_gqa_attention"}, ["efficient", "math"], "fp32",
                                   [("ours", col("kernel")), ("shape", torch_shape)]),
    "perf_torch_decode": torch_table("paged decode vs gather + SDPA", "compare_torch", {"04_paged_attention"},
                                     ["gather+sdpa"], {"fp32", "fp16"},
                                     [("shape", lambda r: r["shape"]), ("dtype", col("dtype"))]),
    "perf_torch_fp16": torch_table("16-bit prefill vs SDPA's flash and cuDNN backends", "compare_torch_day10",
                                   {"04_fp16_wmma", "05_fp16_mma", "10_hopper_wgmma"}, ["flash", "cudnn"], {"fp16", "bf16"},
                                   [("ours", col("kernel")), ("shape", torch_shape), ("dtype", col("dtype"))]),
    "11_vs_sdpa": torch_table("the Hopper backward (11) vs SDPA's flash and cuDNN backward", "compare_torch_backward",
                              {"11_hopper_backward"}, ["flash", "cudnn"], {"fp16", "bf16"},
                              [("shape", torch_shape), ("dtype", col("dtype"))]),
    "perf_torch_backward": torch_table("backward vs SDPA's backward backends", "compare_torch_backward",
                                       {"09_fp16_mma_backward", "11_hopper_backward", "05_flash_backward"},
                                       ["flash", "efficient", "cudnn"],
                                       {"fp16", "bf16", "fp32"},
                                       [("ours", col("kernel")), ("shape", torch_shape), ("dtype", col("dtype"))]),
})
TABLES.update({
    "perf_ring": Table("ring attention over NCCL", "h100x4-ring", dict(family="ring"),
                       [("row", lambda r: r["shape"]), ("GPUs", col("ranks"))],
                       [("ms", {"kernel": "12_ring_attention"}, "median_ms", ms),
                        ("TFLOP/s (all GPUs)", {"kernel": "12_ring_attention"}, "tflops", f0),
                        ("% of ideal", {"kernel": "12_ring_attention"}, "pct_ideal", pct),
                        ("compute alone ms", {"kernel": "12_ring_attention"}, "compute_ms", ms),
                        ("transfers alone ms", {"kernel": "12_ring_attention"}, "comm_ms", ms),
                        ("work imbalance", {"kernel": "12_ring_attention"}, "imbalance", f2),
                        ("NCCL send/recv GB/s", {"kernel": "roof_nccl"}, "gbs", f0)]),
})


# README's "What you will see": one line per stage, (label, CSV, row filter, column, format, remark).
P4096 = dict(seq_q="4096", head_dim="64", causal="0", **MHA)
P4096_128 = dict(seq_q="4096", head_dim="128", causal="0", **MHA)
SUMMARY = [
    ("naive attention (day 06 · 01), fp32", "h100", dict(family="prefill", kernel="01_naive_attention", **P4096),
     "tflops", "{:.2f} TFLOP/s", "the N×N score matrix goes through HBM"),
    ("cuBLAS GEMM → softmax → GEMM, fp32", "h100", dict(family="prefill", kernel="baseline", **P4096),
     "tflops", "{:.1f} TFLOP/s", "what you would write without this course"),
    ("simple flash attention (day 06 · 02), fp32", "h100", dict(family="prefill", kernel="02_flash_attention", **P4096),
     "tflops", "{:.1f} TFLOP/s", "the algorithm alone: S never leaves the chip"),
    ("tuned flash (day 10 · 01), fp32", "h100", dict(family="prefill", kernel="01_flash_tuned", **P4096),
     "pct_sgemm", "{:.0f} % of fp32 cuBLAS", "register tiling, padded smem, cp.async"),
    ("WMMA tensor cores (day 10 · 04), fp16", "h100", dict(family="prefill_fp16", kernel="04_fp16_wmma", **P4096),
     "tflops", "{:.0f} TFLOP/s", "first contact with tensor cores"),
    ("FlashAttention-2 on mma.sync (day 10 · 05), fp16", "h100", dict(family="prefill_fp16", kernel="05_fp16_mma", **P4096),
     "tflops", "{:.0f} TFLOP/s", "S and P in registers, swizzled smem"),
    ("FlashAttention-3 style on wgmma (day 10 · 10), fp16, D = 128", "h100",
     dict(family="prefill_fp16", launcher="flash_attention_wgmma", **P4096_128),
     "tflops", "{:.0f} TFLOP/s", "TMA, mbarriers, warp specialization (H100/H200)"),
    ("backward on mma.sync (day 10 · 09), fp16, D = 128", "h100",
     dict(family="backward_fp16", kernel="09_fp16_mma_backward", seq_q="4096", head_dim="128", causal="0", dtype="fp16"),
     "tflops", "{:.0f} TFLOP/s", "dQ, dK, dV from the saved log-sum-exp"),
    ("FlashAttention-3 style backward on wgmma (day 10 · 11), fp16, D = 128", "h100",
     dict(family="backward_fp16", launcher="flash_attention_wgmma_backward", seq_q="4096", head_dim="128", causal="0",
          dtype="fp16"),
     "tflops", "{:.0f} TFLOP/s", "five wgmma products per step, dQ by the copy engine (H100/H200)"),
    ("paged decode (day 06 · 04), B = 64, 32/8 heads, 16k context", "h100",
     dict(family="decode", batch="64", context="16384", heads_kv="8"),
     "pct_copy", "{:.0f} % of copy bandwidth", "decode is memory-bound: bytes are the budget"),
    ("split-KV decode (day 10 · 06), B = 1, 128k context, fp16", "h100", dict(family="decode_fp16", context="131072"),
     "pct_copy", "{:.0f} % of copy bandwidth", "one sequence still fills every SM"),
    ("RoPE with YaRN (day 10 · 07), 32k tokens, fp16", "h100",
     dict(family="rope", seq_q="32768", dtype="fp16", layout="neox"),
     "pct_copy", "{:.0f} % of copy bandwidth", "Q and K read and written once"),
    ("fused residual add + RMSNorm (day 11 · 03), 16k tokens × 4096, fp16", "h100-rmsnorm",
     dict(family="rmsnorm", kernel="03_fused_add_rmsnorm", rows="16384", cols="4096"),
     "pct_copy", "{:.0f} % of copy bandwidth", "one pass over the residual stream"),
    ("serving a Llama-3-8B-shaped model (day 11), batch 32", "h100-serve",
     dict(model="llama3_8b", workload="batch", batch="32", graphs="1"),
     "tokens_per_s", "{:.0f} tokens/s", "your kernels in an engine: paged KV cache, continuous batching"),
]


class Summary:
    what = "README: one line per stage of the course"

    def render(self, page):
        out = ["| stage | on an H100 | what it shows |", "|---|---:|---|"]
        for label, src, where, value, fmt, remark in SUMMARY:
            _, rows = load(src)
            hit = [r for r in rows if matches(r, where) and r.get(value)]
            if not hit:
                raise ValueError(f"summary row {label!r}: no row matches")
            out.append(f"| {label} | {fmt.format(float(hit[0][value]))} | {remark} |")
        out.append("")
        out.append(source_line(SUMMARY[0][1], load(SUMMARY[0][1])[0], page) +
                   " Prefill rows: B·N = 16k tokens, N = 4096, D = 64 unless stated, not causal.")
        return out


TABLES["summary"] = Summary()


# Day 11: the serving engine's workloads (serve_bench) and transformers on the same shapes.
SERVE_MODELS = {"smollm2_135m": "SmolLM2-135M", "llama3_8b": "Llama-3-8B"}


def serve_label(r):
    return "long context, 32k" if r["workload"] == "long" else f"B = {r['batch']}"


class ServeTable:
    """Rows of h100-serve.csv (CUDA graphs on), with transformers' tokens/s of the same model,
    workload and batch from h100-serve-torch.csv beside them when `torch` is set."""

    def __init__(self, what, columns, torch=False, where=None):
        self.what, self.columns, self.torch, self.where = what, columns, torch, where or {}

    def render(self, page):
        meta, rows = load("h100-serve")
        _, trows = load("h100-serve-torch")
        theirs = {(r["model"], r["workload"], r["batch"]): r for r in trows}
        head = ["model", "workload"] + [h for h, _ in self.columns]
        if self.torch:
            head += ["transformers tok/s", "ours / transformers"]
        out = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
        for r in rows:
            if r["graphs"] != "1" or not matches(r, self.where):
                continue
            line = [SERVE_MODELS.get(r["model"], r["model"]), serve_label(r)] + [fn(r) for _, fn in self.columns]
            if self.torch:
                t = theirs.get((r["model"], r["workload"], r["batch"]))
                ok = t is not None and t["status"] == "ok"
                line += [f1(t["tokens_per_s"]) if ok else (t["status"] if t else "–"),
                         f"{float(r['tokens_per_s']) / float(t['tokens_per_s']):.1f}×" if ok else "–"]
            out.append("| " + " | ".join(line) + " |")
        out.append("")
        out.append(source_line("h100-serve", meta, page) +
                   " <sub>Prompt 512 tokens, 128 new tokens per request, greedy, random weights at each model's "
                   "shapes, fp16; the engine with CUDA graphs on; floor = (weights + KV bytes a decode step reads) "
                   "/ the copy roof measured in the same run.</sub>")
        if self.torch:
            out.append("")
            out.append(source_line("h100-serve-torch", load("h100-serve-torch")[0], page) +
                       " <sub>transformers: eager `generate` with its dense cache, fp16, the same shapes.</sub>")
        return out


SERVE_TPOT = [("TPOT p50 ms", lambda r: f3(r["tpot_ms_p50"])),
              ("floor ms", lambda r: f3(r["tpot_floor_ms"])),
              ("step / floor", lambda r: f"{float(r['decode_step_ms']) / float(r['tpot_floor_ms']):.2f}×"),
              ("tok/s", lambda r: f0(r["tokens_per_s"]))]
TABLES.update({
    "serve_summary": ServeTable("day 11: the engine against the bandwidth floor and transformers", SERVE_TPOT, torch=True),
    "perf_serve": ServeTable("day 11: every serve_bench workload",
                             [("TTFT p50 ms", lambda r: ms(r["ttft_ms_p50"])),
                              ("TPOT p50 / p99 ms", lambda r: f"{f3(r['tpot_ms_p50'])} / {f2(r['tpot_ms_p99'])}"),
                              ("tok/s", lambda r: f0(r["tokens_per_s"])),
                              ("decode GB/s", lambda r: f0(r["decode_gbs"])),
                              ("step / floor", lambda r: f"{float(r['decode_step_ms']) / float(r['tpot_floor_ms']):.2f}×"),
                              ("KV MiB (dense)", lambda r: f"{f0(r['kv_mib'])} ({f0(r['dense_kv_mib'])})"),
                              ("attention / GEMMs / rest ms", lambda r: f"{f2(r['attention_ms'])} / {f2(r['gemm_ms'])} / "
                                                                      f"{f2(r['other_ms'])}")]),
    "03_fused_add_rmsnorm": Table("fused residual add + RMSNorm (03) vs the unfused pair (residual add, then rmsnorm)",
                                  "h100-rmsnorm", dict(family="rmsnorm"),
                                  [("tokens", col("rows")), ("hidden", col("cols")), ("dtype", col("dtype"))],
                                  [series("03_fused_add_rmsnorm", "fused µs", "median_ms", lambda x: f"{1000 * float(x):.1f}"),
                                   series("03_fused_add_rmsnorm", "% of copy", "pct_copy", pct),
                                   series("baseline", "unfused µs", "median_ms", lambda x: f"{1000 * float(x):.1f}")],
                                  derived=[("unfused / fused", speedup(2, 0))]),
})


# ------------------------------------------------------------------ the markdown side
def markdown_files(root=ROOT):
    files = {p for p in (root / "README.md", root / "README.zh.md") if p.exists()}
    files.update(root.glob("day*/**/*.md"))
    files.update(root.glob("docs/**/*.md"))
    return sorted(files)


def refresh(path):
    """(new text, [problems]) for one markdown file."""
    lines, out, problems, i = path.read_text().splitlines(), [], [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        end = next((j for j in range(i, len(lines)) if END.match(lines[j])), None)
        if end is None:
            problems.append(f"{path.relative_to(ROOT)}:{i}: table {m.group(1)!r} has no `<!-- /table -->` after it")
            continue
        table = TABLES.get(m.group(1))
        if table is None:
            problems.append(f"{path.relative_to(ROOT)}:{i}: no table named {m.group(1)!r} (tools/tables.py --list)")
            out.extend(lines[i:end])
        else:
            try:
                out.extend(table.render(path))
            except (ValueError, KeyError, OSError) as e:
                problems.append(f"{path.relative_to(ROOT)}:{i}: table {m.group(1)!r}: {e}")
                out.extend(lines[i:end])
        i = end
    return "\n".join(out) + "\n", problems


def run(root=ROOT, write=False):
    """(problems, number of table blocks, stale files)."""
    problems, count, stale = [], 0, []
    for path in markdown_files(root):
        text = path.read_text()
        if "<!-- table:" not in text:
            continue
        count += sum(1 for l in text.splitlines() if BEGIN.match(l))
        new, probs = refresh(path)
        problems += probs
        if new != text:
            stale.append(path)
            if write:
                path.write_text(new)
    return problems, count, stale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for name, t in TABLES.items():
            print(f"{name:22s} {t.what}")
        return 0
    problems, count, stale = run(write=args.write)
    for p in problems:
        print(p)
    if not args.write:
        for s in stale:
            print(f"{s.relative_to(ROOT)}: a table block differs from its CSV: run `make tables`")
    else:
        for s in stale:
            print(f"tables: rewrote {s.relative_to(ROOT)}")
    if problems or (stale and not args.write):
        return 1
    print(f"tables: {count} blocks {'written' if args.write else 'fresh'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
