#!/usr/bin/env bash
# On a machine with a CUDA GPU: run the kernel tests on the GPU (real Triton, no
# interpreter) and the kernel benchmarks; collect everything in one folder.
#
#   benchmarks/gpu_check.sh [OUT_DIR]      # default: benchmarks/results/gpu-<UTC time>
#
# Exit status: 0 when the tests passed and the benchmarks ran; 1 otherwise.
# Needs a Python env with this package and triton installed (`pip install -e ".[dev]"`
# with a CUDA build of torch); PYTHON overrides the interpreter (default: .venv/bin/python
# when present, else python3).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/benchmarks/results/gpu-$(date -u +%Y%m%dT%H%M%SZ)}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
mkdir -p "$OUT"
cd "$ROOT"
unset TRITON_INTERPRET  # real kernels on the GPU

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  else
    echo "nvidia-smi unavailable"
  fi
  "$PYTHON" - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
try:
    import triton
    print("triton", triton.__version__)
except ImportError:
    print("triton not installed")
PY
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device visible to torch; nothing to check" | tee "$OUT/error.txt"
  exit 1
fi

status=0
echo "== kernel tests on the GPU"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/kernels \
  --junitxml="$OUT/kernel-tests.xml" 2>&1 | tee "$OUT/kernel-tests.txt"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

echo "== enforcement tests (the Triton-backend case runs the automaton on the GPU)"
"$PYTHON" -m pytest -q -p no:cacheprovider \
  tests/engine/constraints/test_enforcement.py 2>&1 | tee "$OUT/enforcement-tests.txt"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

echo "== kernel benchmarks"
"$PYTHON" benchmarks/kernels.py --device cuda --out "$OUT" 2>&1 | tee "$OUT/kernels-bench.txt"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1

echo "results in $OUT (status $status)"
exit $status
