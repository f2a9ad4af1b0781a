"""Cache keys follow the code: the class's functions and the user code they reach, not comments or libraries."""

import copy
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from dask.base import tokenize
from hypothesis import given
from hypothesis import strategies as st

from lazyphi import cache
from lazyphi.parallel._code import _Walk, code_token, survey_code, value_token

MODEL = '''
from dataclasses import dataclass

import numpy as np

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor

SCALE = {scale}
UNUSED = {unused}


def inner(x):
    return x * {inner}


def helper(x):
    return inner(x) + SCALE


@dataclass(frozen=True)
class Base:
    values: Tensor

    def base_method(self):
        return self.values + {base}


@dataclass(frozen=True)
class Model(Base):
    @cached_property
    def result(self) -> Tensor:
        {comment}
        return math.sin(helper(self.values)) + np.pi
'''
DEFAULTS = {'scale': 2.0, 'unused': 1, 'inner': 3, 'base': 1, 'comment': '# a comment'}


def _module(tmp_path, name: str = 'user_model', source: str = MODEL, **changes):
    """Module `name` built from `source` with `changes` to DEFAULTS, loaded fresh (not kept in sys.modules)."""
    path = tmp_path / f'{name}_{len(list(tmp_path.iterdir()))}.py'
    path.write_text(source.format(**{**DEFAULTS, **changes}))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _token(module) -> str:
    return tokenize(code_token(module.Model))


def test_the_token_is_the_same_for_the_same_code(tmp_path):
    assert _token(_module(tmp_path)) == _token(_module(tmp_path))


@pytest.mark.parametrize('change', [{'inner': 4}, {'scale': 2.5}, {'base': 2}])
def test_what_runs_changes_the_token(tmp_path, change):
    """A helper two calls away, a module constant it reads, a base class's method."""
    assert _token(_module(tmp_path, **change)) != _token(_module(tmp_path))


@pytest.mark.parametrize(('change', 'same'), [({'unused': 5}, True), ({'comment': '# another comment'}, True),
                                             ({'comment': 'unused_local = 1'}, False)])
def test_only_what_runs_counts(tmp_path, change, same):
    """A comment and a constant nothing reads are not code; a statement is."""
    assert (_token(_module(tmp_path, **change)) == _token(_module(tmp_path))) == same


def test_the_property_body_changes_the_token(tmp_path):
    edited = MODEL.replace('+ np.pi', '- np.pi')
    assert _token(_module(tmp_path, source=edited)) != _token(_module(tmp_path))


def _functions(token) -> dict:
    """{module.qualname: token} of every function token nested in `token`."""
    found = {}
    if isinstance(token, tuple):
        if token[:1] == ('function',):
            found[f'{token[1]}.{token[2]}'] = token
        for part in token:
            found.update(_functions(part))
    return found


def test_library_code_is_not_followed(tmp_path):
    functions = _functions(code_token(_module(tmp_path).Model))
    followed = {label for label, token in functions.items() if len(token) > 3}
    assert {'user_model.helper', 'user_model.inner', 'user_model.Model.result'} <= followed
    assert not [label for label in followed if label.startswith(('numpy', 'lazyphi'))]
    walk = _Walk('user_model')
    assert walk.mine('user_model.sub') and walk.mine('__main__')
    assert not walk.mine('numpy') and not walk.mine('json') and not walk.mine('lazyphi.math') and not walk.mine(None)


HELPERS = '''
FACTOR = {factor}


def scale(x):
    return x * FACTOR
'''
USER = '''
from dataclasses import dataclass

import user_helpers
from lazyphi.dataclasses import cached_property


def make_offset(amount):
    def offset(x):
        return x + amount
    return offset


SHIFT = make_offset({shift})


@dataclass(frozen=True)
class Model:
    values: float

    @cached_property
    def result(self):
        return SHIFT(user_helpers.scale(self.values))
'''


def test_functions_of_other_user_modules_and_closures_are_followed(tmp_path, monkeypatch):
    def token(factor, shift):
        helpers = _module(tmp_path, 'user_helpers', HELPERS, factor=factor)
        monkeypatch.setitem(sys.modules, 'user_helpers', helpers)  # a module of the project, outside site-packages
        return _token(_module(tmp_path, 'user_main', USER, shift=shift))

    assert token(2, 1) == token(2, 1)
    assert token(3, 1) != token(2, 1)  # a constant of the other module, read by its function
    assert token(2, 5) != token(2, 1)  # a value captured by a closure


