"""Every public function of `lazyphi.math` (and of its modules `extrapolation` and `perm`) that phiml also has takes
phiml's parameters: names, order and kinds.

Code written for `phiml.math` calls these functions with keyword arguments, so a renamed parameter breaks it.
The comparison runs when phiml is installed. Parameters phiml collects in `**kwargs` (passed on to its magic
methods) are not required; functions phiml declares as `(*args, **kwargs)` accept anything and are skipped.
"""

import inspect
import warnings

import pytest

from lazyphi import math

with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    phiml_math = pytest.importorskip('phiml.math')
    from phiml.math import extrapolation as phiml_extrapolation
    from phiml.math import perm as phiml_perm

# (lazyphi module, phiml module): lazyphi.math and its public submodules
MODULES = {'math': (math, phiml_math), 'extrapolation': (math.extrapolation, phiml_extrapolation),
           'perm': (math.perm, phiml_perm)}

# functions whose parameters still differ, owned by other parts of lazyphi (each entry fails when fixed)
OWNED_ELSEWHERE: dict[str, str] = {}


def _shared_functions() -> list:
    names = []
    for module, (lazy, phiml) in MODULES.items():
        for name in sorted(lazy.__all__):
            ours, theirs = getattr(lazy, name), getattr(phiml, name, None)
            if theirs is None or isinstance(ours, type) or isinstance(theirs, type) or not callable(ours):
                continue
            key = name if module == 'math' else f'{module}.{name}'
            names.append(pytest.param(key, marks=pytest.mark.xfail(strict=True, reason=OWNED_ELSEWHERE[key]))
                         if key in OWNED_ELSEWHERE else key)
    return names


def _function(key: str, which: int):
    module, _, name = key.rpartition('.')
    return getattr(MODULES[module or 'math'][which], name)


def _parameters(function) -> list:
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]


@pytest.mark.parametrize('name', _shared_functions())
def test_parameters_are_phimls(name):
    theirs = _parameters(_function(name, 1))
    if [(n, kind) for n, kind, _ in theirs] == [('args', inspect.Parameter.VAR_POSITIONAL)]:
        pytest.skip(f'phiml declares {name}(*args, **kwargs)')
    assert _parameters(_function(name, 0)) == theirs


def test_the_list_of_exceptions_names_shared_functions():
    shared = {p if isinstance(p, str) else p.values[0] for p in _shared_functions()}
    assert set(OWNED_ELSEWHERE) <= shared
