"""The course's serving engine from Python: ctypes over lib/libcourse_serving_capi.so (c_api.cpp).

Used by chat.py and compare_transformers.py. Every call that fails raises EngineError with the
engine's own message; a refused request is not a failure (Result.error holds its message).
"""
import ctypes
import os
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(HERE, "..", "..", "build", "lib", "libcourse_serving_capi.so")


class EngineError(RuntimeError):
    pass


@dataclass
class Result:
    id: int
    error: str = ""
    tokens: list = field(default_factory=list)
    margins: list = field(default_factory=list)
    token_ms: list = field(default_factory=list)
    logits: object = None  # numpy [tokens, vocab] when the request kept them
    preemptions: int = 0


def load_library(path=None):
    path = os.path.abspath(path or os.environ.get("COURSE_SERVING_LIB", DEFAULT_LIB))
    lib = ctypes.CDLL(path)
    c_int, c_float, c_u64, c_i64, vp = ctypes.c_int, ctypes.c_float, ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p
    i32p, f32p, f64p = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_double)
    sig = {
        "serving_last_error": (ctypes.c_char_p, []),
        "serving_create": (vp, [ctypes.c_char_p, c_u64, c_int, c_int, c_int, c_int, c_int, c_int, c_int]),
        "serving_destroy": (None, [vp]),
        "serving_vocab_size": (c_int, [vp]),
        "serving_max_context": (c_int, [vp]),
        "serving_kernel_summary": (ctypes.c_char_p, [vp]),
        "serving_submit": (c_int, [vp, i32p, c_int, c_int, c_float, c_float, c_u64, c_int, c_int]),
        "serving_step": (c_int, [vp]),
        "serving_run": (c_int, [vp]),
        "serving_result_error": (c_int, [vp, c_int, ctypes.c_char_p, c_int]),
        "serving_result_finished": (c_int, [vp, c_int]),
        "serving_result_preemptions": (c_int, [vp, c_int]),
        "serving_result_tokens": (c_int, [vp, c_int, i32p, c_int]),
        "serving_result_margins": (c_int, [vp, c_int, f32p, c_int]),
        "serving_result_token_ms": (c_int, [vp, c_int, f64p, c_int]),
        "serving_result_logits": (c_i64, [vp, c_int, f32p, c_i64]),
        "serving_prompt_logits": (c_int, [vp, i32p, c_int, c_int, f32p]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


class Engine:
    """One engine: a model (Hugging Face directory or preset name) with its KV pool and scheduler."""

    def __init__(self, lib, model, seed=1, block_size=16, num_blocks=0, max_context=0, max_num_seqs=64,
                 max_step_tokens=2048, max_prefill_chunk=512, cuda_graphs=True):
        self.lib = lib
        self.h = lib.serving_create(str(model).encode(), seed, block_size, num_blocks, max_context, max_num_seqs,
                                    max_step_tokens, max_prefill_chunk, 1 if cuda_graphs else 0)
        if not self.h:
            raise EngineError(self._err())
        self.vocab = lib.serving_vocab_size(self.h)
        self.max_context = lib.serving_max_context(self.h)
        self.kernels = lib.serving_kernel_summary(self.h).decode()

    def _err(self):
        return self.lib.serving_last_error().decode(errors="replace")

    def _check(self, rc):
        if rc < 0:
            raise EngineError(self._err())
        return rc

    def close(self):
        if self.h:
            self.lib.serving_destroy(self.h)
            self.h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def submit(self, prompt, max_new_tokens=16, temperature=0.0, top_p=1.0, seed=0, stop_at_eos=False,
               keep_logits=False):
        arr = (ctypes.c_int32 * max(len(prompt), 1))(*prompt)
        return self._check(self.lib.serving_submit(self.h, arr, len(prompt), max_new_tokens, temperature, top_p, seed,
                                                   int(stop_at_eos), int(keep_logits)))

    def step(self):
        return self._check(self.lib.serving_step(self.h)) == 1

    def run(self):
        self._check(self.lib.serving_run(self.h))

    def result(self, rid, with_logits=False, raw=False):
        lib, h = self.lib, self.h
        n_err = self._check(lib.serving_result_error(h, rid, None, 0))
        buf = ctypes.create_string_buffer(n_err + 1)
        lib.serving_result_error(h, rid, buf, n_err + 1)
        n = self._check(lib.serving_result_tokens(h, rid, None, 0))
        toks = (ctypes.c_int32 * max(n, 1))()
        margins = (ctypes.c_float * max(n, 1))()
        times = (ctypes.c_double * max(n, 1))()
        lib.serving_result_tokens(h, rid, toks, n)
        lib.serving_result_margins(h, rid, margins, n)
        lib.serving_result_token_ms(h, rid, times, n)
        r = Result(rid, buf.value.decode(errors="replace"), list(toks[:n]), list(margins[:n]), list(times[:n]),
                   preemptions=lib.serving_result_preemptions(h, rid))
        if with_logits:
            count = self._check(lib.serving_result_logits(h, rid, None, 0))
            buf = (ctypes.c_float * max(count, 1))()
            lib.serving_result_logits(h, rid, buf, count)
            r.logits = _floats(buf, count, self.vocab, raw)
        return r

    def prompt_logits(self, tokens, chunk, raw=False):
        buf = (ctypes.c_float * (len(tokens) * self.vocab))()
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        self._check(self.lib.serving_prompt_logits(self.h, arr, len(tokens), chunk, buf))
        return _floats(buf, len(tokens) * self.vocab, self.vocab, raw)


def _floats(buf, count, vocab, raw):
    """count floats of a ctypes buffer: numpy [count / vocab, vocab], or (raw) the bytes. The raw
    form lets a process use the engine without importing numpy (see compare_transformers.py)."""
    data = bytes(buf)[:4 * count]
    if raw:
        return data
    import numpy as np
    return np.frombuffer(data, dtype=np.float32).reshape(-1, vocab).copy()
