#!/usr/bin/env python3
"""Trains a small causal transformer twice, with the course's attention and with PyTorch SDPA.

The course's attention is bench/course_autograd.py: forward = day 10 · 05_fp16_mma (writes O and
the log-sum-exp L), backward = day 10 · 09_fp16_mma_backward (fp16/bf16); with --kernel hopper
(fp16/bf16 on a Hopper GPU, compute capability 9.0, with a library built for sm_90) the Hopper
pair instead: forward = day 10 · 10_hopper_wgmma (with L), backward = day 10 ·
11_hopper_backward (--deterministic: its deterministic mode); with --dtype fp32 the
day 06 pair (02_flash_attention with L, 05_flash_backward). The other run calls
F.scaled_dot_product_attention on the same tensors in the same dtype. Everything else (weights,
data, optimiser, the rest of the model in fp32) is identical.

Model: 2 pre-norm blocks (--layers), d_model 256, 4 query heads sharing 2 KV heads (GQA, D = 64:
the backward must sum dK, dV over each group), MLP 4×, learned positions, causal. Data, generated
here with a fixed seed: sequences of 257 tokens over a vocabulary of 128 whose first 128 tokens
follow a random sparse Markov chain (each token has 4 possible successors) and whose rest repeats
them, so that the second half can only be predicted by attending back (an induction task). Loss:
next-token cross-entropy over all 256 positions. AdamW, 300 steps (--steps), batch 32.

Loss scaling: with --dtype fp16 both runs scale the loss before the backward pass
(torch.amp.GradScaler, initial scale 2^16, --loss-scale) and unscale the gradients before
clipping and the optimiser step. The mean over 8192 tokens makes the gradient that reaches the
attention, dO, about 1e-6: below fp16's smallest normal number (6.1e-5), where fp16 keeps only a
few significant bits, and dQ is lost in both runs. bf16 and fp32 have fp32's exponent range and
need no scaling (scale 1 = off); --loss-scale 1 with fp16 shows what goes wrong without it.

Checks (exit status 1 if one fails):
  1. step 0: the gradient of every parameter, of the course's run and of SDPA's, each against a
     float64 reference (the same weights and batch in float64 on the same device, a plain math
     attention, autograd). The course's largest relative L2 error must stay within a bound
     derived from the attention dtype's unit roundoff u (10·u: 4.9e-3 in fp16, 3.9e-2 in bf16;
     in fp32 1e-4, the fp32 model around the attention), and for every parameter within
     2 × SDPA's error + max(u, 1e-5): a correct kernel rounds what SDPA rounds;
  2. the final losses (means over the last 20 steps) agree within 1 % relative.
Writes bench/results/train_tiny.png with both loss curves (needs matplotlib). Runs in well under
a minute on an H100. Skips cleanly (exit 0, one line) without PyTorch, a GPU or the library, and
with --kernel hopper where the Hopper pair was not built or the GPU is not a Hopper one.
"""
import argparse
import copy
import math
import os
import sys
import time

import torch_common
from torch_common import DEFAULT_LIB, HERE

# Unit roundoff u of the attention's dtype: half the spacing of the numbers in [1, 2).
UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp32": 2.0 ** -24}
# The gradient passes through about six roundings of size u on its way through a 16-bit
# attention (Q, K, V, dO as inputs, P and dS as mma operands, dQ/dK/dV when written), and
# dS = P ∘ (dP − D_i) subtracts numbers of similar size; 10·u leaves room for both (a correct
# fp16 kernel measures about 3e-4 on dQ, 0.6·u, with dO in fp16's normal range). In fp32 the
# attention's 10·u (6e-7) lies below the error of the fp32 model around it (sums of up to 8192
# terms: √8192 · 2^-24 ≈ 5e-6), so that sets the bound: 1e-4 there, and 1e-5 as the floor.
MODEL_FLOOR, MODEL_BOUND = 1e-5, 1e-4
# A correct kernel rounds the same quantities as SDPA's and differs in the order of fp32 sums,
# so its error is of the same size as SDPA's; twice SDPA's (plus the floor, for parameters whose
# error is all rounding noise) means it loses precision somewhere SDPA does not.
SDPA_FACTOR = 2.0