RUN = '''
import sys
from dataclasses import dataclass
from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch
from lazyphi.parallel import parallel_compute


def helper(x):
    return x * FACTOR


@dataclass(frozen=True)
class Model:
    values: Tensor

    @cached_property
    def result(self) -> Tensor:
        return helper(self.values)


m = Model(math.arange(batch(example=6)) * 1.0)
parallel_compute(m, [Model.result], scheduler='sync', progress=False, cache_dir=sys.argv[1], memory_limit=1)
print(type(m.result).__name__, m.result.numpy('example').tolist())
'''


def test_editing_a_helper_computes_again_instead_of_reading_old_results(tmp_path):
    def run(factor):
        script = tmp_path / 'run.py'
        script.write_text(textwrap.dedent(RUN).replace('\ndef helper', f'\nFACTOR = {factor}\n\n\ndef helper'))
        out = subprocess.run([sys.executable, str(script), str(tmp_path / 'cache')], capture_output=True, text=True,
                             timeout=300, check=True)
        return out.stdout.split()

    assert run(2) == ['DiskTensor', '[0.0,', '2.0,', '4.0,', '6.0,', '8.0,', '10.0]']
    assert run(3)[1:] == ['[0.0,', '3.0,', '6.0,', '9.0,', '12.0,', '15.0]']
    assert len(cache.list_results(str(tmp_path / 'cache'))) == 2
    assert run(2)[1:3] == ['[0.0,', '2.0,']  # the first result is found again
    assert len(cache.list_results(str(tmp_path / 'cache'))) == 2


def test_the_token_is_the_same_in_another_process(tmp_path):
    (tmp_path / 'same_model.py').write_text(MODEL.format(**DEFAULTS))
    code = ('import sys; sys.path.insert(0, sys.argv[1]); import same_model\n'
            'from dask.base import tokenize\nfrom lazyphi.parallel._code import code_token\n'
            'print(tokenize(code_token(same_model.Model)))')
    tokens = {subprocess.run([sys.executable, '-c', code, str(tmp_path)], capture_output=True, text=True,
                             check=True).stdout for _ in range(2)}
    assert len(tokens) == 1


STATEFUL = '''
from dataclasses import dataclass

LOG = []
SETTINGS = (1, 2.5, 'fast')


@dataclass(frozen=True)
class Model:
    values: float

    def result(self):
        LOG.append(self.values)
        return self.values * SETTINGS[1]
'''


def test_state_the_code_changes_is_not_part_of_the_token(tmp_path):
    module = _module(tmp_path, 'stateful', STATEFUL)
    before = _token(module)
    module.Model(1.0).result()
    assert module.LOG == [1.0] and _token(module) == before  # a log the code appends to grows; the code is the same
    module.SETTINGS = (1, 3.0, 'fast')
    assert _token(module) != before  # a tuple of settings is a value the code reads
    module.LOG = ()
    assert _token(module) != before  # by its type, though


COUNTED = '''
import collections
from dataclasses import dataclass

COUNTS = collections.Counter()
CALLS = collections.Counter()


def count(counter, name):
    counter[name] += 1


@dataclass(frozen=True)
class Model:
    values: float

    def result(self):
        COUNTS['result'] += 1
        count(CALLS, 'result')
        return self.values * 2
'''


def test_counters_incremented_in_place_or_by_a_helper_are_state(tmp_path):
    module = _module(tmp_path, 'counted', COUNTED)
    before = _token(module)
    module.Model(1.0).result()
    assert module.COUNTS['result'] == 1 and module.CALLS['result'] == 1
    assert _token(module) == before  # `X[k] += 1`, and a helper doing it to its parameter, change state


NOTEBOOK = '''
from dataclasses import dataclass

from lazyphi import math
from lazyphi.math import Tensor
from lazyphi.parallel import MIXED, parallel_property


def weight(x):
    return x * 2


@dataclass(frozen=True)
class Model:
    values: Tensor

    @parallel_property(requires=MIXED)
    def total(self) -> Tensor:
        return math.sum(weight(self.values), 'example')
'''


def test_a_helper_redefined_in_a_session_is_traced_again(tmp_path):
    """A MIXED property replays its trace in the tasks: a trace of the old helper would give old results."""
    from lazyphi import math
    from lazyphi.math import batch
    from lazyphi.parallel import parallel_compute

    module = _module(tmp_path, 'notebook', NOTEBOOK)
    values = math.arange(batch(example=8)) * 1.0

    def total():
        m = module.Model(values)
        parallel_compute(m, [module.Model.total], scheduler='sync', progress=False, block_size=2)
        return float(m.total)

    assert total() == 56.0
    exec('def weight(x):\n    return x * 3', module.__dict__)  # the user runs an edited cell again
    assert total() == 84.0


