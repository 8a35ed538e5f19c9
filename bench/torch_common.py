"""What the PyTorch comparison scripts share: loading the course's C ABI library, timing with
the L2 flushed, the agreement check and the one-line report per (our kernel, their backend).

Used by bench/compare_torch.py (fp32 day-06 kernels, the tuned flash kernel, paged decode) and
bench/compare_torch_day10.py (the 16-bit tensor-core kernels, sliding window, split-KV decode).
"""
import csv
import ctypes
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(HERE, "..", "build", "lib", "libcourse_attention.so")


def import_torch():
    """(torch, F, SDPBackend, sdpa_kernel), or a one-line reason why the comparison is skipped."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        return None, f"PyTorch is not available ({e})"
    if not torch.cuda.is_available():
        return None, "PyTorch sees no CUDA GPU"
    return (torch, F, SDPBackend, sdpa_kernel), None


class Session:
    """One comparison run: the library, the device, the timer and the rows printed so far."""

    def __init__(self, torch, lib, reps, title):
        self.torch, self.lib, self.reps = torch, lib, reps
        self.title = title
        self.failures = 0
        self.dev = torch.device("cuda")
        props = torch.cuda.get_device_properties(self.dev)
        l2 = getattr(props, "L2_cache_size", 64 << 20)
        # Zeroing twice the L2 between runs evicts the previous run's data, so every timed run
        # reads its inputs from HBM, as a layer of a real model would.
        self.flush_buf = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device=self.dev)
        print(f"{title} on {props.name}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
              f"median of {reps} runs, L2 flushed before each")

    def stream(self):
        return ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)

    def time_ms(self, fn):
        torch = self.torch
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(self.reps):
            self.flush_buf.zero_()  # outside the events
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    def rel_l2(self, theirs, ours):
        a, b = theirs.float(), ours.float()
        return float(self.torch.linalg.vector_norm(a - b) / self.torch.linalg.vector_norm(b))

    def check(self, fn_ours):
        """Runs one of our launchers once; a non-zero return carries the library's message."""
        if fn_ours() != 0:
            raise RuntimeError(self.lib.course_last_error().decode())

    HEADER = (f"{'kernel':20s} {'shape':32s} {'ours ms':>9s}  {'backend':11s} {'dtype':5s} "
              f"{'theirs ms':>9s}  {'ours/theirs':>7s}  {'agree (rel L2)':24s} note")

    def report(self, kernel, shape, ours_ms, backend, dtype, theirs_ms, err, bound, note=""):
        if err is None:
            agree = "-"
        elif err <= bound:
            agree = f"ok {err:.1e}"
        else:
            agree = f"DISAGREE {err:.1e} > {bound:.0e}"
            self.failures += 1
        ratio = f"{ours_ms / theirs_ms:.2f}" if (ours_ms and theirs_ms) else "-"
        self.append_csv(kernel=kernel, shape=shape, ours_ms=ours_ms or "", backend=backend, dtype=dtype,
                        theirs_ms=theirs_ms or "", ratio=ratio if ratio != "-" else "",
                        rel_l2="" if err is None else f"{err:.3g}", agree=agree.split(" ")[0], note=note)
        print(f"{kernel:20s} {shape:32s} {ours_ms if ours_ms else float('nan'):9.3f}  "
              f"{backend:11s} {dtype:5s} "
              f"{(f'{theirs_ms:9.3f}' if theirs_ms else '        -')}  {ratio:>7s}  {agree:24s} {note}",
              flush=True)


    CSV_COLUMNS = ["script", "kernel", "shape", "ours_ms", "backend", "dtype", "theirs_ms", "ratio",
                   "rel_l2", "agree", "note"]

    def append_csv(self, **row):
        """With COURSE_TORCH_CSV=<path> set, every printed row is also appended to that CSV (the
        committed reference tables in bench/results/reference/ are made this way)."""
        path = os.environ.get("COURSE_TORCH_CSV")
        if not path:
            return
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        with open(path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.CSV_COLUMNS)
            if new:
                w.writeheader()
            w.writerow(dict(row, script=self.title))


def load_library(path, signatures):
    """ctypes handle with argtypes/restype set from {name: [argtypes]} (all return int)."""
    lib = ctypes.CDLL(path)
    lib.course_last_error.restype = ctypes.c_char_p
    lib.course_has.argtypes = [ctypes.c_char_p]
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    return lib
