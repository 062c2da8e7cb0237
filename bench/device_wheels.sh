#!/usr/bin/env bash
# Fills bench/device-wheels/ (ignored by git) with what bench/device_scaling.sh needs on a machine
# without network whose image has Python 3.12 with pyarrow, numpy, numba, pandas, tokenizers, pyyaml,
# rich and lxml, but not the rest of ylink-data's dependencies (issue 40, point 4):
#   - cp312 manylinux wheels of what the e2e and minhash pipelines import, and their dependencies,
#     less the image's big packages (numpy, pyarrow, pandas, numba/llvmlite, tokenizers, lxml);
#   - jieba, built here from its sdist without its paddle-only model (it has no wheel);
#   - rensa, the per-core peer of minhash_dedup;
#   - passages.json.gz: the 8,000 real passages bench_dedup_verified.py's copy-heavy corpus is drawn
#     from (read from ../shared/data here, which the device lacks), so that the device builds the
#     same corpus.
# Run on the development machine (network to PyPI):  bash bench/device_wheels.sh
# Carry it with the run: run(carry=["bench/device-wheels"]) (it must stay under ~45 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=bench/device-wheels
PY=${PYTHON:-python3}
rm -rf "$DEST" && mkdir -p "$DEST"

# What `ylink run` imports for these pipelines (validating a config imports every op module: jinja2
# for sft), at pyproject.toml's versions, and the peer.
PACKAGES=(pydantic "fsspec>=2024.6" "warcio>=1.7" "zlib-ng>=0.5" "zstandard>=0.22" "charset-normalizer>=3"
          "webencodings>=0.5" "trafilatura>=2.0" "resiliparse>=0.15" "rjieba>=0.1" "ftfy>=6" "jinja2>=3.1" rensa)
"$PY" -m pip download --quiet --dest "$DEST" --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    "${PACKAGES[@]}"
# The image has these (and they are most of the bytes): leave them out.
for big in numpy pyarrow pandas numba llvmlite tokenizers lxml; do
    rm -f "$DEST"/"$big"-*.whl
done

# jieba: sdist only. Its wheel without lac_small (paddle's model, 9 MB, used only by paddle mode).
BUILD=$(mktemp -d)
"$PY" -m pip download --quiet --no-deps --no-binary=:all: --dest "$BUILD" "jieba>=0.42"
tar -xzf "$BUILD"/jieba-*.tar.gz -C "$BUILD"
SRC=$(find "$BUILD" -maxdepth 1 -type d -name 'jieba-*' | head -1)
rm -rf "$SRC"/jieba/lac_small
"$PY" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$DEST" "$SRC"
rm -rf "$BUILD"

# The copy-heavy corpus's passages (bench_scaling.py --export-passages).
"$PY" bench/bench_scaling.py --export-passages "$DEST/passages.json.gz"

ls -la "$DEST"
du -sh "$DEST"
