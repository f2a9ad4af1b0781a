"""The Python examples of docs/migration.md run as printed (each block is a whole program with its asserts)."""

import re
from pathlib import Path

import pytest

MIGRATION = Path(__file__).resolve().parents[1] / 'docs' / 'migration.md'
BLOCKS = re.findall(r'^```python\n(.*?)^```$', MIGRATION.read_text(), re.MULTILINE | re.DOTALL)


def test_the_guide_has_examples():
    assert BLOCKS, 'docs/migration.md has no ```python block'


@pytest.mark.parametrize('code', BLOCKS, ids=[f'block{i}' for i in range(len(BLOCKS))])
def test_an_example_runs_as_printed(code):
    exec(compile(code, f'{MIGRATION}:example', 'exec'), {'__name__': 'docs_example'})
