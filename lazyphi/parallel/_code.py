"""What a class's results depend on besides its instance, as a token for cache keys.

A result found on disk must not be reused by a program whose code, or whose values that code reads,
differ. `code_token(cls)` is a deterministic token of everything the class's functions can read
outside the instance: the bytecode of every function of the class (properties, helper methods,
decorated or not) and of the user's own functions and classes reached through global names, closure
cells, class attributes, default arguments and user modules, recursively, and every value read that
way by its content (`value_token`): numbers, strings, containers item by item, arrays and tensors by
their bytes, functions by their code and what they read in turn, objects by their state (`__dict__`
and slots for the user's classes, the pickle protocol's state for library ones), library functions,
classes and modules by name.

Left out, on purpose:
- code of installed packages, the standard library and lazyphi (by name only: upgrading those does not
  invalidate results);
- a container or object the code itself changes (`LOG.append(x)`, `MEMO[key] = v`, `STATS.n = 1`):
  state the computation keeps (a log, a memo), by its type only, so that it does not churn keys. A
  global or cell counts where the function reading it changes it, a class attribute where every
  method naming it does; cached-property values in an object's `__dict__` are left out of its state;
- locks and other synchronisation objects (they hold no value).

What no token can see, `survey_code` reports (`CodeSurvey.unseen`): environment variables read
(`os.environ`, `os.getenv`), files opened (`open`, `np.load`, `Path.read_text`, ...), names looked up
at run time (`globals()`, `eval`, `importlib.import_module`) and values that have no readable state
(an open file, a socket); the planner turns them into notes naming the remedy (a config field, or
`parallel_compute(..., cache_key=...)`).

Bytecode, not source: editing a comment or the layout keeps the token, editing what runs changes it.
Deterministic across processes: no `id()` or `hash()` enters a token (ids only detect cycles and
repeats; repeats are numbered in the order the walk meets them), sets are ordered by their items'
tokens.

"The user's own code" is any module in the class's top-level package, `__main__` (scripts,
notebooks), any module whose file lies outside the interpreter's standard library and
site-packages directories (a project checked out or installed in editable mode), and functions and
classes made by `exec` without a module name.
"""

from __future__ import annotations

import builtins
import dis
import enum
import functools
import hashlib
import os
import site
import sys
import sysconfig
import threading
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import NamedTuple

import numpy as np

from ..backend import NUMPY
from ..math import Tensor
from ..math.kinds import CACHED_PROPERTY_TYPES, cached_property_names

_SCALARS = (type(None), bool, int, float, complex, enum.Enum, np.generic, type(Ellipsis), range, slice)
_EXACT_SCALARS = frozenset({type(None), bool, int, float})  # the most common, checked first
_DESCRIPTORS = (staticmethod, classmethod, property, *CACHED_PROPERTY_TYPES)
_CODE_TYPES = (ModuleType, type, FunctionType, MethodType, *_DESCRIPTORS)  # never state, whatever is called on them
_NOTHING = object()  # never a cell's contents
_LONG_TEXT = 1024  # str / bytes longer than this enter a token as a digest
_MAX_DEPTH = 150  # levels of nesting tokenized (each takes about three frames of the interpreter's stack)
# method names that change the container or object they are called on: the value is state the code keeps
_MUTATORS = frozenset({'append', 'extend', 'insert', 'remove', 'pop', 'popitem', 'clear', 'update', 'setdefault',
                       'add', 'discard', 'sort', 'reverse', 'appendleft', 'extendleft', 'popleft', 'rotate',
                       '__setitem__', '__delitem__', 'put', 'put_nowait', 'fill', 'resize'})
_LOADS = {'LOAD_GLOBAL': 'global', 'LOAD_NAME': 'global', 'LOAD_DEREF': 'cell', 'LOAD_CLASSDEREF': 'cell',
          'LOAD_ATTR': 'attribute', 'LOAD_METHOD': 'attribute', 'LOAD_FAST': 'local'}
# names in a function's code that read what no token sees (the environment, files, names looked up at run time);
# the planner notes them
_ENVIRONMENT = frozenset({'environ', 'environb', 'getenv', 'getenvb'})
_DYNAMIC = frozenset({'globals', 'eval', 'exec', 'import_module', '__import__'})
_FILE_READS = frozenset({'open', 'load', 'loadtxt', 'genfromtxt', 'fromfile', 'memmap', 'read_text', 'read_bytes',
                         'read_csv', 'read_table', 'read_parquet', 'read_hdf', 'read_excel', 'read_json',
                         'open_dataset', 'open_zarr', 'imread', 'listdir', 'scandir', 'iterdir', 'glob'})
