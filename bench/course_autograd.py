"""The course's attention as a PyTorch autograd function, over the C ABI of libcourse_attention.so.

  16 bits (fp16, bf16), kernel="mma" (the default, any GPU from sm_80):
                        forward = day 10 · 05_fp16_mma (flash_attention_mma, which also writes the
                        per-row log-sum-exp L), backward = day 10 · 09_fp16_mma_backward.
  16 bits, kernel="hopper" (compute capability 9.0, a library built for sm_90: both are sm_90a only):
                        forward = day 10 · 10_hopper_wgmma (flash_attention_wgmma with L),
                        backward = day 10 · 11_hopper_backward (flash_attention_wgmma_backward;
                        deterministic=True adds dQ in key-block order: bit-identical, slower).
  16 bits, kernel="auto": "hopper" where it is built and the GPU is a Hopper one, else "mma".
  fp32 (any kernel):    forward = day 06 · 02_flash_attention (with L), backward = day 06 ·
                        05_flash_backward.

    import course_autograd
    ca = course_autograd.load()                   # the library, or a RuntimeError saying why not
    o = ca.attention(q, k, v, causal=True)        # q [B, Hq, N, D], k, v [B, Hkv, Nk, D], CUDA tensors
    ca = course_autograd.load(kernel="hopper")    # the Hopper pair; ca.available(dtype) is False
    ok, why = ca.hopper_ready()                   # where it was not built or the GPU is not sm_90

The forward saves Q, K, V, O and L (one fp32 number per query row), never the N × N matrix: the
backward recomputes P = exp(scale · Q Kᵀ − L) from them, as FlashAttention does. Layouts, masks
and limits are the launchers' (common/attention_params.h; head_dim 64 or 128 in 16 bits, 32, 64 or
128 in fp32; Hq a multiple of Hkv, in fp32 through repeated KV heads since day 06 · 02 is MHA only;
causal masks bottom-right aligned). Everything runs on PyTorch's current stream. The direct calls
(forward, backward, workspace) take kernel= to use either pair from one loaded library. The library
is built by `cmake --build build --target course_attention`.
"""
import ctypes
import os

from torch_common import DEFAULT_LIB

KERNELS = ("mma", "hopper", "auto")


def _signatures():
    p, i, f, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_uint64
    dims = [i, i, i, i, i, i]  # b, hq, hkv, nq, nk, d
    fwd = [p, p, p, p, p] + dims + [f, i, p]           # q, k, v, o, lse, dims, scale, causal, stream
    bwd = [p] * 10 + dims + [f, i, p]                  # q, k, v, o, d_o, lse, dq, dk, dv, ws, ...
    bwd_det = bwd + [i]                                # ..., stream, deterministic
    return {
        "course_flash_attention_mma_lse_f16": (fwd, i),
        "course_flash_attention_mma_lse_bf16": (fwd, i),
        "course_flash_attention_mma_backward_f16": (bwd, i),
        "course_flash_attention_mma_backward_bf16": (bwd, i),
        "course_flash_attention_wgmma_lse_f16": (fwd, i),
        "course_flash_attention_wgmma_lse_bf16": (fwd, i),
        "course_flash_attention_wgmma_backward_f16": (bwd_det, i),
        "course_flash_attention_wgmma_backward_bf16": (bwd_det, i),
        "course_flash_attention_lse": (fwd, i),
        "course_flash_backward": (bwd, i),
        "course_flash_attention_mma_backward_workspace_bytes": (dims, u),
        "course_flash_attention_wgmma_backward_workspace_bytes": (dims, u),
        "course_flash_backward_workspace_bytes": (dims, u),
        "course_backward_has": ([ctypes.c_char_p], i),
        "course_backward_last_error": ([], ctypes.c_char_p),
    }


