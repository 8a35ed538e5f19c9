#!/usr/bin/env python3
"""Day 10's kernels next to PyTorch, same inputs, same run (bench/compare_torch.py does day 06).

  prefill16  04_fp16_wmma (fp16), 05_fp16_mma and 10_hopper_wgmma (fp16, bf16) vs SDPA's flash
             (FlashAttention-2), cudnn and efficient backends in the same dtype; B·N = 16k tokens,
             H·D = 2048. Besides the times: TFLOP/s (4·B·H·N²·D, halved when causal) and the ratio
             to SDPA's flash backend (FlashAttention-2, the design 05 reimplements) and to its
             cuDNN backend; a summary table after the rows gives, per (dtype, D, causal, N), 05's
             and 10's TFLOP/s next to flash's and cuDNN's. 10_hopper_wgmma runs only on compute
             capability 9.0 with a library built for sm_90 (n/a otherwise); cudnn is n/a where this
             PyTorch lacks it.
  window     02_sliding_window (fp32) vs SDPA given the band as an explicit boolean mask:
             query i sees keys i + off − w .. i + off, FlashAttention-2's window_size = (w, 0).
             The agreement column is the point: it proves the two window conventions match.
  sparse     03_block_sparse (fp32) on BigBird layouts (band of 3 blocks, block 0 global, seeded
             random blocks; 64 × 64 blocks) vs SDPA given the expanded mask, and vs FlexAttention
             (torch.compile'd flex_attention with a BlockMask) where the installed PyTorch has it.
  decode16   06_split_kv_decode (fp16 paged cache) vs "gather the blocks, then SDPA" in fp16,
             and SDPA on the already dense K/V (what a kernel without paging costs at best);
             GB/s counts the K and V bytes the step must read.
  rope       07_rope_yarn (fp16, bf16; NeoX and GPT-J pairs; YaRN s = 4 over base 500000, L = 8192)
             vs RoPE written here in PyTorch, the contract's formulas (YaRN's ramp as Hugging Face
             and vLLM compute it, linear in the pair index): "torch f64" takes the angles
             m·θ'_i in float64 (the reference), "torch cache" gathers a float32 cos/sin table by
             position (the form serving engines use; built outside the timing). GB/s counts Q and
             K read and written. A decode step at positions near 10^6 checks the exact angles.

Every pair is CHECKED first (relative L2 distance of the outputs: fp16 5e-3, bf16 2e-2, fp32
1e-4), then timed (median of CUDA-event runs, L2 flushed before each). Skips cleanly (exit 0,
one line) without PyTorch, a GPU or the library (cmake --build build --target course_attention).
"""
import argparse
import ctypes
import os
import sys
import warnings

import torch_common
from torch_common import DEFAULT_LIB

BOUNDS = {"fp16": 5e-3, "bf16": 2e-2, "fp32": 1e-4}


def signatures():
    p, i, f, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_uint64
    dense16 = [p, p, p, p, i, i, i, i, i, i, f, i, p]
    return {
        "course_flash_attention_wmma": dense16,
        "course_flash_attention_mma_f16": dense16,
        "course_flash_attention_mma_bf16": dense16,
        "course_sliding_window_attention": [p, p, p, p, i, i, i, i, i, i, i, f, p],
        "course_split_kv_decode": [p, p, p, p, p, p, p, i, i, i, i, i, i, i, f, p],
        "course_block_sparse_attention": [p, p, p, p, i, i, i, i, i, i, f, i, p, i, p, i, p, p, p],
    }, {"course_split_kv_decode_workspace_bytes": ([i] * 7, u)}, {
        # Registered only where the library has the symbol (one built before 10 existed has not).
        "course_flash_attention_wgmma_f16": dense16,
        "course_flash_attention_wgmma_bf16": dense16,
    }


# course_rope_yarn(q, k, q_out, k_out, positions, b, hq, hkv, n, d, gptj, bf16, base, scaling,
#                  factor, original_max_position, beta_fast, beta_slow, stream); scaling 0 none,
# 1 linear, 2 NTK, 3 YaRN (RopeScaling). Registered only where the library has it.
ROPE_ARGTYPES = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 7 + [ctypes.c_double, ctypes.c_int, ctypes.c_double,
                                                              ctypes.c_int, ctypes.c_double, ctypes.c_double,
                                                              ctypes.c_void_p]


