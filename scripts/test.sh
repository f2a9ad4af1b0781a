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
# As root with apt-get, start the SLURM test cluster (scripts/slurm-up.sh: 3 simulated nodes, or one node where
# namespaces cannot be made) for tests/test_slurm*.py and remove it on exit; if it cannot start, those tests skip.
# A SLURM that already answers is used as it is and left running. LAZYPHI_TEST_SLURM=0 starts none.
# (sinfo only where a configuration file exists: without one it asks DNS for a controller)
if [ "${LAZYPHI_TEST_SLURM:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
        && ! { [ -e "${SLURM_CONF:-/etc/slurm/slurm.conf}" ] && timeout 5 sinfo >/dev/null 2>&1; }; then
    trap 'bash scripts/slurm-down.sh || true' EXIT
    if bash scripts/slurm-up.sh; then
        # shellcheck disable=SC1091
        . "${LAZYPHI_SLURM_BASE:-/run/lazyphi-slurm}/cluster.env"  # SLURM_CONF, for tox to pass on
    else
        echo "test.sh: SLURM did not start (reason above); the SLURM tests will skip" >&2
    fi
fi
.venv-tox/bin/tox run -e lint,docs,test -- "$@"
