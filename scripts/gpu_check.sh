#!/usr/bin/env bash
# gpu_check.sh: on a CUDA machine, run the CUDA-marked tests and the GPU benchmark, print a short table.
#
# Needs: Python with torch (CUDA build) and triton; pytest for the tests part; no network, no nvFuser
# needed (nvFuser tests skip without it). The whole check runs under one budget, GPU_CHECK_BUDGET
# seconds (default 420: one device call, with room left in a 15-minute session to run it again);
# in order, each part is capped: CUDA tests 170 s, the GPU step benchmark (--quick) 100 s, a
# profiled run and a one-fusion re-run 80 s, the roofline comparison 30 s, the AOT comparison
# (registers/spills recorded ahead of time vs the loaded kernels' n_regs/n_spills) 70 s, the
# achievable-rate check (--quick) 60 s. A part the budget no longer covers is skipped and says so.
# Usage: scripts/gpu_check.sh   (PYTHON=python3.12 to pick the interpreter, GPU_CHECK_BUDGET=600 for more time)
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

# One overall budget: a session's device time is short (15 minutes, machine start included), so
# the whole check must fit one call with room to run it again. Each part gets its own cap or what
# is left of the budget, whichever is less; a part with under 20 s left is skipped and says so.
budget=${GPU_CHECK_BUDGET:-420}
part_timeout() {  # $1: the part's own cap in seconds; prints the timeout to use (0: skip it)
    local left=$((budget - (SECONDS - start)))
    local t=$(( $1 < left ? $1 : left ))
    [ "$t" -lt 20 ] && t=0
    echo "$t"
}
skipped() { echo "$1: skipped, the ${budget} s budget is spent"; }

echo
echo "== pytest -m cuda =="
tests_summary="not run (pytest is not installed)"
tests_rc=2
t=$(part_timeout 170)
if [ "$t" = 0 ]; then
    skipped "cuda tests"; tests_summary="skipped (budget)"
elif $PY -c "import pytest" 2>/dev/null; then
    timeout "$t" $PY -m pytest -q -m cuda -p no:cacheprovider -o addopts="" -rs tests 2>&1 | tee /tmp/gpu_check_pytest.txt | tail -n 30
    tests_rc=${PIPESTATUS[0]}
    tests_summary=$(grep -E "passed|failed|error|no tests ran" /tmp/gpu_check_pytest.txt | tail -n 1)
    [ "$tests_rc" = 124 ] && tests_summary="timed out after $t s"
fi

echo
echo "== benchmarks/gpu_step_time.py --quick =="
bench_rc=2
t=$(part_timeout 100)
if [ "$t" = 0 ]; then
    skipped "gpu_step_time"
else  # its own budget a little under the timeout: it skips what would start after it
    timeout "$t" $PY benchmarks/gpu_step_time.py --quick --budget $((t - 15))
    bench_rc=$?
    [ "$bench_rc" = 124 ] && echo "gpu_step_time: timed out after $t s"
fi

echo
echo "== thundervis run --profile + rerun (device timings, one fusion re-run across executors) =="
rerun_rc=2
t=$(part_timeout 80)
if [ "$t" = 0 ]; then
    skipped "profile + rerun"
else
    rm -f /tmp/gpu_check.tvrec
    timeout "$t" $PY -m thundervis run --profile --capture-inputs --no-view --out /tmp/gpu_check.tvrec examples/train_gpt.py --steps 4 \
        && timeout 40 $PY -m thundervis rerun /tmp/gpu_check.tvrec fw_fusion_0 --executor all --inputs captured
    rerun_rc=$?
fi

echo
echo "== roofline vs measured (scripts/roofline_check.py) =="
roof_rc=2
t=$(part_timeout 30)
if [ "$t" = 0 ] || [ ! -f /tmp/gpu_check.tvrec ]; then
    skipped "roofline_check (or no recording)"
else
    timeout "$t" $PY scripts/roofline_check.py /tmp/gpu_check.tvrec
    roof_rc=$?
fi

echo
echo "== AOT registers/spills vs the kernels Triton loaded (scripts/aot_check.py) =="
aot_rc=2
t=$(part_timeout 70)
if [ "$t" = 0 ]; then
    skipped "aot_check"
else
    timeout "$t" $PY scripts/aot_check.py
    aot_rc=$?
    [ "$aot_rc" = 124 ] && echo "aot_check: timed out after $t s"
fi

echo
echo "== achievable rates vs thundervis/gpu_rates.py (scripts/gpu_rates_check.py --quick) =="
rates_rc=2
t=$(part_timeout 60)
if [ "$t" = 0 ]; then
    skipped "gpu_rates_check"
else
    timeout "$t" $PY scripts/gpu_rates_check.py --quick
    rates_rc=$?
    [ "$rates_rc" = 124 ] && echo "gpu_rates_check: timed out after $t s"
fi

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
