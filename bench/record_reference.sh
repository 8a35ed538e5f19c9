#!/usr/bin/env bash
# Records the reference measurements that the lessons' "What you should see" tables and
# docs/performance.md are generated from (tools/tables.py), on the GPU this runs on:
#
#   bench/results/reference/<name>.csv        make bench (every solution kernel, the roofs)
#   bench/results/reference/<name>-torch.csv  the same kernels next to PyTorch SDPA's backends
#
# Each file starts with `# key: value` lines (date, GPU, driver, CUDA, PyTorch, cuDNN) so that a
# table always says where its numbers come from. Commit both files, then `make tables`.
#
#   usage: bench/record_reference.sh <name> [bench|torch]...   (default: both; e.g. h100)
# One part fits in ten minutes on an H100 (bench ~4 min from a fresh build, torch ~4 min).
set -uo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: bench/record_reference.sh <name> [bench|torch]...}
shift
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(bench torch)
dest=bench/results/reference
mkdir -p "$dest"

meta() {
  echo "# date: $(date -u +%Y-%m-%d)"
  echo "# gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "# driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "# cuda: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  python3 - <<'PY' 2>/dev/null || echo "# pytorch: none"
import torch
print(f"# pytorch: {torch.__version__}")
print(f"# cudnn: {torch.backends.cudnn.version()}")
PY
}

status=0
for part in "${parts[@]}"; do
  case "$part" in
    bench)
      make bench BENCH_OUT=bench/results || status=1
      { meta; cat bench/results/bench.csv; } > "$dest/$name.csv"
      ;;
    torch)
      cmake --build build --target course_attention > /dev/null || status=1
      tmp=$(mktemp)
      for script in compare_torch compare_torch_day10 compare_torch_backward; do
        COURSE_TORCH_CSV=$tmp python3 "bench/$script.py" || status=1
      done
      { meta; cat "$tmp"; } > "$dest/$name-torch.csv"
      rm -f "$tmp"
      ;;
    *) echo "unknown part $part (bench or torch)"; exit 2 ;;
  esac
done
exit $status
