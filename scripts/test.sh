#!/usr/bin/env bash
# Sets up everything on a fresh machine (a private venv holding tox, then tox's own envs)
# and runs the linter, the documentation build (warnings are errors) and the whole test suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-tox/bin/tox ]; then
    python3 -m venv .venv-tox
    .venv-tox/bin/python -m pip install --quiet 'tox>=4'
fi
# As root with apt-get, start a one-node SLURM for tests/test_slurm.py and stop it on exit; if it cannot
# start the test skips. A SLURM that already answers is used as it is and left running.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! timeout 5 sinfo >/dev/null 2>&1; then
    trap 'bash scripts/slurm-down.sh || true' EXIT
    bash scripts/slurm-up.sh || echo "test.sh: SLURM did not start (reason above); tests/test_slurm.py will skip" >&2
fi
.venv-tox/bin/tox run -e lint,docs,test -- "$@"
