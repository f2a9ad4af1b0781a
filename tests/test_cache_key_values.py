"""Two programs sharing one cache_dir never reuse each other's results: the key covers every value the code reads.

Each variant is one class body whose property reads a value outside the instance (a global, a config object, a
closure, ...); the two programs differ only in that value (@F@: 2.0 in one, 3.0 in the other). Run one after the
other against one cache_dir, each must get its own values, and a program run again must reuse its own result
(no key churn: every block read from the cache, none computed). What no key can see (environment variables, files
a property opens) is noted by `plan`, and `cache_key=` is the remedy.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lazyphi import math
from lazyphi.math import batch
from lazyphi.parallel import parallel_compute, plan

PROGRAM = '''
import functools
from collections.abc import Callable
import os
import types
from dataclasses import dataclass

import numpy as np

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch

{setup}


@dataclass(frozen=True)
class Model:
    values: Tensor
{members}

    @cached_property
    def result(self) -> Tensor:
        return {expression}


def _set(instance, name, value):
    object.__setattr__(instance, name, value)
    return instance


def make():
    return {make}
'''
MAIN = '''

if __name__ == '__main__':
    import json
    import sys
    from lazyphi.parallel import parallel_compute
    m = make()
    p = parallel_compute(m, [Model.result], scheduler='sync', progress=False, cache_dir=sys.argv[1], memory_limit=1)
    print(json.dumps([m.result.numpy('example').tolist(), p.reused, p.resumable]))
'''

# name: (setup, class members, expression); every value differing between the programs is @F@
VARIANTS = {
    'module constant': ('FACTOR = @F@', '', 'self.values * FACTOR'),
    'module dict': ("SETTINGS = {'factor': @F@, 'name': 'run'}", '', "self.values * SETTINGS['factor']"),
    'module list': ('FACTORS = [1.0, @F@]', '', 'self.values * FACTORS[1]'),
    'nested containers': ("TABLE = [{'a': (1, [@F@])}]", '', "self.values * TABLE[0]['a'][1][0]"),
    'module set': ('ALLOWED = {1.0, @F@}', '', 'self.values * max(ALLOWED)'),
    'class dict': ('', "    SETTINGS = {'factor': @F@}", "self.values * self.SETTINGS['factor']"),
    'class list': ('', '    FACTORS = [@F@]', 'self.values * Model.FACTORS[0]'),
    'frozen dataclass config': ('@dataclass(frozen=True)\nclass Config:\n    factor: float\n\n\nCONFIG = Config(@F@)',
                                '', 'self.values * CONFIG.factor'),
    'SimpleNamespace config': ('CONFIG = types.SimpleNamespace(factor=@F@)', '', 'self.values * CONFIG.factor'),
    'helper instance state': ('class Scaler:\n    def __init__(self, f):\n        self.f = f\n\n'
                              '    def __call__(self, x):\n        return x * self.f\n\n\nSCALE = Scaler(@F@)',
                              '', 'SCALE(self.values)'),
    'helper instance code': ('class Scaler:\n    def __call__(self, x):\n        return x * @F@\n\n\nSCALE = Scaler()',
                             '', 'SCALE(self.values)'),
    'slots object': ("class Config:\n    __slots__ = ('factor',)\n\n    def __init__(self, f):\n        self.factor = f"
                     "\n\n\nCONFIG = Config(@F@)", '', 'self.values * CONFIG.factor'),
    'bound method': ('class Scaler:\n    def __init__(self, f):\n        self.f = f\n\n'
                     '    def apply(self, x):\n        return x * self.f\n\n\nSCALE = Scaler(@F@).apply',
                     '', 'SCALE(self.values)'),
    'lambda in a dict': ("OPS = {'scale': lambda x: x * @F@}", '', "OPS['scale'](self.values)"),
    'closure cell': ('def make_scale(f):\n    def scale(x):\n        return x * f\n    return scale\n\n\n'
                     'SCALE = make_scale(@F@)', '', 'SCALE(self.values)'),
    'default argument': ('def scale(x, f=@F@):\n    return x * f', '', 'scale(self.values)'),
    'global read by a helper': ('F = @F@\n\n\ndef scale(x):\n    return x * F', '', 'scale(self.values)'),
    'functools.partial': ('def mul(x, f):\n    return x * f\n\n\nSCALE = functools.partial(mul, f=@F@)', '',
                          'SCALE(self.values)'),
    'NumPy array': ('WEIGHTS = np.array([@F@])', '', 'self.values * float(WEIGHTS[0])'),
    'Tensor': ('WEIGHT = math.tensor(@F@)', '', 'self.values * WEIGHT'),
    'config field holding a helper': ('class Scaler:\n    def __init__(self, f):\n        self.f = f\n\n'
                                      '    def __call__(self, x):\n        return x * self.f',
                                      '    scaler: Callable = None', 'self.scaler(self.values)'),
    'class dict a classmethod updates': ('', "    SETTINGS = {'factor': 1.0}\n\n    @classmethod\n    def "
                                             "configure(cls, factor):\n        cls.SETTINGS.update(factor=factor)",
                                         "self.values * self.SETTINGS['factor']"),
    'config with a cached property': ('@dataclass(frozen=True)\nclass Config:\n    factor: float\n\n'
                                      '    @cached_property\n    def double(self):\n        return self.factor * 2'
                                      '\n\n\nCONFIG = Config(@F@)', '', 'self.values * (CONFIG.double / 2)'),
    'attribute set outside the fields': ('', '', 'self.values * self.factor'),
    'nested dataclass in a data field': ('@dataclass(frozen=True)\nclass Part:\n    values: Tensor\n\n'
                                         '    def scaled(self):\n        return self.values * @F@',
                                         '    part: Part = None', 'self.part.scaled()'),
}
MAKE = {'config field holding a helper': 'Model(math.arange(batch(example=4)) * 1.0, Scaler(@F@))',
        'class dict a classmethod updates': 'Model.configure(@F@) or Model(math.arange(batch(example=4)) * 1.0)',
        'attribute set outside the fields': "_set(Model(math.arange(batch(example=4)) * 1.0), 'factor', @F@)",
        'nested dataclass in a data field': 'Model(math.arange(batch(example=4)) * 1.0, '
                                            'Part(math.arange(batch(example=4)) * 1.0))'}
VALUES = {2.0: [0.0, 2.0, 4.0, 6.0], 3.0: [0.0, 3.0, 6.0, 9.0]}


def _source(name: str, factor: float, main: bool = False) -> str:
    setup, members, expression = {**VARIANTS, **UNSEEN}[name][:3]
    make = MAKE.get(name, 'Model(math.arange(batch(example=4)) * 1.0)')
    text = PROGRAM.format(setup=setup, members=members, expression=expression, make=make) + (MAIN if main else '')
    return text.replace('@F@', repr(factor))


def _run_in_process(tmp_path, name: str, factor: float, cache, **kwargs):
    """Load the program as a fresh module `hostile_model` and compute; its values, blocks reused and resumable."""
    path = tmp_path / f'program_{len(list(tmp_path.glob("program_*")))}.py'
    path.write_text(_source(name, factor))
    namespace = {'__name__': 'hostile_model'}
    exec(compile(path.read_text(), str(path), 'exec'), namespace)
    m = namespace['make']()
    p = parallel_compute(m, [namespace['Model'].result], scheduler='sync', progress=False, cache_dir=str(cache),
                         memory_limit=1, **kwargs)
    return m.result.numpy('example').tolist(), p.reused, p.resumable


@pytest.mark.parametrize('name', list(VARIANTS))
def test_programs_reading_other_values_do_not_share_results(tmp_path, name):
    cache = tmp_path / 'cache'
    first = _run_in_process(tmp_path, name, 2.0, cache)
    assert first[:2] == (VALUES[2.0], 0) and first[2] > 0
    assert _run_in_process(tmp_path, name, 3.0, cache)[:2] == (VALUES[3.0], 0)  # computed, not the first's
    assert _run_in_process(tmp_path, name, 2.0, cache) == (VALUES[2.0], first[2], first[2])  # all blocks reused
    assert _run_in_process(tmp_path, name, 3.0, cache) == (VALUES[3.0], first[2], first[2])


SUBPROCESS_VARIANTS = ['module dict', 'frozen dataclass config', 'lambda in a dict', 'closure cell',
                       'config field holding a helper', 'nested dataclass in a data field']


@pytest.mark.slow
@pytest.mark.parametrize('name', SUBPROCESS_VARIANTS)
def test_separate_programs_do_not_share_results(tmp_path, name):
    """Each program a process of its own, as `python program.py` (its module is __main__)."""
    def run(factor):
        script = tmp_path / f'program_{factor}.py'
        script.write_text(_source(name, factor, main=True))
        out = subprocess.run([sys.executable, str(script), str(tmp_path / 'cache')], capture_output=True, text=True,
                             timeout=300, check=True)
        return tuple(json.loads(out.stdout.splitlines()[-1]))

    first = run(2.0)
    assert first[:2] == (VALUES[2.0], 0)
    assert run(3.0)[:2] == (VALUES[3.0], 0)
    assert run(2.0) == (VALUES[2.0], first[2], first[2])  # the same program in a new process: the same key
    assert run(3.0) == (VALUES[3.0], first[2], first[2])


@pytest.mark.slow
def test_programs_run_at_once_get_their_own_values(tmp_path):
    """The issue's case: both programs at the same time on one cache_dir."""
    scripts = []
    for factor in (2.0, 3.0):
        scripts.append(tmp_path / f'program_{factor}.py')
        scripts[-1].write_text(_source('module dict', factor, main=True))
    running = [subprocess.Popen([sys.executable, str(script), str(tmp_path / 'cache')], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for script in scripts]
    outputs = [process.communicate(timeout=300) for process in running]
    assert [process.returncode for process in running] == [0, 0], [err for _, err in outputs]
    assert [json.loads(out.splitlines()[-1])[0] for out, _ in outputs] == [VALUES[2.0], VALUES[3.0]]


UNSEEN = {
    'environment variable': ('', '', "self.values * float(os.environ['HOSTILE_FACTOR'])",
                             'reads environment variables (environ)'),
    'data file': ("DATA = os.path.join(os.environ['HOSTILE_DIR'], 'factor.npy')", '',
                  'self.values * float(np.load(DATA)[0])', 'may read files (load)'),
}


@pytest.mark.parametrize('name', list(UNSEEN))
def test_what_no_key_sees_is_noted_and_cache_key_separates_programs(tmp_path, monkeypatch, name):
    reads = UNSEEN[name][3]
    monkeypatch.setenv('HOSTILE_DIR', str(tmp_path))
    cache = tmp_path / 'cache'

    def run(factor, remedy=None):
        monkeypatch.setenv('HOSTILE_FACTOR', repr(factor))
        np.save(tmp_path / 'factor.npy', np.array([factor]))
        kwargs = {} if remedy is None else {'cache_key': remedy()}
        return _run_in_process(tmp_path, name, factor, cache, **kwargs)[0]

    namespace = {'__name__': 'hostile_model'}
    exec(_source(name, 2.0), namespace)
    notes = plan(namespace['make'](), [namespace['Model'].result], cache_dir=str(cache)).notes
    assert [n for n in notes if n.startswith(f'Model.result {reads}') and 'cache_key=' in n and 'config field' in n]
    assert not [n for n in plan(namespace['make'](), [namespace['Model'].result]).notes if 'cache key' in n]

    assert run(2.0) == VALUES[2.0]
    assert run(3.0) == VALUES[2.0]  # the hazard the note names: the key cannot tell the programs apart
    remedy = {'environment variable': lambda: os.environ['HOSTILE_FACTOR'],  # the value, or the file's content
              'data file': lambda: np.load(tmp_path / 'factor.npy')}[name]
    for factor in (2.0, 3.0, 2.0):
        assert run(factor, remedy) == VALUES[factor]


STATE = '''
from dataclasses import dataclass

from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor

LOG = []
MEMO = {}


class Stats:
    calls = 0


STATS = Stats()


@dataclass(frozen=True)
class Model:
    values: Tensor
    HISTORY = []

    @cached_property
    def result(self) -> Tensor:
        LOG.append(1)
        MEMO[len(LOG)] = self.values
        STATS.calls = len(LOG)
        self.HISTORY.append(len(LOG))
        return self.values * 2.0
'''


def test_state_the_code_changes_does_not_churn_keys(tmp_path):
    """A log, a memo and a counter the property itself writes are state, not settings: the key stays."""
    namespace = {'__name__': 'stateful_model'}
    exec(textwrap.dedent(STATE), namespace)
    cache = str(tmp_path / 'cache')
    m = namespace['Model'](math.arange(batch(example=4)) * 1.0)
    first = parallel_compute(m, [namespace['Model'].result], scheduler='sync', progress=False, cache_dir=cache,
                             memory_limit=1)
    assert namespace['LOG'] and namespace['MEMO'] and namespace['STATS'].calls and namespace['Model'].HISTORY
    again = namespace['Model'](math.arange(batch(example=4)) * 1.0)
    second = parallel_compute(again, [namespace['Model'].result], scheduler='sync', progress=False, cache_dir=cache,
                              memory_limit=1)
    assert first.reused == 0 and second.reused == second.resumable > 0
    assert again.result.numpy('example').tolist() == VALUES[2.0]


ALIASED = '''
from dataclasses import dataclass

from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor

STORE = {}


@dataclass(frozen=True)
class Model:
    values: Tensor

    @cached_property
    def result(self) -> Tensor:
        store = STORE  # through a local alias: the scan does not see the store, so STORE stays in the key
        store[len(store)] = self.values  # the trace puts a tracer there, whose content no key can read
        return self.values * 2.0
'''


def test_state_changed_through_an_alias_costs_a_recomputation_not_an_error(tmp_path):
    namespace = {'__name__': 'aliased_model'}
    exec(ALIASED, namespace)
    cache = str(tmp_path / 'cache')
    for _ in range(2):
        m = namespace['Model'](math.arange(batch(example=4)) * 1.0)
        p = parallel_compute(m, [namespace['Model'].result], scheduler='sync', progress=False, cache_dir=cache,
                             memory_limit=1)
        assert m.result.numpy('example').tolist() == VALUES[2.0] and p.reused == 0
    assert [n for n in p.notes if n.startswith('Model.result reads a lazyphi') and 'no state a key can cover' in n]
