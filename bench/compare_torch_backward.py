#!/usr/bin/env python3
"""The course's attention backward pass next to PyTorch SDPA's, same inputs, same run, one table.

  ours       day 10 · 09_fp16_mma_backward (FlashAttention-2's backward on mma.sync), given the O
             and L of day 10 · 05_fp16_mma's forward (bench/course_autograd.py)
  flash      SDPA's FlashAttention-2 backend          (SDPBackend.FLASH_ATTENTION)
  efficient  SDPA's memory-efficient backend          (SDPBackend.EFFICIENT_ATTENTION)
  cudnn      SDPA's cuDNN backend                     (SDPBackend.CUDNN_ATTENTION)

Shapes: B·N = 16k tokens, H·D = 2048 (the forward's prefill_fp16 grid), N = 2048, 4096, 8192, D = 64
and 128, causal and not, fp16 and bf16. Every backward is timed alone (median of CUDA-event-timed
runs, L2 flushed before each): ours is the launcher call on a stored O and L, theirs
torch.autograd.grad through a stored SDPA graph (retain_graph). TFLOP/s counts the five products
of the backward, 2.5 × 4·B·H·N²·D, halved when causal. `vs flash` is our speed over the flash
backend's; the summary line holds it to >= 0.8 at N >= 4096, where launch and tail effects no
longer dominate.

Agreement: for each backend, the largest relative L2 distance of dQ, dK, dV between ours and
theirs on the same q, k, v, dO (bounds: fp16 5e-3, bf16 2e-2, above what two correct 16-bit
backward passes differ by). A disagreement is printed and makes the exit status 1.

Skips cleanly (exit 0, one line) without PyTorch, a GPU or the library
(cmake --build build --target course_attention).
"""
import argparse
import os
import sys
import warnings

import torch_common
from torch_common import DEFAULT_LIB

