#!/usr/bin/env bash
# Issue 40's scaling measurement on a many-core machine without network, in one command of well under
# 8 minutes: a venv over the image's Python 3.12 (--system-site-packages: its pyarrow, numpy, numba,
# pandas, tokenizers, pyyaml, rich, lxml) with the wheels of bench/device-wheels/ (bench/device_wheels.sh
# fills it on a machine with network; carry it with the working tree), then bench/bench_scaling.py on
# 1, 2, 4, 8 and 16 CPUs (those the machine has) for both workloads, the model for 4-64 workers, and
# rensa's loop beside the 1-CPU minhash run. Results under $OUT (default bench/_out/device):
# scaling.md (the tables), scaling.json (every run's wall, CPU, memory and stats timing), scaling.log,
# machine.txt, the runs' logs.
#
# Sizes, to fit the device's time: e2e on 32 files each the bundled crawl twice (118 MB; the issue's
# run had it 4 times, 235 MB), minhash on the issue's 200,000 documents of the copy-heavy corpus.
#   OUT=/tmp/x PYTHON=python3 bash bench/device_scaling.sh
# To try it on fewer cores and less data: CPUS=1,2 E2E_FILES=4 E2E_COPIES=1 DOCS=20000.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/bench/_out/device}
PY=${PYTHON:-python3}
WHEELS=$REPO/bench/device-wheels
VENV=${VENV:-/tmp/ylink-device-venv}
mkdir -p "$OUT"
started=$(date +%s)
say() { echo "[$(( $(date +%s) - started ))s] $*" | tee -a "$OUT/steps.txt"; }

{ uname -a; "$PY" --version; nproc; lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|Thread|MHz|L3"; free -g; } > "$OUT/machine.txt" 2>&1
say "machine: $(nproc) CPUs; venv"
NEEDED=(pydantic fsspec warcio zlib-ng zstandard charset-normalizer webencodings trafilatura lxml_html_clean
        resiliparse rjieba jieba ftfy jinja2 rensa)
export PYTHONPATH=$REPO
if "$PY" -m venv --system-site-packages "$VENV" > "$OUT/venv.log" 2>&1 && [ -x "$VENV/bin/pip" ]; then
    "$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELS" "${NEEDED[@]}" > "$OUT/pip.log" 2>&1 \
        || { say "pip install failed"; tail -20 "$OUT/pip.log"; exit 1; }
else  # an image without ensurepip: the wheels into a folder on the image's own Python's path
    say "no venv ($(tail -1 "$OUT/venv.log")): installing into $VENV/site"
    mkdir -p "$VENV/bin"
    # every wheel there, without resolving (the image's numpy, pyarrow... are the dependencies it lacks)
    "$PY" -m pip install --quiet --no-index --no-deps --target "$VENV/site" "$WHEELS"/*.whl > "$OUT/pip.log" 2>&1 \
        || { say "pip install failed"; tail -20 "$OUT/pip.log"; exit 1; }
    ln -sf "$(command -v "$PY")" "$VENV/bin/python"
    export PYTHONPATH=$REPO:$VENV/site
fi
"$VENV/bin/python" -c "import pydantic, trafilatura, resiliparse, rjieba, jieba, rensa, numba, pyarrow, warcio; \
from ylink_data.ops import load_ops; load_ops(); import ylink_data.engine.runner, ylink_data.cli" || { say "imports failed"; exit 1; }

# Compiled once before anything is timed: Python 3.12's bytecode of the checkout, and numba's loops
# (cached beside their module; compiling them takes seconds, loading them a fraction of one).
"$VENV/bin/python" -m compileall -q ylink_data bench > /dev/null
"$VENV/bin/python" -c "from ylink_data.text.dedup import kernels; kernels.warm()" || { say "numba warm-up failed"; exit 1; }
say "compiled"

have=$(nproc)
CPUS=${CPUS:-}
if [ -z "$CPUS" ]; then
    CPUS=1  # then the largest first: if the time runs out, the counts that matter most are measured
    for n in 16 8 4 2; do [ "$n" -le "$have" ] && CPUS="$CPUS,$n"; done
fi
say "bench_scaling.py --cpus $CPUS"
"$VENV/bin/python" bench/bench_scaling.py --cpus "$CPUS" --workloads e2e,minhash --e2e-files "${E2E_FILES:-32}" \
    --e2e-copies "${E2E_COPIES:-2}" --docs "${DOCS:-200000}" --rensa --passages "$WHEELS/passages.json.gz" --deadline-s "${DEADLINE_S:-330}" \
    --json "$OUT/scaling.json" > "$OUT/scaling.md" 2> "$OUT/scaling.log"
status=$?
say "bench_scaling.py exit $status"
cp bench/_out/scaling/*.log "$OUT/" 2>/dev/null
cat "$OUT/scaling.md"
[ $status -eq 0 ] || tail -30 "$OUT/scaling.log"
exit $status
