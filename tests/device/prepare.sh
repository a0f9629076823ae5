#!/usr/bin/env bash
# Put ansible-core's and resolvelib's wheels (pure Python, for the device image's Python 3.12) into .devkit/whl,
# which tests/device/check.sh installs on the lent machine (it has no package index). Run from the repository root.
set -eu
mkdir -p .devkit/whl
PY=${PY:-.venv/bin/python}
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 -d .devkit/whl ansible-core==2.19.14 resolvelib==1.2.1
ls -l .devkit/whl
