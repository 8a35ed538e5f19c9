#!/usr/bin/env python3
"""The ptxas contract of the tensor-core solutions (CTest label `ptxas`, run by make check
wherever nvcc exists, so CI too).

ptxas reports, with -Xptxas -v, the registers, stack frame and spills of every kernel it
assembles, and it warns with an advisory (C7508, C7510 … C7514) when it has to serialize the
wgmma instructions of a kernel or ignore a setmaxnreg. Neither shows in a test: the results stay
right and only the speed drops. So this compiles each tensor-core solution for the targets its
exercise runs on and fails on

  * any C75xx advisory (wgmma serialized, setmaxnreg ignored, …),
  * any spill (bytes spill stores or loads above 0),

and prints the registers of every instantiation (mangled kernel names shortened to their
template arguments), writing them to <build>/ptxas-registers.csv so that a change that moves
them can be compared across builds.

    python3 tools/ptxas_contract.py --nvcc /usr/local/cuda/bin/nvcc --out build/ptxas-registers.csv
"""
import argparse
import csv
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# (solution, the -gencode targets its exercise is built for on the GPUs that run it)
SOURCES = [
    ("solutions/day10-optimizations/04_fp16_wmma.cu", ["arch=compute_80,code=sm_80"]),
    ("solutions/day10-optimizations/05_fp16_mma.cu", ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90"]),
    ("solutions/day10-optimizations/09_fp16_mma_backward.cu",
     ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90"]),
    ("solutions/day10-optimizations/10_hopper_wgmma.cu", ["arch=compute_90a,code=sm_90a"]),
    ("solutions/day10-optimizations/11_hopper_backward.cu", ["arch=compute_90a,code=sm_90a"]),
]
INCLUDES = ["common", "day10-optimizations"]
ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
USED = re.compile(r"Used (\d+) registers")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
ADVISORY = re.compile(r"(C75\d\d)\b.*|Potential Performance Loss.*")


# Spills that are known and accepted, in bytes stored: (solution, kernel, head dim) -> the most
# that may spill. 09's D = 128 backward keeps dK, dV and dQ's partial products of a 64-row tile in
# registers at the 255 cap (four or eight warps): ptxas moves 16–24 bytes through the stack. A
# spill above the stated bytes, or anywhere else, fails the contract.
ALLOWED_SPILLS = {("09_fp16_mma_backward", "bwd_mma_kernel", "128"): 24}


def kernel_name(name):
    """The kernel's own name inside a mangled one: the nested name's parts are length-prefixed
    (`_ZN` 56_GLOBAL__N__… 14bwd_mma_kernel I…), read one after the other."""
    pos = name.find("_ZN") + 3 if "_ZN" in name else (2 if name.startswith("_Z") else 0)
    last = name[:40]
    while pos < len(name):
        m = re.match(r"\d+", name[pos:])
        if not m:
            break
        n, pos = int(m.group(0)), pos + len(m.group(0))
        last, pos = name[pos:pos + n], pos + n
    return last


def short(name):
    """`_ZN…hopper_flash_kernelINS_12HopperConfigI…Li128ELi2ELb1ELb1EEE…` -> the readable part."""
    kernel = kernel_name(name)
    args = re.findall(r"Li(\d+)E|Lb([01])E|(__half|__nv_bfloat16)", name)
    parts = [a or ("true" if b == "1" else "false") if (a or b) else c for a, b, c in args]
    return f"{kernel}<{', '.join(parts)}>" if parts else kernel


def compile_one(nvcc, source, gencode):
    cmd = [nvcc, "-c", "-o", "/dev/null", "-std=c++17", "-O3", "-lineinfo", "-Xptxas", "-v",
           f"-gencode={gencode}"] + [f"-I{ROOT / i}" for i in INCLUDES] + [str(ROOT / source)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--out", default=str(ROOT / "build" / "ptxas-registers.csv"))
    args = ap.parse_args()
    rows, problems = [], []
    for source, gencodes in SOURCES:
        for gencode in gencodes:
            rc, log = compile_one(args.nvcc, source, gencode)
            if rc != 0:
                problems.append(f"{source} ({gencode}): nvcc failed:\n{log[-2000:]}")
                continue
            current = None
            for line in log.splitlines():
                e = ENTRY.search(line)
                if e:
                    current = {"source": source, "target": e.group(2), "kernel": short(e.group(1)),
                               "registers": "", "stack": "", "spill_stores": "", "spill_loads": ""}
                    rows.append(current)
                    continue
                a = ADVISORY.search(line) if "warning" in line or "Performance" in line else None
                if a:
                    where = f"{current['kernel']} ({current['target']})" if current else gencode
                    problems.append(f"{source}: {where}: ptxas advisory: {line.strip()}")
                if current is None:
                    continue
                u, s = USED.search(line), SPILL.search(line)
                if u:
                    current["registers"] = u.group(1)
                if s:
                    current["stack"], current["spill_stores"], current["spill_loads"] = s.groups()
                    allowed = next((b for (src, k, d), b in ALLOWED_SPILLS.items() if src in source
                                    and current["kernel"].startswith(k + "<") and f", {d}," in current["kernel"]), 0)
                    if int(s.group(2)) > allowed or int(s.group(3)) > allowed:
                        problems.append(f"{source}: {current['kernel']} ({current['target']}) spills: "
                                        f"{s.group(2)} bytes stored, {s.group(3)} loaded")
    width = max((len(r["kernel"]) for r in rows), default=10)
    for r in rows:
        print(f"  {r['target']:7s} {r['kernel']:{width}s} {r['registers']:>4s} registers, "
              f"stack {r['stack'] or '?'} B, spills {r['spill_stores'] or '?'}/{r['spill_loads'] or '?'} B")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["source", "target", "kernel", "registers", "stack", "spill_stores",
                                          "spill_loads"])
        w.writeheader()
        w.writerows(rows)
    for p in problems:
        print(f"FAILED: {p}")
    print(f"ptxas contract: {len(rows)} kernel instantiations of {len(SOURCES)} tensor-core solutions, "
          f"{len(problems)} problem(s) (advisories or spills); registers in {out}")
    return 1 if problems or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