class CourseAttention:
    """The loaded library and the autograd functions bound to it.

    kernel: which 16-bit pair attention() and the direct calls use by default ("mma", "hopper" or
    "auto", see the module docstring); deterministic: the Hopper backward's mode (ignored by the
    others, which are deterministic or not by construction)."""

    def __init__(self, path=None, kernel="mma", deterministic=False):
        import torch

        self.torch = torch
        if kernel not in KERNELS:
            raise ValueError(f"course attention: kernel must be one of {', '.join(KERNELS)}, not {kernel!r}")
        path = path or os.environ.get("COURSE_ATTENTION_LIB", DEFAULT_LIB)
        if not os.path.exists(path):
            raise RuntimeError(f"{path} not found (build it: cmake --build build --target course_attention)")
        self.lib = ctypes.CDLL(path)
        for name, (argtypes, restype) in _signatures().items():
            fn = getattr(self.lib, name, None)
            if fn is None:  # a library built before these names existed
                continue
            fn.argtypes, fn.restype = argtypes, restype
        if kernel == "auto":
            kernel = "hopper" if self.hopper_ready()[0] else "mma"
        self.kernel = kernel
        self.deterministic = bool(deterministic)
        self.function = _make_function(self)

    def has(self, name):
        return bool(self.lib.course_backward_has(name.encode()))

    def hopper_ready(self):
        """(True, "") when the Hopper pair (10 with L + 11) can run here, else (False, why not)."""
        if not (hasattr(self.lib, "course_flash_attention_wgmma_backward_f16")
                and self.has("flash_attention_wgmma_lse") and self.has("flash_attention_wgmma_backward")):
            return False, ("the library was built without 10_hopper_wgmma / 11_hopper_backward "
                           "(sm_90a only: configure with CUDA_ARCH including 90)")
        torch = self.torch
        if not torch.cuda.is_available():
            return False, "PyTorch sees no CUDA GPU"
        cc = tuple(torch.cuda.get_device_capability())
        if cc != (9, 0):
            return False, f"needs a Hopper GPU (compute capability 9.0), this one is {cc[0]}.{cc[1]}"
        return True, ""

    def call(self, name, *args):
        if getattr(self.lib, name)(*args) != 0:
            raise RuntimeError(f"{name}: {self.lib.course_backward_last_error().decode()}")

    def stream(self):
        return ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)

    def _kernel(self, kernel):
        kernel = kernel or self.kernel
        if kernel == "auto":
            kernel = "hopper" if self.hopper_ready()[0] else "mma"
        if kernel not in ("mma", "hopper"):
            raise ValueError(f"course attention: kernel must be one of {', '.join(KERNELS)}, not {kernel!r}")
        return kernel

    def names(self, dtype, kernel=None):
        """(forward, backward, workspace) C names for a dtype and a 16-bit pair ("mma", "hopper")."""
        torch = self.torch
        pair = "wgmma" if self._kernel(kernel) == "hopper" else "mma"
        if dtype == torch.float16:
            return (f"course_flash_attention_{pair}_lse_f16", f"course_flash_attention_{pair}_backward_f16",
                    f"course_flash_attention_{pair}_backward_workspace_bytes")
        if dtype == torch.bfloat16:
            return (f"course_flash_attention_{pair}_lse_bf16", f"course_flash_attention_{pair}_backward_bf16",
                    f"course_flash_attention_{pair}_backward_workspace_bytes")
        if dtype == torch.float32:
            return ("course_flash_attention_lse", "course_flash_backward", "course_flash_backward_workspace_bytes")
        raise TypeError(f"course attention: no kernels for {dtype} (float16, bfloat16 or float32)")

    def available(self, dtype, kernel=None):
        """True when both the forward and the backward of this dtype were built (and, for the
        Hopper pair, the GPU is a Hopper one)."""
        torch = self.torch
        if dtype in (torch.float16, torch.bfloat16):
            if self._kernel(kernel) == "hopper":
                return self.hopper_ready()[0]
            return self.has("flash_attention_mma_lse") and self.has("flash_attention_mma_backward")
        if dtype == torch.float32:
            return self.has("flash_attention_lse") and self.has("flash_backward")
        return False

    def _hopper_call(self, dtype, kernel):
        return dtype != self.torch.float32 and self._kernel(kernel) == "hopper"

    # Direct calls, outside autograd (compare_torch_backward.py times them one by one).
    def forward(self, q, k, v, causal=False, scale=None, kernel=None):
        """(o, lse) of the course's forward kernel."""
        torch = self.torch
        b, hq, nq, d = q.shape
        hkv, nk = k.shape[1], k.shape[2]
        o = torch.empty_like(q)
        lse = torch.empty((b, hq, nq), dtype=torch.float32, device=q.device)
        fwd, _, _ = self.names(q.dtype, kernel)
        self.call(fwd, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                  b, hq, hkv, nq, nk, d, float(scale or 0.0), int(bool(causal)), self.stream())
        return o, lse

    def workspace(self, q, k, kernel=None):
        b, hq, nq, d = q.shape
        hkv, nk = k.shape[1], k.shape[2]
        _, _, ws_name = self.names(q.dtype, kernel)
        nbytes = int(getattr(self.lib, ws_name)(b, hq, hkv, nq, nk, d))
        # float32 elements, at least one so that the pointer is never null
        return self.torch.empty(max(1, (nbytes + 3) // 4), dtype=self.torch.float32, device=q.device)

    def backward(self, q, k, v, o, lse, d_o, causal=False, scale=None, workspace=None, kernel=None,
                 deterministic=None):
        """(dq, dk, dv) of the course's backward kernel. `workspace` must come from workspace() with
        the same kernel; `deterministic` (default: the one given to load) is the Hopper kernel's."""
        torch = self.torch
        b, hq, nq, d = q.shape
        hkv, nk = k.shape[1], k.shape[2]
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        ws = workspace if workspace is not None else self.workspace(q, k, kernel)
        _, bwd, _ = self.names(q.dtype, kernel)
        args = [q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), d_o.data_ptr(), lse.data_ptr(),
                dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), ws.data_ptr(),
                b, hq, hkv, nq, nk, d, float(scale or 0.0), int(bool(causal)), self.stream()]
        if self._hopper_call(q.dtype, kernel):
            args.append(int(self.deterministic if deterministic is None else bool(deterministic)))
        self.call(bwd, *args)
        return dq, dk, dv

    def attention(self, q, k, v, causal=False, scale=None):
        """softmax(scale · Q Kᵀ + mask) V with the course's kernels, differentiable in q, k, v."""
        if q.dtype == self.torch.float32 and k.shape[1] != q.shape[1]:
            # day 06 · 02 is MHA only: give every query head its KV head (h reads h // G); autograd
            # sums the repeated heads' gradients back, as the 16-bit backward does itself.
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        return self.function.apply(q, k, v, bool(causal), scale)


def _make_function(ca):
    torch = ca.torch

    class CourseAttentionFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale):
            for name, t in (("q", q), ("k", k), ("v", v)):
                if not t.is_cuda or t.dim() != 4:
                    raise ValueError(f"course attention: {name} must be a 4-d CUDA tensor [B, H, N, D]")
                if t.dtype != q.dtype:
                    raise TypeError(f"course attention: {name} is {t.dtype}, q is {q.dtype}")
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            kernel = ca._kernel(None)  # the backward uses the pair the forward did
            o, lse = ca.forward(q, k, v, causal, scale, kernel=kernel)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.scale, ctx.kernel = causal, scale, kernel
            return o

        @staticmethod
        def backward(ctx, d_o):
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = ca.backward(q, k, v, o, lse, d_o.contiguous(), ctx.causal, ctx.scale, kernel=ctx.kernel)
            return dq, dk, dv, None, None

    return CourseAttentionFunction


def load(path=None, kernel="mma", deterministic=False):
    """The library with its autograd function; RuntimeError (with the reason) if it cannot load.
    kernel: "mma" (05 + 09, the default), "hopper" (10 + 11) or "auto" (hopper where it can run)."""
    return CourseAttention(path, kernel, deterministic)
