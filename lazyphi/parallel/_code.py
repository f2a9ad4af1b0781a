"""The code a class's results depend on, as a token for cache keys.

A result found on disk must not be reused after the code computing it changed. `code_token(cls)` covers
the bytecode of every function of the class (properties, helper methods, decorated or not) and of the
functions and classes of the user's own code they reach through global names, closures and user
modules, recursively, plus the immutable module-level values they read (numbers, strings, arrays,
tuples of those; lists and dicts there mostly hold state, a log or a memo, and are left out).
Bytecode, not source: editing a comment or the layout keeps the token, editing what runs changes it.
Code of installed packages, the standard library and lazyphi is not followed: upgrading those does
not invalidate results.

"The user's own code" is any module in the class's top-level package, `__main__` (scripts,
notebooks), and any module whose file lies outside the interpreter's standard library and
site-packages directories (a project checked out or installed in editable mode).
"""

from __future__ import annotations

import enum
import functools
import inspect
import os
import site
import sys
import sysconfig
from types import CodeType, FunctionType, ModuleType

import numpy as np

from ..backend import NUMPY
from ..math import Tensor
from ..math.kinds import content_hash

_SCALARS = (type(None), bool, int, float, complex, str, bytes, enum.Enum, np.generic)


def code_token(cls: type) -> tuple:
    """A deterministic, hashable description of the code behind the properties of `cls` (see the module)."""
    walk = _Walk(cls.__module__.split('.')[0])
    walk.add_class(cls)
    return tuple(walk.parts)


class _Walk:
    """One traversal from a class to the user code it reaches; `parts` collects what was found, in order."""

    def __init__(self, package: str):
        self.package = package
        self.parts: list = []
        self.seen: set[int] = set()

    def add_class(self, cls: type) -> None:
        if id(cls) in self.seen:
            return
        self.seen.add(id(cls))
        self.parts.append(('class', cls.__module__, cls.__qualname__))
        for base in cls.__mro__[1:]:
            if self.mine(base.__module__):
                self.add_class(base)
        for name, value in sorted(vars(cls).items()):
            function = _function_of(value)
            if function is not None:
                self.add_function(function, name)
            elif not name.startswith('__'):
                token = _constant(value)
                if token is not None:
                    self.parts.append(('attribute', name, token))

    def add_function(self, function: FunctionType, label: str) -> None:
        if id(function) in self.seen:
            return
        self.seen.add(id(function))
        code = function.__code__
        self.parts.append(('function', label, _code(code), _constant(function.__defaults__),
                           _constant(function.__kwdefaults__)))
        names = _global_names(code)
        for name in sorted(names):
            if name in function.__globals__:
                self.add_global(name, function.__globals__[name], names)
        for cell in function.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # a cell not yet filled
                continue
            self.add_global('<closure>', contents, names)

    def add_global(self, name: str, value, names: frozenset) -> None:
        function = _function_of(value)
        if function is not None:
            if self.mine(function.__module__):
                self.add_function(function, f'{function.__module__}.{function.__qualname__}')
        elif isinstance(value, type):
            if self.mine(value.__module__):
                self.add_class(value)
        elif isinstance(value, ModuleType):
            if id(value) not in self.seen and self.mine(value.__name__):
                self.seen.add(id(value))
                for attribute in sorted(names & set(vars(value))):
                    self.add_global(f'{value.__name__}.{attribute}', vars(value)[attribute], names)
        elif isinstance(value, functools.partial):
            self.add_global(name, value.func, names)
            self.parts.append(('partial', name, _constant(value.args), _constant(value.keywords)))
        else:
            token = _constant(value)
            if token is not None:
                self.parts.append(('global', name, token))

    def mine(self, module_name: str | None) -> bool:
        """Whether module `module_name` is the user's own code (see the module's notes)."""
        if not module_name:
            return False
        top = module_name.split('.')[0]
        if top == 'lazyphi':
            return False
        if top == self.package or module_name == '__main__':
            return True
        module = sys.modules.get(module_name)
        path = getattr(module, '__file__', None)
        return bool(path) and not _in_library(path)


def _function_of(value) -> FunctionType | None:
    """The Python function behind a function, method, property or decorated callable, else None."""
    for attribute in ('func', 'fget', '__func__'):  # cached_property / parallel_property, property, methods
        inner = getattr(value, attribute, None)
        if inner is not None and not isinstance(value, functools.partial):
            value = inner
            break
    try:
        value = inspect.unwrap(value)
    except ValueError:  # a cycle of __wrapped__
        return None
    return value if isinstance(value, FunctionType) else None


def _global_names(code: CodeType) -> frozenset:
    """The global and attribute names `code` and the code nested in it (lambdas, comprehensions) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _global_names(const)
    return frozenset(names)


def _code(code: CodeType) -> tuple:
    """What runs: instructions, names and constants (nested code included); not line numbers or local names."""
    return (code.co_code, code.co_names, code.co_argcount, code.co_kwonlyargcount, code.co_flags,
            tuple(_code(c) if isinstance(c, CodeType) else _constant(c, strict=False) for c in code.co_consts))


def _constant(value, strict: bool = True):
    """A deterministic token of an immutable value: scalars, arrays, tensors, and tuples / frozensets of those.

    None for anything else, with `strict=False` its type's name (for code constants). Lists, dicts and
    sets are left out: at module level they mostly hold state (a log, a counter, a memo), not settings.
    """
    if isinstance(value, _SCALARS):
        return repr(value)
    if isinstance(value, np.ndarray):
        return 'ndarray', str(value.dtype), value.shape, content_hash(value, NUMPY)
    if isinstance(value, Tensor):
        return value.__dask_tokenize__()
    if isinstance(value, (tuple, frozenset)):
        items = [_constant(v, strict) for v in value]
        if any(t is None for t in items):
            return None
        return type(value).__name__, tuple(items if isinstance(value, tuple) else sorted(items, key=repr))
    return None if strict else type(value).__qualname__


@functools.lru_cache(maxsize=4096)
def _in_library(path: str) -> bool:
    """Whether the module file `path` lies in the standard library or installed packages (resolving links once
    per path: 0.1 ms a call, and a plan asks for every global its code reads)."""
    return os.path.realpath(path).startswith(_library_dirs())


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Directories of the standard library and installed packages, real paths ending in a separator."""
    paths = {sysconfig.get_path(name) for name in ('stdlib', 'platstdlib', 'purelib', 'platlib')}
    paths.update(getattr(site, 'getsitepackages', list)())
    paths.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(p), '') for p in paths if p)