def grad_bound(dtype):
    return max(10.0 * UNIT_ROUNDOFF[dtype], MODEL_BOUND)


def grad_floor(dtype):
    return max(UNIT_ROUNDOFF[dtype], MODEL_FLOOR)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.environ.get("COURSE_ATTENTION_LIB", DEFAULT_LIB))
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16", help="attention dtype")
    ap.add_argument("--kernel", choices=["mma", "hopper"], default="mma",
                    help="16-bit pair: mma = 05_fp16_mma + 09_fp16_mma_backward (any sm_80+), "
                         "hopper = 10_hopper_wgmma + 11_hopper_backward (sm_90 only)")
    ap.add_argument("--deterministic", action="store_true",
                    help="with --kernel hopper: 11's deterministic mode (dQ added in key-block order)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loss-scale", type=float, default=None,
                    help="initial loss scale of torch.amp.GradScaler (default 65536 = 2^16 with fp16, "
                         "1 = off with bf16 and fp32); 1 turns loss scaling off")
    ap.add_argument("--png", default=os.path.join(HERE, "results", "train_tiny.png"))
    args = ap.parse_args()
    loss_scale = args.loss_scale if args.loss_scale is not None else (2.0 ** 16 if args.dtype == "fp16" else 1.0)
    if not loss_scale > 0:
        ap.error("--loss-scale must be positive")
    if args.kernel == "hopper" and args.dtype == "fp32":
        ap.error("--kernel hopper runs in 16 bits: use --dtype bf16 or fp16")
    if args.deterministic and args.kernel != "hopper":
        ap.error("--deterministic is the Hopper backward's mode: use it with --kernel hopper")

    mods, why_not = torch_common.import_torch()
    if mods is None:
        print(f"train_tiny: skipped, {why_not}")
        return 0
    torch, F, _, _ = mods
    import torch.nn as nn
    import course_autograd

    try:
        ca = course_autograd.load(args.lib, kernel=args.kernel, deterministic=args.deterministic)
    except (RuntimeError, OSError) as e:
        print(f"train_tiny: skipped, {e}")
        return 0
    adt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    if not ca.available(adt):
        if args.kernel == "hopper":
            print(f"train_tiny: skipped, the Hopper pair cannot run: {ca.hopper_ready()[1]}")
        else:
            print(f"train_tiny: skipped, the library was built without the {args.dtype} forward/backward kernels")
        return 0
    kernels = {"fp32": "06 · 02_flash_attention + 05_flash_backward",
               "mma": "10 · 05_fp16_mma + 09_fp16_mma_backward",
               "hopper": "10 · 10_hopper_wgmma + 11_hopper_backward"
                         + (" (deterministic)" if args.deterministic else "")}[
        "fp32" if args.dtype == "fp32" else args.kernel]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    vocab, n_ctx, d_model, n_heads, n_kv, head_dim = 128, 256, 256, 4, 2, 64

    # ---- data: a sparse Markov chain, then a copy of it (fixed seed, shared by both runs)
    g = torch.Generator().manual_seed(args.seed)
    successors = torch.randint(0, vocab, (vocab, 4), generator=g)
    n_seq, half = args.steps * args.batch, n_ctx // 2
    tokens = torch.empty(n_seq, n_ctx + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, vocab, (n_seq,), generator=g)
    picks = torch.randint(0, 4, (n_seq, half), generator=g)
    for t in range(half - 1):
        tokens[:, t + 1] = successors[tokens[:, t], picks[:, t]]
    tokens[:, half:] = tokens[:, : n_ctx + 1 - half]
    tokens = tokens.to(dev)

    # ---- model
    def course_attn(q, k, v):
        return ca.attention(q, k, v, causal=True)

    def sdpa_attn(q, k, v):
        rep = q.shape[1] // k.shape[1]  # query head h reads KV head h // rep, as the course's kernels do
        return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                              is_causal=True)

    def math_attn(q, k, v):
        """softmax(Q Kᵀ / √D + causal mask) V written out, for the float64 reference."""
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        nq, nk = s.shape[-2:]
        visible = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril(nk - nq)  # bottom-right aligned
        return torch.softmax(s.masked_fill(~visible, float("-inf")), dim=-1) @ v

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.q = nn.Linear(d_model, n_heads * head_dim)
            self.kv = nn.Linear(d_model, 2 * n_kv * head_dim)
            self.proj = nn.Linear(n_heads * head_dim, d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
            self.attn, self.attn_dtype = None, None  # set by the model

        def forward(self, x):
            b, n, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).view(b, n, n_heads, head_dim).transpose(1, 2)
            k, v = self.kv(h).view(b, n, 2, n_kv, head_dim).permute(2, 0, 3, 1, 4)
            t = self.attn_dtype
            a = self.attn(q.to(t).contiguous(), k.to(t).contiguous(), v.to(t).contiguous())
            x = x + self.proj(a.to(x.dtype).transpose(1, 2).reshape(b, n, n_heads * head_dim))
            return x + self.mlp(self.ln2(x))

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(0.02 * torch.randn(n_ctx, d_model))
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)

        def set_attention(self, fn, dtype):
            for blk in self.blocks:
                blk.attn, blk.attn_dtype = fn, dtype
            return self

        def forward(self, x):
            h = self.tok(x) + self.pos[: x.shape[1]]
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.ln(h))

    torch.manual_seed(args.seed)
    base = TinyLM().to(dev)

    def loss_of(model, step):
        batch = tokens[step * args.batch:(step + 1) * args.batch]
        logits = model(batch[:, :-1])
        return F.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))

    def make_scaler():
        # Loss scaling (the usual fp16 training recipe): the loss is multiplied by the scale S
        # before backward, so every gradient, dO included, is S times larger while it is in fp16,
        # and the fp32 gradients are divided by S before they are used. 2^16 lifts dO (about
        # 1e-6 here) to about 0.07, far inside fp16's normal range [6.1e-5, 65504]. GradScaler
        # is dynamic: a step whose gradients overflow is skipped and S halved; S doubles after
        # 2000 clean steps, which this short run never reaches. Disabled, it passes everything
        # through unchanged (scale 1).
        return torch.amp.GradScaler(dev.type, init_scale=loss_scale, enabled=loss_scale != 1.0)

    # ---- check 1: gradients at step 0, each run against a float64 reference
    models = {"course": copy.deepcopy(base).set_attention(course_attn, adt),
              "sdpa": copy.deepcopy(base).set_attention(sdpa_attn, adt)}
    reference = copy.deepcopy(base).double().set_attention(math_attn, torch.float64)

    def step0_grads(model, scaler):
        model.zero_grad(set_to_none=True)
        scaler.scale(loss_of(model, 0)).backward()
        s = scaler.get_scale() if scaler.is_enabled() else 1.0
        out = {pn: p.grad.detach().double() / s for pn, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        return out

    def rel_l2(a, b):
        if not bool(torch.isfinite(a).all()):
            return float("inf")
        return float(torch.linalg.vector_norm(a - b) / max(float(torch.linalg.vector_norm(b)), 1e-300))

    ref_grads = step0_grads(reference, torch.amp.GradScaler(dev.type, enabled=False))
    del reference
    grads = {name: step0_grads(m, make_scaler()) for name, m in models.items()}
    errors = {name: {pn: rel_l2(g[pn], ref_grads[pn]) for pn in ref_grads} for name, g in grads.items()}
    bound, floor = grad_bound(args.dtype), grad_floor(args.dtype)

    def worst(errs):
        pn = max(errs, key=errs.get)
        return pn, errs[pn]

    print(f"train_tiny on {torch.cuda.get_device_name()}, attention in {args.dtype} (course: day {kernels}), "
          f"{args.layers} layers, "
          f"{args.steps} steps of {args.batch} × {n_ctx} tokens, "
          f"loss scale {'off' if loss_scale == 1.0 else f'{loss_scale:g} (GradScaler)'}")
    print(f"step 0 gradients against a float64 reference, max relative L2 over {len(ref_grads)} parameters:")
    c_name, c_err = worst(errors["course"])
    s_name, s_err = worst(errors["sdpa"])
    bound_ok = c_err <= bound
    print(f"  course {c_err:.2e} ({c_name}); bound {bound:.1e}: {'ok' if bound_ok else 'FAIL'}")
    print(f"  SDPA   {s_err:.2e} ({s_name})")
    # the parameter where the course is furthest past SDPA_FACTOR × SDPA's error + floor
    excess = {pn: errors["course"][pn] - (SDPA_FACTOR * errors["sdpa"][pn] + floor) for pn in ref_grads}
    x_name = max(excess, key=excess.get)
    x_lim = SDPA_FACTOR * errors["sdpa"][x_name] + floor
    rel_ok = excess[x_name] <= 0
    print(f"  course within {SDPA_FACTOR:g} × SDPA's error + {floor:.1e} on every parameter: "
          f"{'ok (closest' if rel_ok else 'FAIL (worst'}: {x_name}, {errors['course'][x_name]:.2e} against {x_lim:.2e})")
    direct = {pn: rel_l2(grads["course"][pn], grads["sdpa"][pn]) for pn in ref_grads}
    d_name, d_err = worst(direct)
    print(f"  for information, course vs SDPA directly: {d_err:.2e} ({d_name})")
    if not all(math.isfinite(e) for errs in errors.values() for e in errs.values()):
        print("  non-finite gradients: the loss scale overflows fp16, try a smaller --loss-scale")
    elif args.dtype == "fp16" and loss_scale == 1.0 and not (bound_ok and rel_ok):
        print("  without loss scaling fp16 loses dO and dQ in its subnormal range: drop --loss-scale 1")
    grad_ok = bound_ok and rel_ok
    sys.stdout.flush()

    # ---- training, identical for both runs
    curves, seconds = {}, {}
    for name, m in models.items():
        torch.manual_seed(args.seed + 1)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
        warmup = max(1, args.steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
        scaler = make_scaler()
        skipped = 0
        losses = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for step in range(args.steps):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(m, step)
            before = scaler.get_scale()  # 1.0 when scaling is off
            # snippet-begin: loss-scaled-step
            scaler.scale(loss).backward()  # backward of S · loss
            scaler.unscale_(opt)  # divide the fp32 gradients by S, before clipping
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            scaler.step(opt)  # skipped if a gradient is inf or NaN
            scaler.update()  # S halves after a skipped step, doubles after 2000 clean ones
            # snippet-end: loss-scaled-step
            skipped += scaler.get_scale() < before
            sched.step()
            losses.append(loss.detach())
        torch.cuda.synchronize()
        seconds[name] = time.perf_counter() - t0
        curves[name] = [float(x) for x in losses]
        note = f", {skipped} steps skipped on overflow, final scale {scaler.get_scale():g}" if scaler.is_enabled() else ""
        print(f"{name:6s}: loss {curves[name][0]:.4f} -> {curves[name][-1]:.4f} in {seconds[name]:.1f} s{note}",
              flush=True)

    tail = min(20, args.steps)
    final = {n: sum(c[-tail:]) / tail for n, c in curves.items()}
    rel = abs(final["course"] - final["sdpa"]) / final["sdpa"]
    loss_ok = rel <= 0.01
    print(f"final loss (mean of the last {tail} steps): course {final['course']:.4f}, SDPA {final['sdpa']:.4f}, "
          f"relative difference {rel:.2%}; bound 1%: {'ok' if loss_ok else 'FAIL'}")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        os.makedirs(os.path.dirname(args.png), exist_ok=True)
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(curves["sdpa"], label=f"PyTorch SDPA ({args.dtype})", linewidth=1.5)
        ax.plot(curves["course"], label=f"course kernels ({args.dtype}, day {kernels})", linewidth=1.0,
                linestyle="--")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (cross-entropy)")
        ax.set_title(f"train_tiny: {args.layers}-layer causal transformer, GQA 4/2, D = 64")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"wrote {args.png}")
    except ImportError:
        print("train_tiny: matplotlib is not installed, no PNG written")

    return 0 if (grad_ok and loss_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
