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
.venv-tox/bin/tox run -e lint,docs,test -- "$@"
