"""Names a namespace loads on first use (PEP 562) are not seen by the docs' module directive: each needs its own."""

import re
from pathlib import Path

import pytest

import lazyphi.parallel
import lazyphi.storage

DOCS = Path(__file__).resolve().parents[1] / 'docs' / 'api'


@pytest.mark.parametrize('namespace, page', [(lazyphi.parallel, 'parallel.md'), (lazyphi.storage, 'storage.md')])
def test_every_name_loaded_on_first_use_has_a_directive_on_its_api_page(namespace, page):
    documented = set(re.findall(r'^::: [\w.]+\.(\w+)$', (DOCS / page).read_text(), re.MULTILINE))
    missing = sorted(set(namespace._LAZY) - documented)
    assert not missing, f'docs/api/{page} has no "::: module.name" entry for {missing}'