def rope_inv_freq(torch, d, base, scaling, s, L, beta_fast=32.0, beta_slow=1.0):
    """θ'_i = factor_i · base^(-2i/D) in float64, the header's formulas (07_rope_yarn.h).

    YaRN as deployed (the released YaRN code, Hugging Face's _compute_yarn_parameters, vLLM),
    written here from its math: the correction dimension d(β) = D·ln(L/(2πβ)) / (2·ln base) is
    the pair that turns β times within L; its edges are rounded outwards (floor for β_fast, ceil
    for β_slow), clamped to [0, D − 1], and a mask ramps linearly over the pair index from 0
    (θ_i kept, "extrapolation") to 1 (θ_i / s, "interpolation"). Not the paper's γ linear in
    r_i = L·θ_i/(2π). mscale = 0.1·ln s + 1 is the default attention factor both multiply into
    cos and sin.
    """
    import math
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = base ** (-2.0 * i / d)
    if scaling == 1:
        inv_freq = theta / s
    elif scaling == 2:
        inv_freq = theta * s ** (-2.0 * i / (d - 2))
    elif scaling == 3:
        def corr_dim(beta):
            return d * math.log(L / (2 * math.pi * beta)) / (2 * math.log(base))
        low = max(math.floor(corr_dim(beta_fast)), 0)
        high = min(math.ceil(corr_dim(beta_slow)), d - 1)
        if high == low:
            high += 0.001
        mask = ((i - low) / (high - low)).clamp(0.0, 1.0)  # 0: keep θ_i, 1: θ_i / s
        inv_freq = (theta / s) * mask + theta * (1.0 - mask)
    else:
        inv_freq = theta
    mscale = 0.1 * math.log(s) + 1.0 if scaling == 3 and s > 1 else 1.0
    return inv_freq, mscale


