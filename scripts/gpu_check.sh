#!/usr/bin/env bash
# gpu_check.sh: on a CUDA machine, run the CUDA-marked tests and the GPU benchmark, print a short table.
#
# Needs: Python with torch (CUDA build) and triton; pytest for the tests part; no network, no nvFuser
# needed (nvFuser tests skip without it). Each part is bounded (20 minutes at most in all): the
# tests get 220 s, the benchmark 260 s (it skips what would start after its own 200 s budget), the
# AOT comparison (registers/spills recorded ahead of time vs the loaded kernels' n_regs/n_spills)
# 240 s, the achievable-rate check 180 s.
# Usage: scripts/gpu_check.sh            (PYTHON=python3.12 scripts/gpu_check.sh to pick the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Real GPU kernels: tests/conftest.py only defaults TRITON_INTERPRET to 1 when it is unset.
export TRITON_INTERPRET=0
start=$SECONDS

if ! $PY - <<'PYEOF'
import sys
import torch
if not torch.cuda.is_available():
    print("gpu_check: this machine has no CUDA device; nothing to check.")
    sys.exit(2)
import triton
print(f"gpu_check: {torch.cuda.get_device_name()} | python {sys.version.split()[0]} | torch {torch.__version__} "
      f"| triton {triton.__version__}")
PYEOF
then
    exit 2
fi

if ! $PY -c "import thundervis.compiler" 2>/dev/null; then
    echo "gpu_check: installing this checkout (editable, no dependencies, no network)"
    if ! $PY -m pip install -q --no-deps --no-build-isolation -e . ; then
        echo "gpu_check: could not install thundervis from $(pwd); install it, then rerun."
        exit 2
    fi
fi

echo
echo "== pytest -m cuda =="
tests_summary="not run (pytest is not installed)"
tests_rc=2
if $PY -c "import pytest" 2>/dev/null; then
    timeout 220 $PY -m pytest -q -m cuda -p no:cacheprovider -o addopts="" -rs tests 2>&1 | tee /tmp/gpu_check_pytest.txt | tail -n 30
    tests_rc=${PIPESTATUS[0]}
    tests_summary=$(grep -E "passed|failed|error|no tests ran" /tmp/gpu_check_pytest.txt | tail -n 1)
    [ "$tests_rc" = 124 ] && tests_summary="timed out after 220 s"
fi

echo
echo "== benchmarks/gpu_step_time.py =="
timeout 260 $PY benchmarks/gpu_step_time.py --budget 200
bench_rc=$?
[ "$bench_rc" = 124 ] && echo "gpu_step_time: timed out after 260 s"

echo
echo "== thundervis run --profile + rerun (device timings, one fusion re-run across executors) =="
rm -f /tmp/gpu_check.tvrec
timeout 150 $PY -m thundervis run --profile --capture-inputs --no-view --out /tmp/gpu_check.tvrec examples/train_gpt.py --steps 4 \
    && timeout 90 $PY -m thundervis rerun /tmp/gpu_check.tvrec fw_fusion_0 --executor all --inputs captured
rerun_rc=$?

echo
echo "== roofline vs measured (scripts/roofline_check.py) =="
timeout 60 $PY scripts/roofline_check.py /tmp/gpu_check.tvrec
roof_rc=$?

echo
echo "== AOT registers/spills vs the kernels Triton loaded (scripts/aot_check.py) =="
timeout 240 $PY scripts/aot_check.py
aot_rc=$?
[ "$aot_rc" = 124 ] && echo "aot_check: timed out after 240 s"

echo
echo "== achievable rates vs thundervis/gpu_rates.py (scripts/gpu_rates_check.py) =="
timeout 180 $PY scripts/gpu_rates_check.py
rates_rc=$?
[ "$rates_rc" = 124 ] && echo "gpu_rates_check: timed out after 180 s"

echo
echo "== summary =="
printf "%-22s %s\n" "cuda tests" "rc=$tests_rc  $tests_summary"
printf "%-22s %s\n" "gpu benchmark" "rc=$bench_rc"
printf "%-22s %s\n" "profile + rerun" "rc=$rerun_rc"
printf "%-22s %s\n" "aot vs loaded" "rc=$aot_rc"
printf "%-22s %s\n" "roofline vs measured" "rc=$roof_rc"
printf "%-22s %s\n" "rates vs table" "rc=$rates_rc"
printf "%-22s %s\n" "elapsed" "$((SECONDS - start)) s"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ] && [ "$rerun_rc" = 0 ] && [ "$aot_rc" = 0 ] && [ "$roof_rc" = 0 ] \
    && [ "$rates_rc" = 0 ]
