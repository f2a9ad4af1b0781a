"""Every page of docs/ and the README runs as a reader would run it: its ```python blocks in order, in one
namespace, in a fresh interpreter started in an empty directory.

A block that cannot run here (it needs a SLURM cluster, a user's own module, a path on a cluster's file system)
is preceded in the markdown by `<!-- skip: reason -->`, which the rendered page does not show. A line
`print(...)  # prints: TEXT` is checked: what that print writes must read TEXT, whitespace aside, where `...` in
TEXT stands for anything.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r'^(?P<indent>[ \t]*)```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$',
                   re.MULTILINE | re.DOTALL)
SKIP = re.compile(r'<!--\s*skip:(?P<reason>.*?)-->\s*$', re.DOTALL)
PRINTS = re.compile(r'^(?P<indent>\s*)(?P<stmt>print\(.*\))\s+# prints: (?P<expected>.*?)\s*$')

# Runs the blocks given on stdin as JSON [[label, code], ...]; `_doc_prints_` checks a `# prints:` line.
RUNNER = r'''
import contextlib, io, json, re, sys

class _doc_prints_:
    def __init__(self, expected, where):
        self.expected, self.where = expected, where
    def __enter__(self):
        self.out = io.StringIO()
        self.redirect = contextlib.redirect_stdout(self.out)
        self.redirect.__enter__()
    def __exit__(self, *exc):
        self.redirect.__exit__(*exc)
        printed = self.out.getvalue()
        sys.stdout.write(printed)
        if exc[0] is None:
            pattern = '.*'.join(re.escape(' '.join(part.split())) for part in self.expected.split('...'))
            if not re.fullmatch(pattern, ' '.join(printed.split()), re.DOTALL):
                raise AssertionError(f'{self.where} prints {printed.strip()!r}, its comment says {self.expected!r}')

namespace = {'__name__': '__main__', '_doc_prints_': _doc_prints_}
for label, code in json.load(sys.stdin):
    exec(compile(code, label, 'exec'), namespace)
'''


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """The page's ```python blocks: (line number, code, skip reason or None), in order."""
    text = path.read_text(encoding='utf-8')
    blocks = []
    for match in FENCE.finditer(text):
        if match['lang'] != 'python':
            continue
        line = text.count('\n', 0, match.start()) + 1
        skip = SKIP.search(text[:match.start()].rstrip('\n').rsplit('\n\n', 1)[-1])  # in the paragraph before
        if skip and not skip['reason'].strip():
            raise ValueError(f'{path}: the skip comment before line {line} gives no reason')
        indent = len(match['indent'])
        code = '\n'.join(row[indent:] for row in match['body'].splitlines())
        blocks.append((line, code, skip['reason'].strip() if skip else None))
    return blocks


def checked(code: str, where: str) -> str:
    """The code with each `print(...)  # prints: TEXT` line wrapped in a check of what it prints."""
    lines = []
    for number, line in enumerate(code.splitlines(), 1):
        match = PRINTS.match(line)
        if match:
            line = f"{match['indent']}with _doc_prints_({match['expected']!r}, '{where}:{number}'): {match['stmt']}"
        lines.append(line)
    return '\n'.join(lines) + '\n'


def test_the_skip_comment_is_found_and_outputs_are_checked(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('Text.\n\n```python\nx = 2\n```\n\n<!-- skip: needs a cluster -->\n```python\nboom()\n```\n\n'
                    '```python\nprint(x * 3)  # prints: 6\nprint(list(range(x * 9)))  # prints: [0, 1, ..., 17]\n'
                    '```\n')
    blocks = python_blocks(page)
    assert [(reason, code) for _, code, reason in blocks] == [
        (None, 'x = 2'), ('needs a cluster', 'boom()'),
        (None, 'print(x * 3)  # prints: 6\nprint(list(range(x * 9)))  # prints: [0, 1, ..., 17]')]
    assert run_page([(f'page.md:{line}', checked(code, 'page.md')) for line, code, skip in blocks if not skip],
                    tmp_path).returncode == 0
    wrong = checked('print(7)  # prints: 6', 'page.md')
    result = run_page([('page.md:1', wrong)], tmp_path)
    assert result.returncode != 0 and "page.md:1 prints '7', its comment says '6'" in result.stderr


def run_page(blocks: list[tuple[str, str]], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', RUNNER], input=json.dumps(blocks), cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=_environment())


def _environment() -> dict[str, str]:
    """This interpreter's environment, with the checkout first on the path (the pages import lazyphi)."""
    env = dict(os.environ, MPLBACKEND='Agg')
    env['PYTHONPATH'] = os.pathsep.join([str(ROOT)] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    return env


PAGES = [page for page in [*sorted((ROOT / 'docs').rglob('*.md')), ROOT / 'README.md'] if python_blocks(page)]


def test_the_pages_with_code_are_found():
    names = {str(page.relative_to(ROOT)) for page in PAGES}
    assert {'README.md', 'docs/getting-started.md', 'docs/index.md', 'docs/hpc.md', 'docs/migration.md'} <= names


@pytest.mark.slow
@pytest.mark.parametrize('page', PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_page_runs_as_a_reader_runs_it(page, tmp_path):
    name = str(page.relative_to(ROOT))
    blocks = [(f'{name}:{line}', checked(code, f'{name}:{line}')) for line, code, skip in python_blocks(page)
              if skip is None]
    result = run_page(blocks, tmp_path)
    assert result.returncode == 0, f'{name}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}'
