"""`python -m lazyphi`: the `lazyphi` command."""

import sys

from .cli import main

sys.exit(main())
