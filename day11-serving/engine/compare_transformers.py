#!/usr/bin/env python3
"""The course's serving engine against Hugging Face transformers on the same checkpoint.

Builds a random LlamaForCausalLM (the shape of ModelConfig::tiny(): vocab 384, hidden 256,
4 layers, 4 / 2 heads, D 64, intermediate 512, norm weights not all ones), rounds its weights to
fp16 once (the engine stores fp16; both sides then read identical values), saves it with
save_pretrained (a real config.json + model.safetensors in Hugging Face's layout), serves that
directory with the engine through its C API and compares with transformers in fp32 (eager
attention, TF32 off):

  1. prefill logits of prompts of 1, 17, 100 and 300 tokens, in one chunk and in chunks of 32;
  2. 64 decode steps (greedy) after prompts of 17 and 100 tokens: the engine's logits at each
     sampled position against transformers' on the same token sequence, and the engine's tokens
     against transformers' arg max wherever its top-2 margin exceeds twice the max-abs bound;
  3. batch invariance: 16 requests of different lengths, each alone and all together in a small
     page pool (preemption) with small chunks: the same tokens, except after a step whose top-2
     margin was below 0.02 (a batch sums in another order).

The bound is measured, not guessed: the same model run by transformers in fp16 (activations
stored in fp16 as the engine stores them) shows what fp16 alone costs against fp32, e16
(relative L2) and m16 (max abs) on the same tokens. The engine rounds at somewhat different
points (P before P·V, the norm before its weight) and sums in other orders, so it must stay
within a small multiple of that: rel L2 <= max(3·e16, 2e-3) and max abs <= max(5·m16, 2e-3).
A real bug (a wrong rotary layout, a head mapped wrongly, a stale page) costs O(0.1-1).

The engine runs in a child process of its own (this script with --engine-worker), which imports
neither torch nor numpy (engine_worker says why).

Exit status: 0 all passed, 1 a check failed, 77 torch / transformers / a GPU missing (CTest
counts that as Skipped), 2 the engine library is missing (build course_serving_capi).
"""
import argparse
import faulthandler
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serving_capi  # noqa: E402

SKIP = 77
PREFILL_LENGTHS = (1, 17, 100, 300)
DECODE_PROMPTS = (17, 100)
DECODE_STEPS = 64
MARGIN_TOL = 0.02


def engine_worker(lib_path, ckpt, plan_path, out_path):
    """Runs every engine computation of the comparison; pickles the results (logits as raw fp32
    bytes). It imports neither numpy nor torch: both load the system's libstdc++, and a build whose
    compiler links parts of its own libstdc++ into the engine library then crashes in the first
    iostream call that mixes the two (seen with a GCC in /opt/gcc: formatting a double in the
    config check)."""
    import pickle
    with open(plan_path) as f:
        plan = json.load(f)
    lib = serving_capi.load_library(lib_path)
    out = {}
    with serving_capi.Engine(lib, ckpt, num_blocks=256, max_num_seqs=16) as eng:
        out["kernels"] = eng.kernels
        for i, tokens in enumerate(plan["prefill"]):
            for chunk in (len(tokens), 32):
                out[f"prefill_{i}_{chunk}"] = eng.prompt_logits(tokens, chunk, raw=True)
        for i, prompt in enumerate(plan["decode"]):
            rid = eng.submit(prompt, max_new_tokens=DECODE_STEPS, keep_logits=True)
            eng.run()
            r = eng.result(rid, with_logits=True, raw=True)
            if r.error:
                raise serving_capi.EngineError(r.error)
            out[f"decode_{i}_tokens"] = r.tokens
            out[f"decode_{i}_logits"] = r.logits
        for i, (prompt, new) in enumerate(plan["mixed"]):
            rid = eng.submit(prompt, max_new_tokens=new)
            eng.run()
            r = eng.result(rid)
            out[f"alone_{i}_tokens"] = r.tokens
            out[f"alone_{i}_margins"] = r.margins
    with serving_capi.Engine(lib, ckpt, num_blocks=24, max_num_seqs=16, max_step_tokens=64,
                             max_prefill_chunk=32) as small:
        ids = [small.submit(p, max_new_tokens=m) for p, m in plan["mixed"]]
        small.run()
        for i, rid in enumerate(ids):
            r = small.result(rid)
            out[f"batched_{i}_tokens"] = r.tokens
            out[f"batched_{i}_preemptions"] = r.preemptions
    with open(out_path, "wb") as f:
        pickle.dump(out, f)
    return 0