BOUNDS = {"fp16": 5e-3, "bf16": 2e-2, "fp32": 1e-4}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.environ.get("COURSE_ATTENTION_LIB", DEFAULT_LIB))
    ap.add_argument("--n", default="2048,4096,8192", help="sequence lengths")
    ap.add_argument("--d", default="64,128", help="head dims")
    ap.add_argument("--dtype", default="fp16,bf16,fp32",
                    help="fp32 runs day 06's 02 forward + 05_flash_backward, next to SDPA's efficient backend")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()

    mods, why_not = torch_common.import_torch()
    if mods is None:
        print(f"compare_torch_backward: skipped, {why_not}")
        return 0
    torch, F, SDPBackend, sdpa_kernel = mods
    import course_autograd

    try:
        ca = course_autograd.load(args.lib)
    except (RuntimeError, OSError) as e:
        print(f"compare_torch_backward: skipped, {e}")
        return 0
    if not ca.available(torch.float16):
        print("compare_torch_backward: skipped, the library was built without 05_fp16_mma / 09_fp16_mma_backward")
        return 0
    warnings.filterwarnings("ignore")
    s = torch_common.Session(torch, ca.lib, args.reps, "compare_torch_backward")
    dev = s.dev
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION)]

    def rel(theirs, ours):
        return float(torch.linalg.vector_norm((theirs.float() - ours.float())) / torch.linalg.vector_norm(theirs.float()))

    header = ("| dtype | D | mask | N | ours ms | ours TFLOP/s | flash TFLOP/s | vs flash (fp32: vs efficient) | efficient TFLOP/s "
              "| cudnn TFLOP/s | agree flash / efficient / cudnn (max rel L2 of dQ, dK, dV) |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    failures = 0
    ratios, ratios32 = [], []
    for dname in args.dtype.split(","):
        dt = dtypes[dname]
        if not ca.available(dt):
            print(f"| {dname} | (the library has no {dname} kernels) |")
            continue
        for d in (int(x) for x in args.d.split(",")):
            for causal in (False, True):
                for n in (int(x) for x in args.n.split(",")):
                    b, h = max(1, 16384 // n), max(1, 2048 // d)
                    gen = torch.Generator(device=dev).manual_seed(1000 * n + d + (7 if causal else 0))
                    q, k, v, d_o = (torch.randn(b, h, n, d, device=dev, dtype=dt, generator=gen) for _ in range(4))
                    flops = 2.5 * 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
                    tf = lambda ms: flops / ms * 1e-9

                    o, lse = ca.forward(q, k, v, causal)
                    ws = ca.workspace(q, k)
                    ours = ca.backward(q, k, v, o, lse, d_o, causal, workspace=ws)
                    ours_ms = s.time_ms(lambda: ca.backward(q, k, v, o, lse, d_o, causal, workspace=ws))

                    cells, agrees = {}, []
                    for name, be in backends:
                        try:
                            qq, kk, vv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
                            with sdpa_kernel(be):
                                out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
                                grads = torch.autograd.grad(out, (qq, kk, vv), d_o, retain_graph=True)
                                ms = s.time_ms(lambda: torch.autograd.grad(out, (qq, kk, vv), d_o, retain_graph=True))
                            err = max(rel(g, m) for g, m in zip(grads, ours))
                            ok = err <= BOUNDS[dname]
                            if not ok:
                                failures += 1
                            cells[name] = ms
                            agrees.append(f"{'ok' if ok else 'DISAGREE'} {err:.1e}")
                            del out, grads, qq, kk, vv
                        except RuntimeError as e:  # a backend that does not support the shape
                            cells[name] = None
                            agrees.append(f"n/a ({str(e).splitlines()[0][:40]})")
                    # fp32: SDPA's flash and cuDNN backends take 16-bit inputs only, so the ratio is
                    # against the memory-efficient backend (the fp32 summary holds it to >= 0.5).
                    ref_name = "efficient" if dname == "fp32" else "flash"
                    fl = cells.get(ref_name)
                    ratio = fl / ours_ms if fl else None
                    if ratio is not None:
                        (ratios32 if dname == "fp32" else ratios).append((dname, d, causal, n, ratio))
                    kernel = "05_flash_backward" if dname == "fp32" else "09_fp16_mma_backward"
                    shape = f"b{b}_h{h}_n{n}_d{d}" + ("_causal" if causal else "")
                    for (name, _), agree in zip(backends, agrees):
                        their = cells.get(name)
                        s.append_csv(kernel=kernel, shape=shape, ours_ms=ours_ms, backend=name, dtype=dname,
                                     theirs_ms=their or "", ratio=f"{ours_ms / their:.2f}" if their else "",
                                     rel_l2=agree.split(" ")[1] if agree.startswith(("ok", "DISAGREE")) else "",
                                     agree=agree.split(" ")[0], note="" if their else agree)
                    fmt = lambda ms: f"{tf(ms):.1f}" if ms else "-"
                    print(f"| {dname} | {d} | {'causal' if causal else 'none'} | {n} | {ours_ms:.3f} | {tf(ours_ms):.1f} "
                          f"| {fmt(cells.get('flash'))} | {f'{ratio:.2f}' if ratio else '-'} | {fmt(cells.get('efficient'))} "
                          f"| {fmt(cells.get('cudnn'))} | {' / '.join(agrees)} |", flush=True)
                    del q, k, v, d_o, o, lse, ws, ours
                    torch.cuda.empty_cache()
    big = [r for r in ratios if r[3] >= 4096]
    if big:
        worst = min(big, key=lambda r: r[4])
        print(f"\nvs flash at N >= 4096: {min(r[4] for r in big):.2f} .. {max(r[4] for r in big):.2f} "
              f"(worst: {worst[0]} D={worst[1]} {'causal' if worst[2] else 'none'} N={worst[3]}); target >= 0.80")
    if ratios32:
        worst = min(ratios32, key=lambda r: r[4])
        print(f"fp32 (column 'vs flash' = vs efficient): {worst[4]:.2f} .. {max(r[4] for r in ratios32):.2f} "
              f"(worst: D={worst[1]} {'causal' if worst[2] else 'none'} N={worst[3]}); target >= 0.50")
    if failures:
        print(f"compare_torch_backward: {failures} disagreement(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
