#!/usr/bin/env bash
# Sets up everything on a fresh machine (a private venv with lazyphi and its dependencies) and runs the demo:
# a dataclass of dependent properties computed by parallel_compute on a local Dask cluster the demo starts.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-demo/bin/python ]; then
    python3 -m venv .venv-demo
fi
.venv-demo/bin/python -m pip install --quiet --upgrade pip
.venv-demo/bin/python -m pip install --quiet -e .
.venv-demo/bin/python examples/demo.py "$@"
