"""Check that the built documentation site has an entry for every public name of lazyphi's namespaces.

Usage: python scripts/check_api_docs.py SITE_DIR. Each name in a namespace's `__all__` must appear on its API
page as a heading anchor `lazyphi[.<module>...].<name>`; exits 1 listing the names that do not.
"""

import importlib
import re
import sys
from pathlib import Path

PAGES = {'math': 'api/math', 'backend': 'api/backend', 'dataclasses': 'api/dataclasses', 'nn': 'api/nn',
         'parallel': 'api/parallel', 'storage': 'api/storage'}


def missing_names(site: Path) -> dict[str, list[str]]:
    """Per namespace, the names of its `__all__` without an entry on its page."""
    result = {}
    for namespace, page in PAGES.items():
        html = (site / page / 'index.html').read_text()
        anchors = re.findall(r'id="lazyphi(?:\.\w+)*\.(\w+)"', html)
        module = importlib.import_module(f'lazyphi.{namespace}')
        missing = [n for n in module.__all__ if n not in set(anchors)]
        if missing:
            result[namespace] = missing
    return result


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: python scripts/check_api_docs.py SITE_DIR')
    problems = missing_names(Path(sys.argv[1]))
    for namespace, names in problems.items():
        print(f'docs/{PAGES[namespace]}.md lacks {len(names)} public names of lazyphi.{namespace}: {names}')
    sys.exit(1 if problems else 0)
