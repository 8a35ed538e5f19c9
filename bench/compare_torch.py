#!/usr/bin/env python3
"""Our solution kernels next to PyTorch's scaled_dot_product_attention backends.

The attention solutions (day 06, and day 10's tuned flash kernel) are loaded from a shared library with a small C ABI
(bench/c_api.cpp, built as build/lib/libcourse_attention.so by `make bench` or
`cmake --build build --target course_attention`) through ctypes, so no extension build is
needed. For each shape of the bench's grids the same inputs go through:

  prefill  ours, fp32: 02_flash_attention (MHA shapes), 01_flash_tuned (MHA and GQA shapes),
           03_gqa_attention (GQA shapes)
           vs SDPA's flash, efficient, cudnn and math backends, fp32 and fp16 where each runs
  decode   ours: 04_paged_attention over a paged KV cache
           vs "gather the blocks into a dense K/V, then SDPA" (what you would do without a
           paged kernel), fp32 and fp16

Every pair is CHECKED first: the relative L2 distance between their output and ours must be
small (fp32: 1e-4; fp16: 5e-3, because their inputs were rounded to fp16). Times are medians of
CUDA-event-timed runs with the L2 flushed before each, like the C++ bench. "ours / theirs"
above 1 means ours is slower. Our kernels are named by exercise id, as in the bench's table.

Skips cleanly (exit 0, one line) without PyTorch, without a GPU, or without the library.
"""
import argparse
import ctypes
import os
import sys
import warnings

import torch_common
from torch_common import DEFAULT_LIB
FP32_BOUND, FP16_BOUND = 1e-4, 5e-3

# Our prefill kernels: (exercise id, launcher = the C ABI's course_<launcher>, grid shapes it
# runs on: "mha" has Hkv = Hq, "gqa" Hkv = Hq / 4). The order is the bench's staircase.
PREFILL_KERNELS = [
    ("02_flash_attention", "flash_attention", ("mha",)),
    ("01_flash_tuned", "flash_attention_tuned", ("mha", "gqa")),
    ("03_gqa_attention", "gqa_attention", ("gqa",)),
]