VALUES_MODEL = '''
import threading
import types
from dataclasses import dataclass

NAMES = set(['alpha', 'beta', 'gamma', 'delta'])  # no braces: _module formats the source
TABLE = dict(b=[1, 2.5, None], a=(b'x', frozenset(['p', 'q'])))
CONFIG = types.SimpleNamespace(mode='fast', sizes=[3, 4])
OPS = dict(double=lambda x: x * 2)
LOCK = threading.Lock()


@dataclass(frozen=True)
class Model:
    values: float

    def result(self):
        with LOCK:
            return OPS['double'](self.values) * len(NAMES) + TABLE['b'][1] + CONFIG.sizes[0]
'''


def test_the_token_of_values_is_the_same_in_every_process(tmp_path):
    """Sets of strings iterate in another order under another PYTHONHASHSEED; the token does not change."""
    (tmp_path / 'values_model.py').write_text(VALUES_MODEL)
    code = ('import sys; sys.path.insert(0, sys.argv[1]); import values_model\n'
            'from dask.base import tokenize\nfrom lazyphi.parallel._code import code_token\n'
            'print(tokenize(code_token(values_model.Model)))')
    tokens = {subprocess.run([sys.executable, '-c', code, str(tmp_path)], capture_output=True, text=True, check=True,
                             env={**os.environ, 'PYTHONHASHSEED': seed}).stdout for seed in ('1', '2', '3')}
    assert len(tokens) == 1 and len(next(iter(tokens))) > 10


def test_functions_and_classes_made_by_exec_without_a_module_are_followed():
    def helper(factor):
        namespace = {}
        exec(f'def scale(x):\n    return x * {factor}', namespace)  # no __name__: scale.__module__ is None
        return namespace['scale']

    assert helper(2).__module__ is None
    assert value_token(helper(2)) == value_token(helper(2)) != value_token(helper(3))

    def config(factor):
        namespace = {}
        exec(f'class Config:\n    factor = {factor}', namespace)  # its module: builtins
        return namespace['Config']()

    assert value_token(config(2)) == value_token(config(2)) != value_token(config(3))


def test_cycles_and_repeats_are_tokenized(tmp_path):
    module = _module(tmp_path, 'values_model', VALUES_MODEL)
    ring = {'value': 1}
    ring['self'] = ring
    shared = [1.5]
    first, again = value_token([ring, shared, shared]), value_token([ring, shared, shared])
    assert first == again and ('cycle', 1) in first[1][0][1][1] and first[1][2] == ('repeat', 1)
    ring['value'] = 2
    assert value_token([ring, shared, shared]) != first
    survey = survey_code(module.Model)
    assert survey.unseen == ()  # a lock holds no value: no note
    module.NAMES.add('epsilon')
    assert survey_code(module.Model).token != survey.token


def test_objects_without_readable_state_are_reported(tmp_path):
    module = _module(tmp_path, 'values_model', VALUES_MODEL)
    with open(module.__file__) as handle:
        module.CONFIG.source = handle
        unseen = survey_code(module.Model).unseen
    assert len(unseen) == 1 and unseen[0].startswith('Model.result reads a _io.TextIOWrapper, which has no state')
    nested = None
    for _ in range(200):
        nested = [nested]
    module.CONFIG.source = nested
    assert survey_code(module.Model).unseen == ('Model.result reads a builtins.list nested over 150 levels deep, '
                                                'beyond which no key covers it',)


def test_environment_and_file_reads_are_reported(tmp_path):
    source = VALUES_MODEL.replace('with LOCK:', "with open(os.environ['TABLE']) as f:").replace(
        'import threading', 'import os\nimport threading')
    unseen = survey_code(_module(tmp_path, 'values_model', source).Model).unseen
    assert unseen == ('Model.result reads environment variables (environ)', 'Model.result may read files (open)')
    source = VALUES_MODEL.replace("OPS['double']", "globals()['OPS']['double']")
    assert survey_code(_module(tmp_path, 'values_model', source).Model).unseen == (
        'Model.result looks up names at run time (globals)',)


def _containers(inner):
    return st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3), inner,
                                                                                    max_size=4)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
                    _containers, max_leaves=12)


@given(JSON, JSON)
def test_equal_tokens_mean_equal_values(a, b):
    assert value_token(a) == value_token(copy.deepcopy(a))
    if value_token(a) == value_token(b):
        assert repr(a) == repr(b)