_LOCKS = (type(threading.Lock()), type(threading.RLock()), threading.Condition, threading.Event,
          threading.Semaphore, threading.BoundedSemaphore, threading.Barrier)


class CodeSurvey(NamedTuple):
    """What `survey_code` found: the token, and what the code reads that the token cannot cover.

    Attributes:
        token: deterministic and hashable; equal for equal code and values read.
        unseen: one sentence per function (or value) of the user's code reading something no token covers.
    """
    token: tuple
    unseen: tuple


def code_token(cls: type) -> tuple:
    """A deterministic, hashable token of the code behind the properties of `cls` and the values it reads."""
    return survey_code(cls).token


def survey_code(cls: type, data=()) -> CodeSurvey:
    """The code token of `cls` (see the module) and the reads it cannot cover.

    Args:
        cls: the class whose properties are computed.
        data: values of the instance's fields: the user's classes of objects inside them (a nested dataclass whose
            methods a property calls) are covered like `cls`; their contents are not (the key hashes the fields).
    """
    walk = _Walk(cls.__module__.split('.')[0])
    found: dict = {}
    _user_classes(walk, data, found, set())
    token = walk.value(cls), tuple(walk.value(c) for c in found if c is not cls)
    return CodeSurvey(token, tuple(walk.unseen))


def _user_classes(walk: _Walk, value, found: dict, seen: set) -> None:
    """Collect, in the order met, the user's classes of the objects inside `value` (containers and object state)."""
    if id(value) in seen or isinstance(value, (*_SCALARS, str, bytes, np.ndarray, Tensor)):
        return
    seen.add(id(value))
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (tuple, list, set, frozenset)):
        items = value
    elif walk.mine_class(type(value)):
        found[type(value)] = None
        items = getattr(value, '__dict__', {}).values()
    else:
        return
    for item in items:
        _user_classes(walk, item, found, seen)


def value_token(value, package: str = '') -> tuple | str:
    """A deterministic token of `value` by content (see the module); `package`: the user's top-level package."""
    return _Walk(package).value(value)