def load_library(path):
    p, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    sigs = {"course_" + launcher: [p, p, p, p, i, i, i, i, i, i, f, i, p]
            for _, launcher, _ in PREFILL_KERNELS}
    sigs["course_paged_attention"] = [p, p, p, p, p, p, i, i, i, i, i, i, i, f, p]
    return torch_common.load_library(path, sigs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.environ.get("COURSE_ATTENTION_LIB", DEFAULT_LIB))
    ap.add_argument("--n", default="512,1024,2048,4096,8192", help="prefill sequence lengths")
    ap.add_argument("--d", default="64,128", help="prefill head dims")
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--decode-batch", default="1,16,64")
    ap.add_argument("--decode-ctx", default="1024,4096,16384")
    ap.add_argument("--math-max-n", type=int, default=4096,
                    help="skip the math backend (materialises N×N) above this N")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--kernel", action="append", default=None,
                    help="only these prefill kernels (exercise id; repeatable): "
                         + ", ".join(k for k, _, _ in PREFILL_KERNELS))
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    args = ap.parse_args()

    mods, why_not = torch_common.import_torch()
    if mods is None:
        print(f"compare_torch: skipped, {why_not}")
        return 0
    torch, F, SDPBackend, sdpa_kernel = mods
    if not os.path.exists(args.lib):
        print(f"compare_torch: skipped, {args.lib} not found "
              "(build it: cmake --build build --target course_attention)")
        return 0
    lib = load_library(args.lib)
    warnings.filterwarnings("ignore")  # SDPA explains every backend it rejects; we say "n/a"

    sess = torch_common.Session(torch, lib, args.reps, "compare_torch")
    dev, stream, time_ms, rel_l2, check, report = (sess.dev, sess.stream, sess.time_ms,
                                                   sess.rel_l2, sess.check, sess.report)
    header = sess.HEADER

    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]

    if not args.skip_prefill:
        print("\n== prefill: B·N = 16k tokens, H·D = 2048; our kernels are fp32")
        print(header)
        causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
        for d in [int(x) for x in args.d.split(",")]:
            for causal in causals:
                for n in [int(x) for x in args.n.split(",")]:
                    b, h = 16384 // n, 2048 // d
                    runs = [(hkv, kernel, launcher)
                            for hkv, tag in ((h, "mha"), (h // 4, "gqa"))
                            for kernel, launcher, tags in PREFILL_KERNELS
                            if tag in tags and (not args.kernel or kernel in args.kernel)]
                    for hkv, kernel, launcher in runs:
                        shape = f"b{b}_h{h}_kv{hkv}_n{n}_d{d}" + ("_causal" if causal else "")
                        if not lib.course_has(launcher.encode()):
                            report(kernel, shape, None, "-", "-", None, None, 0, "not built")
                            continue
                        torch.manual_seed(0)
                        q = torch.randn(b, h, n, d, device=dev)
                        k = torch.randn(b, hkv, n, d, device=dev)
                        v = torch.randn(b, hkv, n, d, device=dev)
                        o = torch.empty_like(q)
                        fn = getattr(lib, "course_" + launcher)
                        ours = lambda: fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                          b, h, hkv, n, n, d, 0.0, int(causal), stream())
                        try:
                            check(ours)
                            torch.cuda.synchronize()
                            ours_ms = time_ms(ours)
                        except RuntimeError as e:
                            report(kernel, shape, None, "-", "-", None, None, 0, f"ours failed: {e}")
                            continue
                        for bname, backend in backends:
                            for dtype, bound in ((torch.float32, FP32_BOUND), (torch.float16, FP16_BOUND)):
                                dname = "fp32" if dtype == torch.float32 else "fp16"
                                if bname == "math" and n > args.math_max_n:
                                    report(kernel, shape, ours_ms, bname, dname, None, None, 0,
                                           f"skipped: N > {args.math_max_n} (--math-max-n)")
                                    continue
                                qt, kt, vt = q.to(dtype), k.to(dtype), v.to(dtype)
                                note = ""

                                def theirs(kt=kt, vt=vt, gqa=hkv != h):
                                    with sdpa_kernel(backend):
                                        return F.scaled_dot_product_attention(
                                            qt, kt, vt, is_causal=causal, enable_gqa=gqa)
                                try:
                                    try:
                                        out = theirs()
                                    except RuntimeError:
                                        if hkv == h:
                                            raise
                                        # Backend without native GQA: the usual workaround,
                                        # repeating each KV head G times (not timed).
                                        g = h // hkv
                                        ke, ve = kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1)
                                        out = theirs(ke, ve, False)
                                        theirs = lambda ke=ke, ve=ve, t=theirs: t(ke, ve, False)
                                        note = "K/V repeated per query head"
                                    err = rel_l2(out, o)
                                    del out
                                    their_ms = time_ms(theirs)
                                    report(kernel, shape, ours_ms, bname, dname, their_ms, err, bound, note)
                                except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                                    msg = str(e).strip().split("\n")[0][:60]
                                    report(kernel, shape, ours_ms, bname, dname, None, None, 0, f"n/a: {msg}")
                                torch.cuda.empty_cache()
                        del q, k, v, o
                        torch.cuda.empty_cache()

    if not args.skip_decode:
        print("\n== paged decode: D = 128, block 16; ours fp32 vs gather + SDPA (default backend)")
        print(header)
        bs, d, hq = 16, 128, 32
        for hkv in (32, 8):
            for b in [int(x) for x in args.decode_batch.split(",")]:
                for ctx in [int(x) for x in args.decode_ctx.split(",")]:
                    shape = f"b{b}_h{hq}_kv{hkv}_ctx{ctx}_d{d}_bs{bs}"
                    if not lib.course_has(b"paged_attention"):
                        report("04_paged_attention", shape, None, "-", "-", None, None, 0, "not built")
                        continue
                    try:
                        mb = (ctx + bs - 1) // bs
                        nb = b * mb
                        gen = torch.Generator(device="cpu").manual_seed(1234)
                        table = torch.randperm(nb, generator=gen).view(b, mb).to(torch.int32).to(dev)
                        lens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
                        q = torch.randn(b, hq, d, device=dev)
                        kc = torch.randn(nb, hkv, bs, d, device=dev)
                        vc = torch.randn(nb, hkv, bs, d, device=dev)
                        o = torch.empty_like(q)
                        ours = lambda: lib.course_paged_attention(
                            q.data_ptr(), kc.data_ptr(), vc.data_ptr(), table.data_ptr(),
                            lens.data_ptr(), o.data_ptr(), b, hq, hkv, d, bs, nb, mb, 0.0, stream())
                        check(ours)
                        torch.cuda.synchronize()
                        ours_ms = time_ms(ours)
                    except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                        report("04_paged_attention", shape, None, "-", "-", None, None, 0,
                               f"ours: {str(e).splitlines()[0][:60]}")
                        torch.cuda.empty_cache()
                        continue
                    for dtype, bound in ((torch.float32, FP32_BOUND), (torch.float16, FP16_BOUND)):
                        dname = "fp32" if dtype == torch.float32 else "fp16"
                        tl = table.long()

                        def theirs():
                            # Gather this batch's blocks into a dense [B, Hkv, ctx, D] K and V.
                            k = kct[tl].permute(0, 2, 1, 3, 4).reshape(b, hkv, mb * bs, d)[:, :, :ctx]
                            v = vct[tl].permute(0, 2, 1, 3, 4).reshape(b, hkv, mb * bs, d)[:, :, :ctx]
                            return F.scaled_dot_product_attention(
                                qt.view(b, hq, 1, d), k, v, enable_gqa=hkv != hq).view(b, hq, d)
                        try:
                            qt, kct, vct = q.to(dtype), kc.to(dtype), vc.to(dtype)
                            err = rel_l2(theirs(), o)
                            report("04_paged_attention", shape, ours_ms, "gather+sdpa", dname,
                                   time_ms(theirs), err, bound)
                        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                            report("04_paged_attention", shape, ours_ms, "gather+sdpa", dname, None,
                                   None, 0, f"n/a: {str(e).splitlines()[0][:60]}")
                        qt = kct = vct = None
                        torch.cuda.empty_cache()
                    del q, kc, vc, o, table, lens
                    torch.cuda.empty_cache()

    if sess.failures:
        print(f"\n{sess.failures} comparison(s) DISAGREE beyond the bound: see the rows above")
        return 1
    print("\nall outputs agree within the bounds (fp32 1e-4, fp16 5e-3 relative L2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
