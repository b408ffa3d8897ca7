#!/usr/bin/env bash
# GPU benchmark and CPU/CUDA agreement tests on one CUDA GPU, within 10 minutes (sized for one H200).
#
#   bash scripts/gpu_benchmark.sh [OUTDIR]        (default OUTDIR: ${OUT:-gpu_results})
#
# 1. the tests marked gpu (tests/test_gpu.py: every simulator on CUDA in float32 and float64,
#    CPU/CUDA agreement; tests/test_bench.py's gpu test), about 1 minute, capped at 150 s;
# 2. `python -m rcteach bench --gpu-suite`: rcteach vs bare torch kernels at T = 1024 .. 16384
#    (float32, batch 1; spectra up to 4096, dense SVD/eigh cases up to 8192, the O(T^2) and
#    matrix-free paths to 16384), fitted exponents, depth growth, CUDA peak memory.  A time budget
#    (--budget, default 360 s) skips the sizes predicted to overrun; the whole script is capped at
#    9.5 minutes by `timeout`, and every finished row is already on disk (bench.csv.partial)
#    if it is killed.
# Writes OUTDIR/{env.txt, tests.txt, bench.txt, bench.csv}.
# Needs the package's Python environment: .venv/bin/python if present, else $PYTHON, else python3.
set -u
cd "$(dirname "$0")/.."
OUTDIR="${1:-${OUT:-gpu_results}}"
BUDGET="${BUDGET:-360}"
mkdir -p "$OUTDIR"
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && PY=.venv/bin/python
START=$(date +%s)
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
} > "$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"

timeout 150 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_bench.py \
  > "$OUTDIR/tests.txt" 2>&1
echo "gpu tests: exit $? ($(tail -n 1 "$OUTDIR/tests.txt"))"

LEFT=$(( 570 - ($(date +%s) - START) ))
timeout "$LEFT" "$PY" -m rcteach bench --gpu-suite --budget "$BUDGET" --csv "$OUTDIR/bench.csv" \
  > "$OUTDIR/bench.txt" 2>&1
echo "bench: exit $?"
cat "$OUTDIR/bench.txt"
echo "total $(( $(date +%s) - START )) s; results in $OUTDIR"
