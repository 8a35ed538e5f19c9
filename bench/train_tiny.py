#!/usr/bin/env python3
"""Trains a small causal transformer twice, with the course's attention and with PyTorch SDPA.

The course's attention is bench/course_autograd.py: forward = day 10 · 05_fp16_mma (writes O and
the log-sum-exp L), backward = day 10 · 09_fp16_mma_backward (fp16/bf16); with --dtype fp32 the
day 06 pair (02_flash_attention with L, 05_flash_backward). The other run calls
F.scaled_dot_product_attention on the same tensors in the same dtype. Everything else (weights,
data, optimiser, the rest of the model in fp32) is identical.

Model: 2 pre-norm blocks (--layers), d_model 256, 4 query heads sharing 2 KV heads (GQA, D = 64:
the backward must sum dK, dV over each group), MLP 4×, learned positions, causal. Data, generated
here with a fixed seed: sequences of 257 tokens over a vocabulary of 128 whose first 128 tokens
follow a random sparse Markov chain (each token has 4 possible successors) and whose rest repeats
them, so that the second half can only be predicted by attending back (an induction task). Loss:
next-token cross-entropy over all 256 positions. AdamW, 300 steps (--steps), batch 32.

Checks (exit status 1 if one fails):
  1. step 0: the gradient of every parameter agrees between the two runs (same weights, same
     batch) within a relative L2 distance of 2e-2 (bf16), 5e-3 (fp16), 1e-3 (fp32);
  2. the final losses (means over the last 20 steps) agree within 1 % relative.
Writes bench/results/train_tiny.png with both loss curves (needs matplotlib). Runs in well under
a minute on an H100. Skips cleanly (exit 0, one line) without PyTorch, a GPU or the library.
"""
import argparse
import copy
import math
import os
import sys
import time

import torch_common
from torch_common import DEFAULT_LIB, HERE

GRAD_BOUNDS = {"bf16": 2e-2, "fp16": 5e-3, "fp32": 1e-3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.environ.get("COURSE_ATTENTION_LIB", DEFAULT_LIB))
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16", help="attention dtype")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", default=os.path.join(HERE, "results", "train_tiny.png"))
    args = ap.parse_args()

    mods, why_not = torch_common.import_torch()
    if mods is None:
        print(f"train_tiny: skipped, {why_not}")
        return 0
    torch, F, _, _ = mods
    import torch.nn as nn
    import course_autograd

    try:
        ca = course_autograd.load(args.lib)
    except (RuntimeError, OSError) as e:
        print(f"train_tiny: skipped, {e}")
        return 0
    adt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    if not ca.available(adt):
        print(f"train_tiny: skipped, the library was built without the {args.dtype} forward/backward kernels")
        return 0
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

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.q = nn.Linear(d_model, n_heads * head_dim)
            self.kv = nn.Linear(d_model, 2 * n_kv * head_dim)
            self.proj = nn.Linear(n_heads * head_dim, d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
            self.attn = None  # set by the model

        def forward(self, x):
            b, n, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).view(b, n, n_heads, head_dim).transpose(1, 2)
            k, v = self.kv(h).view(b, n, 2, n_kv, head_dim).permute(2, 0, 3, 1, 4)
            a = self.attn(q.to(adt).contiguous(), k.to(adt).contiguous(), v.to(adt).contiguous())
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

        def set_attention(self, fn):
            for blk in self.blocks:
                blk.attn = fn
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

    # ---- check 1: gradients at step 0
    models = {"course": copy.deepcopy(base).set_attention(course_attn),
              "sdpa": copy.deepcopy(base).set_attention(sdpa_attn)}
    grads = {}
    for name, m in models.items():
        m.zero_grad(set_to_none=True)
        loss_of(m, 0).backward()
        grads[name] = {pn: p.grad.detach().clone() for pn, p in m.named_parameters()}
    worst_name, worst = None, 0.0
    for pn, gs in grads["sdpa"].items():
        gc = grads["course"][pn]
        err = float(torch.linalg.vector_norm(gc - gs) / max(float(torch.linalg.vector_norm(gs)), 1e-30))
        if err > worst:
            worst_name, worst = pn, err
    grad_ok = worst <= GRAD_BOUNDS[args.dtype]
    print(f"train_tiny on {torch.cuda.get_device_name()}, attention in {args.dtype}, {args.layers} layers, "
          f"{args.steps} steps of {args.batch} × {n_ctx} tokens")
    print(f"step 0 gradients, course vs SDPA: max relative L2 over {len(grads['sdpa'])} parameters = {worst:.2e} "
          f"({worst_name}); bound {GRAD_BOUNDS[args.dtype]:.0e}: {'ok' if grad_ok else 'FAIL'}", flush=True)

    # ---- training, identical for both runs
    curves, seconds = {}, {}
    for name, m in models.items():
        torch.manual_seed(args.seed + 1)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
        warmup = max(1, args.steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
        losses = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for step in range(args.steps):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(m, step)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.detach())
        torch.cuda.synchronize()
        seconds[name] = time.perf_counter() - t0
        curves[name] = [float(x) for x in losses]
        print(f"{name:6s}: loss {curves[name][0]:.4f} -> {curves[name][-1]:.4f} in {seconds[name]:.1f} s", flush=True)

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
        ax.plot(curves["course"], label=f"course kernels ({args.dtype})", linewidth=1.0, linestyle="--")
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