class _Walk:
    """One traversal from a value to everything it reaches; tokens nest, a repeat is a numbered reference."""

    def __init__(self, package: str):
        self.package = package
        self.done: dict[int, int] = {}  # id -> number of a value already tokenized (objects kept alive in `kept`)
        self.open: dict[int, int] = {}  # id -> depth of a value being tokenized: meeting it again is a cycle
        self.kept: list = []
        self.unordered = 0  # inside a set: the order items are met in varies, so repeats are not numbered
        self.unseen: list[str] = []
        # the class members and functions leading to the value being tokenized, as (prefix, name), joined by a dot
        self.where: list[tuple] = []

    def value(self, value):
        """The token of any value."""
        if type(value) in _EXACT_SCALARS or isinstance(value, _SCALARS):
            return repr(value)
        if isinstance(value, (str, bytes)):
            if len(value) <= _LONG_TEXT:
                return repr(value)
            data = value.encode('utf-8', 'surrogatepass') if isinstance(value, str) else value
            return type(value).__name__, len(value), _digest(data)
        key = id(value)
        if key in self.open:
            return 'cycle', len(self.open) - self.open[key]
        if key in self.done and not self.unordered:
            return 'repeat', self.done[key]
        if len(self.open) >= _MAX_DEPTH:  # a structure that deep, or state that makes new objects on every look
            self.unseen.append(f'{self.path()} reads a {_type_name(type(value))} nested over {_MAX_DEPTH} levels deep, '
                               f'beyond which no key covers it')
            return 'deep', _type_name(type(value))
        self.open[key] = len(self.open)
        try:
            token = self._token(value)
        finally:
            del self.open[key]
        if not self.unordered:
            self.done[key] = len(self.done)
            self.kept.append(value)
        return token

    def _token(self, value):
        if type(value) is FunctionType:
            return self.function(value)
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                return 'ndarray', str(value.dtype), value.shape, self.value(value.tolist())
            return 'ndarray', str(value.dtype), value.shape, NUMPY.content_hash(np.ascontiguousarray(value))
        if isinstance(value, Tensor):
            try:
                return value.__dask_tokenize__()
            except Exception as error:  # e.g. a tracer that a traced property left in a global
                return self.opaque(value, error)
        if hasattr(type(value), '__dask_tokenize__'):  # a Dask collection, an xarray object: by the token they give
            try:
                return 'dask', self.value(type(value)), self.value(value.__dask_tokenize__())
            except Exception as error:  # a token the object cannot give is no content either
                return self.opaque(value, error)
        if isinstance(value, (tuple, list)):
            return _type_name(type(value)), tuple(self.value(v) for v in value)
        if isinstance(value, dict):
            return _type_name(type(value)), tuple((self.value(k), self.value(v)) for k, v in value.items())
        if isinstance(value, (set, frozenset)):
            self.unordered += 1
            try:
                items = sorted((self.value(v) for v in value), key=repr)
            finally:
                self.unordered -= 1
            return _type_name(type(value)), tuple(items)
        if isinstance(value, MethodType):
            return 'method', self.value(value.__func__), self.value(value.__self__)
        if isinstance(value, _DESCRIPTORS):
            inner = [getattr(value, a, None) for a in ('__func__', 'fget', 'fset', 'fdel', 'func')]
            return _type_name(type(value)), tuple(self.value(f) for f in inner if f is not None)
        if isinstance(value, type):
            return self.cls(value)
        if isinstance(value, ModuleType):
            return 'module', value.__name__
        if isinstance(value, _LOCKS):
            return 'lock', _type_name(type(value))
        if callable(value) and hasattr(value, '__wrapped__') and not self.mine_class(type(value)):
            return 'wrapped', _type_name(type(value)), self.value(value.__wrapped__)  # functools.lru_cache, ...
        return self.instance(value)

    def function(self, function: FunctionType):
        """A library function by name; one of the user's by its code, defaults, and the globals and cells it reads."""
        name = (function.__module__, function.__qualname__)
        if function.__module__ is not None and not self.mine(function.__module__):  # None: made by exec(), user code
            return ('function', *name)
        code = function.__code__
        self.where.append(name)
        try:
            self.note_reads(code)
            names = _global_names(code)
            namespace = function.__globals__
            changed = _changed_names(code) | _passed_to_changers(code, namespace, function.__closure__)
            reads = [(n, self.read(('global', n), namespace[n], names, changed)) for n in _sorted(names)
                     if n in namespace]
            for n, cell in zip(code.co_freevars, function.__closure__ or (), strict=True):
                try:
                    contents = cell.cell_contents
                except ValueError:  # a cell not yet filled
                    continue
                reads.append((n, self.read(('cell', n), contents, names, changed)))
            return ('function', *name, _code_token(code), self.value(function.__defaults__),
                    self.value(function.__kwdefaults__), tuple(reads))
        finally:
            self.where.pop()

    def read(self, variable: tuple, value, names: frozenset, changed: frozenset):
        """The token of a variable (kind, name) the code reads: state the code changes by its type only; a user
        module by the attributes the code reads of it."""
        if variable in changed and not isinstance(value, _CODE_TYPES):  # `physics.update(x)` changes no module
            return 'state', _type_name(type(value))
        if isinstance(value, ModuleType) and self.mine(value.__name__):
            return 'module', value.__name__, tuple((a, self.read(('attribute', a), vars(value)[a], names, changed))
                                                   for a in sorted(names & set(vars(value))))
        return self.value(value)

    def cls(self, cls: type):
        """A library class by name; one of the user's by its bases and every member (functions, values)."""
        name = (cls.__module__, cls.__qualname__)
        if not self.mine_class(cls):
            return ('class', *name)
        members = vars(cls)
        changed = _state_attributes(tuple(f.__code__ for m in members.values() for f in _functions(m)))
        tokens = []
        for n, member in sorted(members.items()):
            if (n.startswith('__') and not callable(member)) or n == '_abc_impl':  # __dict__, __doc__, ABC's caches
                continue
            self.where.append((cls.__qualname__, n))
            try:
                state = n in changed and not isinstance(member, _CODE_TYPES)
                tokens.append((n, 'state' if state else self.value(member)))
            finally:
                self.where.pop()
        return ('class', *name, tuple(self.value(b) for b in cls.__bases__), tuple(tokens))

    def instance(self, value):
        """An object by its class and state: `__dict__` and slots for the user's classes, else its pickled state."""
        cls = type(value)
        if self.mine_class(cls):
            cached = cached_property_names(cls)  # computed or not, a cached value follows from the rest
            state = sorted((n, v) for n, v in getattr(value, '__dict__', {}).items() if n not in cached)
            state += [(s, getattr(value, s)) for s in _slots(cls) if hasattr(value, s)]
            return 'object', self.value(cls), tuple((n, self.value(v)) for n, v in state)
        try:
            reduced = value.__reduce_ex__(4)
        except Exception as error:  # anything that cannot be pickled has no state to read
            return self.opaque(value, error)
        if isinstance(reduced, str):  # a module-level singleton, pickled by name
            return 'global', _type_name(cls), reduced
        parts = list(reduced[:3]) + [list(p) if p is not None else None for p in reduced[3:5]]
        return 'reduced', _type_name(cls), tuple(self.value(p) for p in parts)

    def opaque(self, value, error: Exception) -> tuple:
        """The token of a value whose content cannot be read, which is noted."""
        self.unseen.append(f'{self.path()} reads a {_type_name(type(value))}, which has no state a key can cover '
                           f'({type(error).__name__}: {error})')
        return 'opaque', _type_name(type(value))

    def note_reads(self, code: CodeType) -> None:
        """Record environment variables and files the code reads (names it loads), which no token covers."""
        names = _global_names(code)
        env, files = sorted(names & _ENVIRONMENT), sorted(names & _FILE_READS)
        if env:
            self.unseen.append(f'{self.path()} reads environment variables ({", ".join(env)})')
        if files:
            self.unseen.append(f'{self.path()} may read files ({", ".join(files)})')
        dynamic = sorted(names & _DYNAMIC)
        if dynamic:
            self.unseen.append(f'{self.path()} looks up names at run time ({", ".join(dynamic)})')

    def path(self) -> str:
        """Where the walk is: the class member it started from, and the function reached from it."""
        if not self.where:
            return 'a value'
        first, last = ('.'.join(map(str, self.where[i])) for i in (0, -1))
        return first if last == first or last.endswith(f'.{first}') else f'{first} (in {last})'

    def mine_class(self, cls: type) -> bool:
        """Whether `cls` is the user's: defined in the user's code, or by exec() without a module name (`builtins`)."""
        if cls.__module__ == 'builtins':
            return getattr(builtins, cls.__qualname__, None) is not cls
        return self.mine(cls.__module__)

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


