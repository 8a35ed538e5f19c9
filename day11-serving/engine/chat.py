#!/usr/bin/env python3
"""Chat with a Hugging Face Llama-style checkpoint served by the course's engine.

    python3 day11-serving/engine/chat.py MODEL=path/to/SmolLM2-135M-Instruct
    make chat MODEL=path/to/dir

The directory's own tokenizer (transformers.AutoTokenizer) turns text into ids and back, and its
chat template (when it has one) formats the conversation; the engine (lib/libcourse_serving_capi.so,
the solutions' kernels) does everything in between. Tokens are printed as they arrive (one
engine step at a time). Empty line or Ctrl-D ends; /reset forgets the conversation.
"""
import argparse
import faulthandler
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serving_capi  # noqa: E402


def encode(tok, history):
    if getattr(tok, "chat_template", None):
        ids = tok.apply_chat_template(history, add_generation_prompt=True)
        if hasattr(ids, "keys") and "input_ids" in ids:  # transformers 5 may return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    text = "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in history) + "Assistant:"
    return tok(text)["input_ids"]


def main():
    faulthandler.enable()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="MODEL=dir or dir: a Hugging Face Llama-architecture checkpoint")
    ap.add_argument("--lib", default=serving_capi.DEFAULT_LIB)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    model_dir = args.model.split("=", 1)[1] if args.model.startswith("MODEL=") else args.model
    if not os.path.exists(args.lib):
        print(f"{args.lib} does not exist: build the target course_serving_capi (make chat builds it)")
        return 2
    # The engine first, transformers second: the tokenizer needs no GPU, and if transformers pulls
    # in PyTorch, its CUDA libraries then find the engine's already loaded instead of bringing a
    # second build of them into the process.
    lib = serving_capi.load_library(args.lib)
    try:
        eng = serving_capi.Engine(lib, model_dir, max_num_seqs=1)
    except serving_capi.EngineError as e:
        print(f"the engine refused {model_dir}: {e}")
        return 1
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        print(f"chat.py needs transformers for the model's tokenizer ({e})")
        return 2
    tok = AutoTokenizer.from_pretrained(model_dir)
    print(f"{model_dir}: context {eng.max_context} tokens · {eng.kernels}")
    history, turn = [], 0
    while True:
        try:
            line = input("\nyou> ").strip()
        except EOFError:
            break
        if not line:
            break
        if line == "/reset":
            history = []
            continue
        history.append({"role": "user", "content": line})
        ids = encode(tok, history)
        room = eng.max_context - len(ids)
        if room < 1:
            print(f"(the conversation is {len(ids)} tokens, the context {eng.max_context}: /reset)")
            history.pop()
            continue
        rid = eng.submit(ids, max_new_tokens=min(args.max_new_tokens, room), temperature=args.temperature,
                         top_p=args.top_p, seed=args.seed + turn, stop_at_eos=True)
        turn += 1
        r = eng.result(rid)
        if r.error:
            print(f"(refused: {r.error})")
            history.pop()
            continue
        print("bot> ", end="", flush=True)
        shown, t0 = "", time.perf_counter()
        while eng.step():
            r = eng.result(rid)
            text = tok.decode(r.tokens, skip_special_tokens=True)
            print(text[len(shown):], end="", flush=True)
            shown = text
        r = eng.result(rid)
        dt = time.perf_counter() - t0
        n = len(r.tokens)
        print(f"\n({n} tokens · TTFT {r.token_ms[0]:.1f} ms · {n / dt:.1f} tok/s)" if n else "")
        history.append({"role": "assistant", "content": tok.decode(r.tokens, skip_special_tokens=True)})
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