def symbolize(stderr, lib):
    """The engine's C++ frames of a crash (SERVING_BACKTRACE's offsets) as functions and lines."""
    import re
    import shutil
    offsets = re.findall(r"libcourse_serving_capi\.so\(\+(0x[0-9a-f]+)\)", stderr)
    if offsets and shutil.which("addr2line"):
        out = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", lib] + offsets, capture_output=True, text=True)
        print("the engine's frames:\n" + out.stdout)


def rel_l2(a, b):
    import numpy as np
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def max_abs(a, b):
    import numpy as np
    return float(np.max(np.abs(a - b)))


class Checker:
    def __init__(self):
        self.failures = 0
        self.lines = []

    def check(self, ok, line):
        self.lines.append(("ok  " if ok else "FAIL") + "  " + line)
        print(self.lines[-1], flush=True)
        if not ok:
            self.failures += 1


def main():
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=serving_capi.DEFAULT_LIB, help="path of libcourse_serving_capi.so")
    ap.add_argument("--keep", help="save the checkpoint here instead of a temporary directory")
    ap.add_argument("--engine-worker", nargs=3, metavar=("CKPT", "PLAN", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.engine_worker:
        return engine_worker(args.lib, *args.engine_worker)
    try:
        import numpy as np
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"SKIPPED: the comparison needs torch, transformers and numpy ({e})")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA GPU")
        return SKIP
    if not os.path.exists(args.lib):
        print(f"ERROR: {args.lib} does not exist: build the target course_serving_capi first")
        return 2

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    shape = dict(vocab_size=384, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, rms_norm_eps=1e-5,
                 tie_word_embeddings=False, bos_token_id=256, eos_token_id=257)
    try:
        cfg = LlamaConfig(**shape, attn_implementation="eager")
    except TypeError:  # a version without the keyword
        cfg = LlamaConfig(**shape)
        cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # not all ones: a norm that forgets its weight shows
                p.copy_(1 + 0.05 * torch.randn_like(p))
            p.copy_(p.half().float())  # the values the engine stores
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)

    tmp = tempfile.TemporaryDirectory(prefix="serving_compare_")
    ckpt = args.keep or os.path.join(tmp.name, "model")
    model.save_pretrained(ckpt)
    rng = np.random.default_rng(1234)
    ints = lambda n: [int(t) for t in rng.integers(0, 384, n)]  # noqa: E731
    plan = {"prefill": [ints(n) for n in PREFILL_LENGTHS], "decode": [ints(n) for n in DECODE_PROMPTS],
            "mixed": [(ints(3 + (i * 37) % 198), 6 + (i * 5) % 15) for i in range(16)]}
    plan_path, out_path = os.path.join(tmp.name, "plan.json"), os.path.join(tmp.name, "engine.pkl")
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    worker = subprocess.run([sys.executable, os.path.abspath(__file__), "--lib", args.lib, "--engine-worker", ckpt,
                             plan_path, out_path], capture_output=True, text=True,
                            env=dict(os.environ, SERVING_BACKTRACE="1"))
    if worker.returncode != 0:
        print(worker.stdout + worker.stderr)
        symbolize(worker.stderr, args.lib)
        print(f"FAILED: the engine process exited with status {worker.returncode}")
        return 1
    import pickle
    with open(out_path, "rb") as f:
        eng = pickle.load(f)
    for k, v in eng.items():  # raw fp32 logits -> [rows, vocab]
        if isinstance(v, bytes):
            eng[k] = np.frombuffer(v, dtype=np.float32).reshape(-1, 384)
        elif isinstance(v, list):
            eng[k] = np.array(v)
    print(f"engine: {eng['kernels']}", flush=True)

    ref32 = model.to("cuda")
    ref16 = LlamaForCausalLM(cfg).eval().to("cuda")
    ref16.load_state_dict(ref32.state_dict())
    ref16 = ref16.half()

    def hf_logits(m, tokens):
        with torch.no_grad():
            ids = torch.tensor([tokens], device="cuda")
            return m(input_ids=ids).logits[0].float().cpu().numpy()

    def bound(l16, ref):
        return max(3 * rel_l2(l16, ref), 2e-3), max(5 * max_abs(l16, ref), 2e-3)

    chk = Checker()
    # 1. prefill logits
    for i, tokens in enumerate(plan["prefill"]):
        ref = hf_logits(ref32, tokens)
        b_rel, b_abs = bound(hf_logits(ref16, tokens), ref)
        for chunk in (len(tokens), 32):
            got = eng[f"prefill_{i}_{chunk}"]
            e_rel, e_abs = rel_l2(got, ref), max_abs(got, ref)
            chk.check(e_rel <= b_rel and e_abs <= b_abs,
                      f"prefill {len(tokens):3d} tokens, chunks of {min(chunk, len(tokens)):3d}: rel L2 {e_rel:.2e} "
                      f"(bound {b_rel:.2e}), max abs {e_abs:.2e} (bound {b_abs:.2e})")
    # 2. decode steps
    for i, prompt in enumerate(plan["decode"]):
        n, toks, got = len(prompt), [int(t) for t in eng[f"decode_{i}_tokens"]], eng[f"decode_{i}_logits"]
        seq = prompt + toks[:-1]
        ref = hf_logits(ref32, seq)[n - 1:n - 1 + DECODE_STEPS]
        b_rel, b_abs = bound(hf_logits(ref16, seq)[n - 1:n - 1 + DECODE_STEPS], ref)
        e_rel, e_abs = rel_l2(got, ref), max_abs(got, ref)
        chk.check(got.shape == ref.shape and e_rel <= b_rel and e_abs <= b_abs,
                  f"{DECODE_STEPS} decode steps after {n:3d} tokens: rel L2 {e_rel:.2e} (bound {b_rel:.2e}), "
                  f"max abs {e_abs:.2e} (bound {b_abs:.2e})")
        top2 = np.sort(ref, axis=1)[:, -2:]
        sure = (top2[:, 1] - top2[:, 0]) > 2 * b_abs
        same = int(np.sum(np.array(toks)[sure] == np.argmax(ref, axis=1)[sure]))
        chk.check(same == int(np.sum(sure)),
                  f"greedy tokens after {n:3d} tokens: {same} of {int(np.sum(sure))} equal to transformers' arg max "
                  f"where the margin exceeds {2 * b_abs:.2e} ({DECODE_STEPS - int(np.sum(sure))} closer calls)")
    # 3. batch invariance
    same, bad, preempt = 0, [], 0
    for i in range(len(plan["mixed"])):
        a, m, b = eng[f"alone_{i}_tokens"], eng[f"alone_{i}_margins"], eng[f"batched_{i}_tokens"]
        preempt += int(eng[f"batched_{i}_preemptions"])
        diverge = next((s for s in range(len(a)) if s >= len(b) or a[s] != b[s]), None)
        if diverge is None and len(a) == len(b):
            same += 1
        elif diverge is None or m[diverge] >= MARGIN_TOL:
            bad.append(f"request {i} differs at token {diverge} (lengths {len(a)} / {len(b)})")
    chk.check(not bad and preempt > 0,
              f"batch invariance: 16 requests, {same} identical, {16 - same - len(bad)} diverge only after a top-2 "
              f"margin < {MARGIN_TOL}, {preempt} preemptions in the batched run" + ("; " + "; ".join(bad) if bad else ""))
    tmp.cleanup()
    print(f"\n{'PASSED' if chk.failures == 0 else 'FAILED'}: {len(chk.lines) - chk.failures} of {len(chk.lines)} checks")
    return 0 if chk.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