def torch_rotate(torch, x, cos, sin, gptj):
    """x [B, H, N, D] rotated pair by pair with cos, sin [B, 1, N, D/2] (fp32), rounded to x's dtype."""
    xf = x.float()
    d = x.shape[-1]
    xa, xb = (xf[..., 0::2], xf[..., 1::2]) if gptj else (xf[..., : d // 2], xf[..., d // 2:])
    ya, yb = xa * cos - xb * sin, xa * sin + xb * cos
    y = torch.stack((ya, yb), dim=-1).flatten(-2) if gptj else torch.cat((ya, yb), dim=-1)
    return y.to(x.dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.environ.get("COURSE_ATTENTION_LIB", DEFAULT_LIB))
    ap.add_argument("--n", default="2048,4096,8192,16384", help="prefill16 sequence lengths")
    ap.add_argument("--d", default="64,128", help="prefill16 head dims")
    ap.add_argument("--window-n", default="4096,8192")
    ap.add_argument("--window", type=int, default=1024, help="w: each query sees w + 1 keys")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sparse-random", default="6,16",
                    help="random key blocks per query block (BigBird), one layout per value")
    ap.add_argument("--rope-n", default="8192,32768", help="rope: prefill lengths (B = 1, Hq/Hkv = 32/8, D = 128)")
    ap.add_argument("--only", choices=["prefill16", "window", "sparse", "decode16", "rope"], action="append")
    args = ap.parse_args()
    sections = args.only or ["prefill16", "window", "sparse", "decode16", "rope"]

    mods, why_not = torch_common.import_torch()
    if mods is None:
        print(f"compare_torch_day10: skipped, {why_not}")
        return 0
    torch, F, SDPBackend, sdpa_kernel = mods
    if not os.path.exists(args.lib):
        print(f"compare_torch_day10: skipped, {args.lib} not found "
              "(build it: cmake --build build --target course_attention)")
        return 0
    sigs, sized, optional = signatures()
    lib = torch_common.load_library(args.lib, sigs)
    for name, (argtypes, restype) in sized.items():
        getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, restype
    for name, argtypes in optional.items():
        if hasattr(lib, name):
            getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, ctypes.c_int
    if hasattr(lib, "course_rope_yarn"):  # a library built before 07 existed has no such symbol
        lib.course_rope_yarn.argtypes, lib.course_rope_yarn.restype = ROPE_ARGTYPES, ctypes.c_int
    warnings.filterwarnings("ignore")
    s = torch_common.Session(torch, lib, args.reps, "compare_torch_day10")
    dev = s.dev

    def ours_or_none(kernel, shape, fn):
        """Checks and times one of our launchers; None (and a row saying why) if it cannot run."""
        try:
            s.check(fn)
            torch.cuda.synchronize()
            return s.time_ms(fn)
        except RuntimeError as e:
            s.report(kernel, shape, None, "-", "-", None, None, 0, f"ours failed: {e}")
            return None

    if "prefill16" in sections:
        print("\n== prefill16: B·N = 16k tokens, H·D = 2048; everything in the 16-bit type, fp32 accumulation")
        print(s.HEADER)
        ours_by_dtype = {
            "fp16": [("04_fp16_wmma", "flash_attention_wmma", lib.course_flash_attention_wmma),
                     ("05_fp16_mma", "flash_attention_mma_f16", lib.course_flash_attention_mma_f16),
                     ("10_hopper_wgmma", "flash_attention_wgmma_f16",
                      getattr(lib, "course_flash_attention_wgmma_f16", None))],
            "bf16": [("05_fp16_mma", "flash_attention_mma_bf16", lib.course_flash_attention_mma_bf16),
                     ("10_hopper_wgmma", "flash_attention_wgmma_bf16",
                      getattr(lib, "course_flash_attention_wgmma_bf16", None))],
        }
        cc = torch.cuda.get_device_capability()

        def why_not(kernel, launcher, fn):
            """None if our kernel can run here, else the note of its n/a row."""
            if fn is None:
                return f"n/a: {args.lib} has no course_{launcher} (rebuild course_attention)"
            if not lib.course_has(launcher.encode()):
                if kernel == "10_hopper_wgmma":
                    return "n/a: not built (sm_90a only; this build did not target sm_90)"
                return "not built"
            if kernel == "10_hopper_wgmma" and tuple(cc) != (9, 0):
                return f"n/a: needs a Hopper GPU (compute capability 9.0), this one is {cc[0]}.{cc[1]}"
            return None

        # SDPBackend.CUDNN_ATTENTION is missing from older PyTorch: None, reported as n/a.
        backends = [("flash", SDPBackend.FLASH_ATTENTION),
                    ("cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None)),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
        summary_kernels = ("05_fp16_mma", "10_hopper_wgmma")
        summary = []  # (dname, d, causal, n, flops, {kernel: ms or None}, {backend: ms or None})
        for d in [int(x) for x in args.d.split(",")]:
            for causal in (False, True):
                for n in [int(x) for x in args.n.split(",")]:
                    b, h = 16384 // n, 2048 // d
                    shape = f"b{b}_h{h}_n{n}_d{d}" + ("_causal" if causal else "")
                    flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
                    for dname, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                        torch.manual_seed(0)
                        q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=dtype) for _ in range(3))
                        theirs = {}
                        for bname, backend in backends:
                            if backend is None:
                                theirs[bname] = (None, None)
                                s.report("(sdpa)", shape, None, bname, dname, None, None, 0,
                                         f"n/a: torch {torch.__version__} has no SDPBackend for it")
                                continue

                            def run(backend=backend):
                                with sdpa_kernel(backend):
                                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            try:
                                out = run()
                                theirs[bname] = (out, s.time_ms(run))
                            except RuntimeError as e:
                                theirs[bname] = (None, None)
                                s.report("(sdpa)", shape, None, bname, dname, None, None, 0,
                                         f"n/a: {str(e).strip().splitlines()[0][:50]}")
                        ours_summary = {}
                        for kernel, launcher, fn in ours_by_dtype[dname]:
                            ours_summary.setdefault(kernel, None)
                            reason = why_not(kernel, launcher, fn)
                            if reason is not None:
                                s.report(kernel, shape, None, "-", dname, None, None, 0, reason)
                                continue
                            o = torch.empty_like(q)
                            call = lambda fn=fn, o=o: fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                                         b, h, h, n, n, d, 0.0, int(causal), s.stream())
                            ours_ms = ours_or_none(kernel, shape, call)
                            if ours_ms is None:
                                continue
                            ours_summary[kernel] = ours_ms
                            for bname, (out, their_ms) in theirs.items():
                                if out is None:
                                    continue
                                s.report(kernel, shape, ours_ms, bname, dname, their_ms, s.rel_l2(out, o),
                                         BOUNDS[dname],
                                         f"ours {flops / ours_ms / 1e9:6.1f} TFLOP/s, "
                                         f"theirs {flops / their_ms / 1e9:6.1f}; theirs/ours = "
                                         f"{their_ms / ours_ms:.2f}")
                            del o
                        summary.append((dname, d, causal, n, flops,
                                        {kn: ms for kn, ms in ours_summary.items() if kn in summary_kernels},
                                        {bn: ms for bn, (_, ms) in theirs.items()}))
                        del q, k, v, theirs
                        torch.cuda.empty_cache()

        # The yardstick at a glance: ours/flash and ours/cudnn are speedups (their time / ours),
        # so "≥ 1.3× flash and ≥ 0.75× cudnn" reads off the last two columns.
        def tflops(flops, ms):
            return f"{flops / ms / 1e9:7.1f}" if ms else "    n/a"

        def speedup(theirs_ms, ours_ms):
            return f"{theirs_ms / ours_ms:6.2f}x" if (theirs_ms and ours_ms) else "    n/a"
        print("\n-- prefill16 summary: TFLOP/s; ours/flash, ours/cudnn = speedup over SDPA's flash "
              "and cuDNN backends (their time / ours)")
        print(f"{'kernel':16s} {'dtype':5s} {'D':>4s} {'causal':6s} {'N':>6s}  {'ours':>7s} {'flash':>7s} "
              f"{'cudnn':>7s}  {'ours/flash':>10s} {'ours/cudnn':>10s}")
        for kernel in summary_kernels:
            for dname, d, causal, n, flops, ours_ms, their_ms in summary:
                if kernel not in ours_ms:
                    continue
                o_ms, f_ms, c_ms = ours_ms[kernel], their_ms.get("flash"), their_ms.get("cudnn")
                print(f"{kernel:16s} {dname:5s} {d:4d} {'yes' if causal else 'no':6s} {n:6d}  "
                      f"{tflops(flops, o_ms)} {tflops(flops, f_ms)} {tflops(flops, c_ms)}  "
                      f"{speedup(f_ms, o_ms):>10s} {speedup(c_ms, o_ms):>10s}", flush=True)

    if "window" in sections:
        w = args.window
        print(f"\n== window: 02_sliding_window (fp32, w = {w}: every query sees w + 1 keys) vs SDPA "
              "with the band as an explicit mask")
        print(s.HEADER)
        for d in (64, 128):
            for n in [int(x) for x in args.window_n.split(",")]:
                b, h = 1, 2048 // d
                shape = f"b{b}_h{h}_n{n}_d{d}_w{w}"
                if not lib.course_has(b"sliding_window_attention"):
                    s.report("02_sliding_window", shape, None, "-", "fp32", None, None, 0, "not built")
                    continue
                torch.manual_seed(0)
                q, k, v = (torch.randn(b, h, n, d, device=dev) for _ in range(3))
                o = torch.empty_like(q)
                call = lambda: lib.course_sliding_window_attention(
                    q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h, h, n, n, d, w, 0.0,
                    s.stream())
                ours_ms = ours_or_none("02_sliding_window", shape, call)
                if ours_ms is None:
                    continue
                i = torch.arange(n, device=dev).view(n, 1)
                j = torch.arange(n, device=dev).view(1, n)
                band = (j <= i) & (j >= i - w)  # Nq = Nk: off = 0; True = may attend
                for bname, backend in (("efficient", SDPBackend.EFFICIENT_ATTENTION),
                                       ("math", SDPBackend.MATH)):
                    def run(backend=backend):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, k, v, attn_mask=band)
                    try:
                        err = s.rel_l2(run(), o)
                        s.report("02_sliding_window", shape, ours_ms, bname + "+mask", "fp32",
                                 s.time_ms(run), err, BOUNDS["fp32"])
                    except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                        s.report("02_sliding_window", shape, ours_ms, bname + "+mask", "fp32", None, None, 0,
                                 f"n/a: {str(e).strip().splitlines()[0][:50]}")
                    torch.cuda.empty_cache()
                del q, k, v, o, band

    if "sparse" in sections:
        print("\n== sparse: 03_block_sparse (fp32, BigBird, 64 × 64 blocks, N = 8192) vs SDPA with the "
              "expanded mask and FlexAttention")
        print(s.HEADER)
        flex = None
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            flex = torch.compile(flex_attention)
        except Exception as e:  # older PyTorch, or no compiler backend
            print(f"(FlexAttention not available: {str(e).splitlines()[0][:60]})")
        n, blk = 8192, 64
        t = n // blk
        for d in (64, 128):
            for r in [int(x) for x in args.sparse_random.split(",")]:
                b, h = 2, 2048 // d
                gen = torch.Generator(device="cpu").manual_seed(7 + r)
                blocks = torch.zeros(t, t, dtype=torch.bool)
                for row in range(t):
                    blocks[row, max(0, row - 1):row + 2] = True  # local band
                    blocks[row, torch.randperm(t, generator=gen)[:r]] = True  # random
                blocks[:, 0] = True  # block 0 is global: seen by all ...
                blocks[0, :] = True  # ... and sees all
                density = blocks.float().mean().item()
                shape = f"b{b}_h{h}_n{n}_d{d}_bigbird{r}_{100 * density:.0f}%"
                if not lib.course_has(b"block_sparse_attention"):
                    s.report("03_block_sparse", shape, None, "-", "fp32", None, None, 0, "not built")
                    continue
                counts = blocks.sum(1).to(torch.int32)
                row_ptr = torch.cat([torch.zeros(1, dtype=torch.int32), counts.cumsum(0).to(torch.int32)])
                col_idx = blocks.nonzero()[:, 1].to(torch.int32).contiguous()  # row-major: ascending per row
                rp_dev, ci_dev = row_ptr.to(dev), col_idx.to(dev)
                torch.manual_seed(0)
                q, k, v = (torch.randn(b, h, n, d, device=dev) for _ in range(3))
                o = torch.empty_like(q)
                call = lambda: lib.course_block_sparse_attention(
                    q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h, h, n, n, d, 0.0, 0,
                    row_ptr.data_ptr(), row_ptr.numel(), col_idx.data_ptr(), col_idx.numel(),
                    rp_dev.data_ptr(), ci_dev.data_ptr(), s.stream())
                ours_ms = ours_or_none("03_block_sparse", shape, call)
                if ours_ms is None:
                    continue
                flops = 4.0 * b * h * n * n * d * density
                note = f"ours {flops / ours_ms / 1e9:5.1f} TFLOP/s over listed blocks"
                mask = blocks.to(dev).repeat_interleave(blk, 0).repeat_interleave(blk, 1)

                def sdpa_mask():
                    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                runs = [("efficient+mask", sdpa_mask)]
                if flex is not None:
                    try:
                        lut = blocks.to(dev)
                        bm = create_block_mask(lambda bb, hh, qi, ki: lut[qi // blk, ki // blk], None, None, n, n,
                                               device=dev)
                        runs.append(("flex", lambda bm=bm: flex(q, k, v, block_mask=bm)))
                    except Exception as e:
                        s.report("03_block_sparse", shape, ours_ms, "flex", "fp32", None, None, 0,
                                 f"n/a: {str(e).strip().splitlines()[0][:50]}")
                for name, fn in runs:
                    try:
                        err = s.rel_l2(fn(), o)
                        s.report("03_block_sparse", shape, ours_ms, name, "fp32", s.time_ms(fn), err,
                                 BOUNDS["fp32"], note)
                    except Exception as e:
                        s.report("03_block_sparse", shape, ours_ms, name, "fp32", None, None, 0,
                                 f"n/a: {str(e).strip().splitlines()[0][:50]}")
                    torch.cuda.empty_cache()
                del q, k, v, o, mask

    if "decode16" in sections:
        print("\n== decode16: 06_split_kv_decode, fp16 paged cache (block 16), Hq/Hkv = 32/8, D = 128")
        print(s.HEADER)
        hq, hkv, d, bs = 32, 8, 128, 16
        for b, ctx in ((1, 16384), (1, 65536), (1, 131072), (16, 4096), (64, 4096)):
            shape = f"b{b}_h{hq}_kv{hkv}_ctx{ctx}_d{d}"
            if not lib.course_has(b"split_kv_decode"):
                s.report("06_split_kv_decode", shape, None, "-", "fp16", None, None, 0, "not built")
                continue
            mb = (ctx + bs - 1) // bs
            nb = b * mb
            gen = torch.Generator(device="cpu").manual_seed(1234)
            table = torch.randperm(nb, generator=gen).view(b, mb).to(torch.int32).to(dev)
            lens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
            q = torch.randn(b, hq, d, device=dev, dtype=torch.float16)
            kc = torch.randn(nb, hkv, bs, d, device=dev, dtype=torch.float16)
            vc = torch.randn(nb, hkv, bs, d, device=dev, dtype=torch.float16)
            o = torch.empty_like(q)
            ws_bytes = lib.course_split_kv_decode_workspace_bytes(b, hq, hkv, d, bs, nb, mb)
            ws = torch.empty(max(ws_bytes // 4, 1), dtype=torch.float32, device=dev)
            call = lambda: lib.course_split_kv_decode(
                q.data_ptr(), kc.data_ptr(), vc.data_ptr(), table.data_ptr(), lens.data_ptr(),
                o.data_ptr(), ws.data_ptr(), b, hq, hkv, d, bs, nb, mb, 0.0, s.stream())
            ours_ms = ours_or_none("06_split_kv_decode", shape, call)
            if ours_ms is None:
                continue
            kv_bytes = 2.0 * b * hkv * ctx * d * 2
            tl = table.long()
            kd = kc[tl].permute(0, 2, 1, 3, 4).reshape(b, hkv, mb * bs, d)[:, :, :ctx].contiguous()
            vd = vc[tl].permute(0, 2, 1, 3, 4).reshape(b, hkv, mb * bs, d)[:, :, :ctx].contiguous()

            def gather_sdpa():
                k = kc[tl].permute(0, 2, 1, 3, 4).reshape(b, hkv, mb * bs, d)[:, :, :ctx]
                v = vc[tl].permute(0, 2, 1, 3, 4).reshape(b, hkv, mb * bs, d)[:, :, :ctx]
                return F.scaled_dot_product_attention(q.view(b, hq, 1, d), k, v, enable_gqa=True).view(b, hq, d)

            def dense_sdpa():
                return F.scaled_dot_product_attention(q.view(b, hq, 1, d), kd, vd, enable_gqa=True).view(b, hq, d)

            for name, fn in (("gather+sdpa", gather_sdpa), ("dense sdpa", dense_sdpa)):
                try:
                    err = s.rel_l2(fn(), o)
                    s.report("06_split_kv_decode", shape, ours_ms, name, "fp16", s.time_ms(fn), err,
                             BOUNDS["fp16"], f"ours {kv_bytes / ours_ms / 1e6:6.0f} GB/s of K/V")
                except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                    s.report("06_split_kv_decode", shape, ours_ms, name, "fp16", None, None, 0,
                             f"n/a: {str(e).strip().splitlines()[0][:50]}")
            del q, kc, vc, o, ws, kd, vd, table, lens
            torch.cuda.empty_cache()

    if "rope" in sections:
        print("\n== rope: 07_rope_yarn (YaRN s = 4, base 500000, L = 8192) vs RoPE in PyTorch (same formulas)")
        print(s.HEADER)
        base, scaling, factor, L = 500000.0, 3, 4.0, 8192
        hq, hkv, d = 32, 8, 128
        inv_freq, mscale = rope_inv_freq(torch, d, base, scaling, factor, L)
        inv_freq = inv_freq.to(dev)
        runs = [(1, n, gptj, dname, 0) for n in [int(x) for x in args.rope_n.split(",")]
                for gptj, dname in ((False, "fp16"), (False, "bf16"), (True, "fp16"))]
        runs.append((64, 1, False, "fp16", 999000))  # one decode step near position 10^6
        for b, n, gptj, dname, pos0 in runs:
            shape = f"b{b}_h{hq}_kv{hkv}_n{n}_d{d}_{'gptj' if gptj else 'neox'}" + (f"_pos{pos0}" if pos0 else "")
            has = hasattr(lib, "course_rope_yarn") and lib.course_has(b"rope_yarn")
            if not has:
                s.report("07_rope_yarn", shape, None, "-", dname, None, None, 0, "not built")
                continue
            dtype = torch.float16 if dname == "fp16" else torch.bfloat16
            torch.manual_seed(0)
            q = torch.randn(b, hq, n, d, device=dev, dtype=dtype)
            k = torch.randn(b, hkv, n, d, device=dev, dtype=dtype)
            pos = (pos0 + torch.arange(n, device=dev, dtype=torch.int32)).repeat(b, 1).contiguous()
            if pos0:  # decode: every sequence at its own position near pos0
                pos = pos + torch.arange(b, device=dev, dtype=torch.int32).view(b, 1) * 7
            qo, ko = torch.empty_like(q), torch.empty_like(k)
            call = lambda: lib.course_rope_yarn(
                q.data_ptr(), k.data_ptr(), qo.data_ptr(), ko.data_ptr(), pos.data_ptr(), b, hq, hkv, n, d,
                int(gptj), int(dname == "bf16"), base, scaling, factor, L, 32.0, 1.0, s.stream())
            ours_ms = ours_or_none("07_rope_yarn", shape, call)
            if ours_ms is None:
                continue
            moved = 2.0 * 2.0 * (q.numel() + k.numel()) + 4.0 * pos.numel()
            note = f"ours {moved / ours_ms / 1e6:6.0f} GB/s of Q, K read + written"
            ours = torch.cat((qo.flatten(), ko.flatten()))

            def f64():
                ang = pos.to(torch.float64).view(b, 1, n, 1) * inv_freq
                cos, sin = (torch.cos(ang) * mscale).float(), (torch.sin(ang) * mscale).float()
                return torch_rotate(torch, q, cos, sin, gptj), torch_rotate(torch, k, cos, sin, gptj)
            theirs = [("torch f64", f64)]
            if not pos0:  # a cos/sin table up to the largest position: what vLLM keeps per model
                top = int(pos.max().item()) + 1
                ang = torch.arange(top, device=dev, dtype=torch.float64).view(top, 1) * inv_freq
                cos_cache, sin_cache = (torch.cos(ang) * mscale).float(), (torch.sin(ang) * mscale).float()
                pl = pos.long()

                def cached():
                    cos, sin = cos_cache[pl].unsqueeze(1), sin_cache[pl].unsqueeze(1)
                    return torch_rotate(torch, q, cos, sin, gptj), torch_rotate(torch, k, cos, sin, gptj)
                theirs.append(("torch cache", cached))
            for name, fn in theirs:
                try:
                    tq, tk = fn()
                    err = s.rel_l2(torch.cat((tq.flatten(), tk.flatten())), ours)
                    s.report("07_rope_yarn", shape, ours_ms, name, dname, s.time_ms(fn), err, BOUNDS[dname], note)
                except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                    s.report("07_rope_yarn", shape, ours_ms, name, dname, None, None, 0,
                             f"n/a: {str(e).strip().splitlines()[0][:50]}")
                torch.cuda.empty_cache()
            del q, k, qo, ko, pos, ours
            torch.cuda.empty_cache()

    if s.failures:
        print(f"\n{s.failures} comparison(s) DISAGREE beyond the bound: see the rows above")
        return 1
    print("\nall outputs agree within the bounds (fp16 5e-3, bf16 2e-2, fp32 1e-4 relative L2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