def _type_name(cls: type) -> str:
    return f'{cls.__module__}.{cls.__qualname__}'


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _functions(member) -> tuple:
    """The functions a class member runs: itself, or those a method or property descriptor wraps."""
    if type(member) is FunctionType:
        return (member,)
    if not isinstance(member, _DESCRIPTORS):
        return ()
    inner = [getattr(member, a, None) for a in ('__func__', 'fget', 'fset', 'fdel', 'func')]
    return tuple(f for f in inner if isinstance(f, FunctionType))


def _slots(cls: type) -> list:
    """Names of the slots `cls` and its bases declare."""
    names = []
    for base in cls.__mro__:
        slots = vars(base).get('__slots__', ())
        names += [slots] if isinstance(slots, str) else [s for s in slots if s not in ('__dict__', '__weakref__')]
    return names


@functools.lru_cache(maxsize=4096)
def _global_names(code: CodeType) -> frozenset:
    """The global and attribute names `code` and the code nested in it (lambdas, comprehensions) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _global_names(const)
    return frozenset(names)


@functools.lru_cache(maxsize=4096)
def _changed_names(code: CodeType) -> frozenset:
    """What `code` (and the code nested in it) changes in place, as ('global' | 'cell' | 'attribute', name).

    A value is changed where a mutating method is called on it (`LOG.append(x)`, `self.memo.update(d)`), or an
    attribute or item is stored into it (`STATS.n = v`, `MEMO[key] = v`, `COUNTS[key] += 1`, `self.memo[f(x)] = v`).
    Local variables count as ('local', name), for the parameters a helper changes (see `_passed_to_changers`).
    A pattern not recognised leaves the value in the key: a needless new key, never a wrong one.
    """
    found = set()
    instructions = [i for i in dis.get_instructions(code) if i.opname != 'CACHE']
    for k, i in enumerate(instructions):
        augmented = i.opname == 'COPY' and i.arg == 2 and instructions[k + 1:k + 3] and \
            [(n.opname, n.arg) for n in instructions[k + 1:k + 3]] == [('COPY', 2), ('BINARY_SUBSCR', None)]
        if i.opname in ('STORE_SUBSCR', 'DELETE_SUBSCR') or augmented:  # `X[k] = v`, `X[k] += v`
            container = _container(instructions, k)
            if container is not None:
                found.add(container)
        kind = _LOADS.get(i.opname)
        if kind is None or k + 1 == len(instructions):
            continue
        after = instructions[k + 1]
        if after.opname in ('STORE_ATTR', 'DELETE_ATTR') or (
                after.opname in ('LOAD_METHOD', 'LOAD_ATTR') and after.argval in _MUTATORS):
            found.add((kind, i.argval))
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _changed_names(const)
    return frozenset(found)


def _passed_to_changers(code: CodeType, namespace: dict, closure) -> frozenset:
    """The globals and cells `code` passes to a function of the user's that changes that parameter in place
    (`counted(CALLS, name)` where `counted` does `calls[name] += 1`): state, as if `code` changed them itself."""
    cells = dict(zip(code.co_freevars, closure or (), strict=True))
    found = set()
    for (kind, name), index, argument in _passed(code):
        holder = namespace if kind == 'global' else {n: c.cell_contents for n, c in cells.items()
                                                     if n == name and _filled(c)}
        callee = holder.get(name)
        if isinstance(callee, FunctionType) and index < callee.__code__.co_argcount:
            parameter = callee.__code__.co_varnames[index]
            if ('local', parameter) in _changed_names(callee.__code__):
                found.add(argument)
    return frozenset(found)


def _filled(cell) -> bool:
    try:
        return cell.cell_contents is not _NOTHING
    except ValueError:  # a cell not yet filled
        return False


@functools.lru_cache(maxsize=4096)
def _passed(code: CodeType) -> tuple:
    """(callee, argument index, argument) for each global or cell passed by name to a function named by a global or
    cell, in calls whose callee and arguments are each one load (`f(A, 'x')`); nested code included."""
    found = []
    instructions = [i for i in dis.get_instructions(code) if i.opname != 'CACHE']
    for k, i in enumerate(instructions):
        if i.opname != 'CALL' or k < i.arg + 1:
            continue
        start = k - i.arg - (1 if instructions[k - 1].opname == 'PRECALL' else 0)
        callee, arguments = instructions[start - 1], instructions[start:start + i.arg]
        if callee.opname not in ('LOAD_GLOBAL', 'LOAD_DEREF') or not all(
                a.opname.startswith('LOAD_') and a.opname not in ('LOAD_ATTR', 'LOAD_METHOD') for a in arguments):
            continue
        for index, argument in enumerate(arguments):
            kind = _LOADS.get(argument.opname)
            if kind in ('global', 'cell'):
                found.append(((_LOADS[callee.opname], callee.argval), index, (kind, argument.argval)))
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found.extend(_passed(const))
    return tuple(found)


@functools.lru_cache(maxsize=1024)
def _state_attributes(codes: tuple) -> frozenset:
    """Class attributes that are state: changed in place by a method, and named by no method that does not
    change them (a memo or log the methods keep; a settings dict that one method updates and another reads is
    a value)."""
    changed, read = set(), set()
    for code in codes:
        mine = {name for kind, name in _changed_names(code) if kind == 'attribute'}
        changed |= mine
        read |= _global_names(code) - mine
    return frozenset(changed - read)


def _container(instructions: list, k: int) -> tuple | None:
    """The (kind, name) loaded as the container of the item store or delete `instructions[k]`, if it is a name.

    The container is pushed just before the key: walking back from the store, the key's code starts where the
    instructions since then have pushed one value. Straight-line code only: a jump in between gives None.
    """
    pushed = 0
    for j in range(k - 1, 0, -1):
        i = instructions[j]
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs or i.opname in ('COPY', 'SWAP'):  # `X[k] += 1`: unsure
            return None
        pushed += dis.stack_effect(i.opcode, i.arg if i.opcode >= dis.HAVE_ARGUMENT else None, jump=False)
        if pushed == 1:
            load = instructions[j - 1]
            kind = _LOADS.get(load.opname)
            return None if kind is None else (kind, load.argval)
    return None


@functools.lru_cache(maxsize=4096)
def _sorted(names: frozenset) -> tuple:
    return tuple(sorted(names))


@functools.lru_cache(maxsize=4096)
def _code_token(code: CodeType) -> tuple:
    """`_code`, computed once per code object."""
    return _code(code)


def _code(code: CodeType) -> tuple:
    """What runs: instructions, names and constants (nested code included); not line numbers or local names."""
    return (code.co_code, code.co_names, code.co_argcount, code.co_kwonlyargcount, code.co_flags,
            tuple(_code(c) if isinstance(c, CodeType) else repr(c) for c in code.co_consts))


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
