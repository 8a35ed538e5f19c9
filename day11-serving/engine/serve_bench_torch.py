#!/usr/bin/env python3
"""serve_bench's workloads through Hugging Face transformers, for comparison (speed only).

The same model shapes as serve_bench (SmolLM2-135M; Llama-3-8B with --layers layers) with
transformers' own random initialisation, fp16 on the GPU, eager attention, `generate` with its
dense KV cache, greedy, exactly --new tokens per request (EOS off). Per batch size B: B prompts
of --prompt random tokens at once.
  TTFT   generate(max_new_tokens=1) on the batch: the prefill of all B prompts and one token
  TPOT   (time of the full generate - TTFT) / (new - 1)
  tok/s  B · new / time of the full generate
and one request at --long tokens of context (eager attention materialises the score matrix, so
it may run out of memory: reported as such).

    python3 day11-serving/engine/serve_bench_torch.py --csv bench/results/serve_bench_torch.csv
"""
import argparse
import csv
import os
import sys
import time

PRESETS = {
    "smollm2_135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, head_dim=64, rope_theta=100000.0,
                         rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=8192),
    "llama3_8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=500000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, max_position_embeddings=8192),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2_135m,llama3_8b")
    ap.add_argument("--layers", type=int, default=32, help="layers of the Llama-3-8B shape")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--long", type=int, default=32768)
    ap.add_argument("--csv")
    args = ap.parse_args()
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"SKIPPED: needs torch and transformers ({e})")
        return 77
    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA GPU")
        return 77
    dev = torch.cuda.get_device_name()
    rows = []
    for name in args.models.split(","):
        shape = dict(PRESETS[name])
        if name == "llama3_8b":
            shape["num_hidden_layers"] = args.layers
        theta = shape.pop("rope_theta")
        try:
            cfg = LlamaConfig(**shape, rope_theta=theta, attn_implementation="eager")
        except TypeError:
            cfg = LlamaConfig(**shape, rope_theta=theta)
            cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        torch.set_default_dtype(torch.float16)
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg).eval()
        torch.set_default_dtype(torch.float32)
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        weights_mib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20

        def generate(ids, new):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                               min_new_tokens=new, do_sample=False)
            torch.cuda.synchronize()
            return (time.perf_counter() - t0) * 1e3

        workloads = [("batch", b, args.prompt) for b in map(int, args.batches.split(","))]
        if args.long > args.new:
            workloads.append(("long", 1, args.long - args.new))
        for workload, b, prompt in workloads:
            ids = torch.randint(0, cfg.vocab_size, (b, prompt), device="cuda")
            row = dict(device=dev, model=name, workload=workload, batch=b, prompt=prompt, new_tokens=args.new,
                       backend="transformers eager fp16")
            try:
                generate(ids[:, :16], 2)  # warm-up
                torch.cuda.reset_peak_memory_stats()
                ttft = generate(ids, 1)
                total = generate(ids, args.new)
                row.update(ttft_ms=round(ttft, 3), tpot_ms=round((total - ttft) / max(args.new - 1, 1), 4),
                           tokens_per_s=round(b * args.new / (total * 1e-3), 2),
                           peak_mem_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1),
                           weights_mib=round(weights_mib, 1), status="ok")
            except torch.OutOfMemoryError:
                row.update(status="out of memory")
            torch.cuda.empty_cache()
            print(", ".join(f"{k} {v}" for k, v in row.items() if k != "device"), flush=True)
            rows.append(row)
        del model
        torch.cuda.empty_cache()
    if args.csv:
        os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
        keys = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0].keys()).index(k)
                      if k in rows[0] else 99)
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        print(f"(written: {args.csv})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
