"""The Python examples of docs/migration.md run as printed (each block is a whole program with its asserts), and
those of docs/coming-from-tensordict.md in sequence (each block goes on from the ones before)."""

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


TENSORDICT = Path(__file__).resolve().parents[1] / 'docs' / 'coming-from-tensordict.md'


def test_the_tensordict_page_runs_in_sequence(capsys):
    pytest.importorskip('torch')
    blocks = re.findall(r'^```python\n(.*?)^```$', TENSORDICT.read_text(), re.MULTILINE | re.DOTALL)
    assert blocks, 'docs/coming-from-tensordict.md has no ```python block'
    namespace = {'__name__': 'docs_example'}
    for code in blocks:
        exec(compile(code, f'{TENSORDICT}:example', 'exec'), namespace)
