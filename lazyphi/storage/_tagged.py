"""Tagged JSON: the config fields and plain values of a save, and the classes its nodes name.

JSON holds None, bool, int, str, lists and str-keyed dicts as they are; every other value a save stores is
an object tagged `{'$type': ...}` (float specials, complex, tuple, slice, enum, NumPy scalar, Shape, DType,
a dict that has the key '$type' itself). Classes of dataclass nodes and enums are named `module:QualName`.
"""

from __future__ import annotations

import enum
import importlib
import math as pymath
import re
import sys
import warnings
import weakref
from collections.abc import Iterable
from types import MappingProxyType, ModuleType

import numpy as np

from .._errors import ManifestDamaged, UnknownClassWarning
from ..backend import DType
from ..math import Shape
from ..math.kinds import DIM_TYPES
from ._results import class_path

TAG = '$type'  # key marking a tagged JSON value
MAX_DEPTH = 100  # levels of nesting of a saved tree, and of a value within it

_MODULE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*')

# classes saved or loaded in this process, by `module:QualName`: found even where the path cannot be imported
_CLASSES: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()


def encode(value, where: str, depth: int = 0, enclosing: set | None = None):
    """`value` as JSON: plain JSON types as they are, others tagged `{'$type': ..., ...}`.

    Args:
        where: where `value` lies in the saved tree ('obj.config[0]'), for messages.
        depth: levels of lists, tuples and dicts around `value` already.
        enclosing: ids of the lists, tuples and dicts holding `value` (a cycle check).

    Raises:
        TypeError: a value of another type; the message names `where` it lies and its type.
        ValueError: `value` contains itself, or is nested more than `MAX_DEPTH` levels deep.
    """
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if pymath.isfinite(value) else {TAG: 'float', 'value': repr(value)}
    if isinstance(value, enum.Enum):
        cls = type(value)
        _CLASSES[class_path(cls)] = cls
        return {TAG: 'enum', 'class': class_path(cls), 'name': value.name}
    if isinstance(value, np.generic) and value.dtype.kind in 'biufc':
        return {TAG: 'numpy', 'dtype': value.dtype.str, 'value': encode(value.item(), where)}
    if type(value) is complex:
        return {TAG: 'complex', 'real': encode(value.real, where), 'imag': encode(value.imag, where)}
    if type(value) in (list, tuple) or (type(value) is dict and all(isinstance(k, str) for k in value)):
        enclosing = enter(value, where, depth, set() if enclosing is None else enclosing)
        try:
            if type(value) is dict:
                items = {k: encode(v, f'{where}[{k!r}]', depth + 1, enclosing) for k, v in value.items()}
                return {TAG: 'dict', 'items': items} if TAG in value else items
            items = [encode(v, f'{where}[{i}]', depth + 1, enclosing) for i, v in enumerate(value)]
            return items if type(value) is list else {TAG: 'tuple', 'items': items}
        finally:
            enclosing.discard(id(value))
    if type(value) is slice:
        return {TAG: 'slice', 'start': encode(value.start, where), 'stop': encode(value.stop, where),
                'step': encode(value.step, where)}
    if type(value) is Shape and all(s is None or type(s) is int for s in value.sizes):
        return {TAG: 'shape', 'sizes': list(value.sizes), 'names': list(value.names), 'types': list(value.types),
                'labels': [None if lab is None else list(lab) for lab in value.labels]}
    if type(value) is DType:
        return {TAG: 'dtype', 'value': str(value)}
    raise TypeError(f'save() cannot store {where} of type {type(value).__module__}.{type(value).__qualname__}: '
                    f'{value!r:.200}. Config fields and plain values may be None, bool, int, float, complex, str, '
                    f'slices, enums, Shapes, DTypes, NumPy scalars, and lists, tuples and str-keyed dicts of those')


def enter(container, where: str, depth: int, enclosing: set) -> set:
    """Add `container` to `enclosing` (the ids of the containers around it), checking depth and cycles first.

    Raises:
        ValueError: `container` is one of `enclosing` (it contains itself), or `depth` exceeds `MAX_DEPTH`.
    """
    if id(container) in enclosing:
        raise ValueError(f'save() cannot store a value that contains itself: {where} contains itself (it is one '
                         f'of the containers holding it), and a save is a tree. Break the cycle before saving')
    if depth > MAX_DEPTH:
        raise ValueError(f'save() cannot store {where}: the tree is nested more than {MAX_DEPTH} levels deep')
    enclosing.add(id(container))
    return enclosing


def decode(value, where: str, depth: int = 0, allow: tuple = ()):
    """The value `encode` wrote.

    An enum whose class `find_class` does not find (with the modules `allow`) comes back as its member's
    name, with an `UnknownClassWarning`.

    Raises:
        ManifestDamaged: a malformed tag, or nesting deeper than `MAX_DEPTH`.
        TypeError: the enum class found is no Enum or lacks the member.
    """
    if depth > MAX_DEPTH:
        raise ManifestDamaged(f'The manifest holds a value nested more than {MAX_DEPTH} levels deep at {where}')
    if isinstance(value, list):
        return [decode(v, f'{where}[{i}]', depth + 1, allow) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if TAG not in value:
        return {k: decode(v, f'{where}[{k!r}]', depth + 1, allow) for k, v in value.items()}
    tag = value[TAG]
    if tag == 'enum':
        path, name = value.get('class'), value.get('name')
        if not isinstance(path, str) or not isinstance(name, str):
            raise ManifestDamaged(f'The manifest holds a malformed enum at {where}: {value!r:.200} (class and name '
                                  f'must be strings)')
        cls = find_class(path, allow)
        if cls is None:
            unknown_class(path, where, 'its member name')
            return name
        if not issubclass(cls, enum.Enum) or value.get('name') not in cls.__members__:
            raise TypeError(f'Cannot load {where}: {value.get("class")!r} is not an Enum with a member '
                            f'{value.get("name")!r}')
        return cls[value['name']]
    try:
        if tag == 'dict':
            return {k: decode(v, f'{where}[{k!r}]', depth + 1, allow) for k, v in value['items'].items()}
        if tag == 'tuple':
            return tuple(decode(v, f'{where}[{i}]', depth + 1, allow) for i, v in enumerate(value['items']))
        if tag == 'float':
            return float(_checked(value['value'], str))
        if tag == 'complex':
            return complex(*(_checked(decode(value[k], where, depth + 1), int, float) for k in ('real', 'imag')))
        if tag == 'numpy':
            return _numpy_scalar(value)
        if tag == 'slice':
            return slice(*(decode(value[k], where, depth + 1) for k in ('start', 'stop', 'step')))
        if tag == 'shape':
            return _shape(value)
        if tag == 'dtype':
            return DType.as_dtype(_checked(value['value'], str))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as err:
        raise ManifestDamaged(f'The manifest holds a malformed value at {where}: {value!r:.200} ({err})') from err
    raise ManifestDamaged(f'The manifest holds a value of unknown type {tag!r:.100} at {where}')


def _checked(value, *types):
    """`value` itself if its type is one of `types` (bool is not int here); TypeError otherwise."""
    if type(value) not in types:
        raise TypeError(f'expected {" or ".join(t.__name__ for t in types)}, found {type(value).__name__}')
    return value


def _numpy_scalar(value: dict) -> np.generic:
    dtype = np.dtype(_checked(value['dtype'], str))
    if dtype.kind not in 'biufc' or dtype.shape or dtype.fields is not None:
        raise ValueError(f'a NumPy scalar of dtype {dtype} is not among those saves hold (bool, int, float, complex)')
    item = value['value']
    if isinstance(item, dict):  # non-finite floats and complex numbers are tagged
        item = decode(item, 'numpy')
    return dtype.type(_checked(item, bool, int, float, complex))


def _shape(value: dict) -> Shape:
    sizes, names, types, labels = (_checked(value[k], list) for k in ('sizes', 'names', 'types', 'labels'))
    if len({len(sizes), len(names), len(types), len(labels)}) != 1:
        raise ValueError('names, sizes, types and labels must have equal lengths')
    for name, size, dim_type, lab in zip(names, sizes, types, labels, strict=True):
        _checked(name, str)
        if dim_type not in DIM_TYPES:
            raise ValueError(f'dim types must be among {DIM_TYPES}, found {dim_type!r:.100}')
        if size is not None and (type(size) is not int or size < 0):
            raise ValueError(f'sizes must be ints >= 0 or null, found {size!r:.100}')
        if lab is not None and (type(lab) is not list or len(lab) != size or not all(type(x) is str for x in lab)):
            raise ValueError(f'labels must be null or one str per item, found {lab!r:.100}')
    return Shape(tuple(sizes), tuple(names), tuple(types), tuple(None if lab is None else tuple(lab) for lab in labels))


def find_class(path: str, allow: tuple = ()) -> type | None:
    """The class at `module:QualName` without importing anything the caller did not allow, or None.

    Found: in a module already imported, walking only real modules and classes through their own namespaces
    (so no module `__getattr__` or lazy proxy runs and nothing is imported on the way), in a module `allow` names
    (a module or a package holding it), which is imported, or among the classes saved or loaded in this process.
    """
    module_name, _, qualname = path.partition(':')
    module = sys.modules.get(module_name)
    if module is None and _MODULE_NAME.fullmatch(module_name) and any(
            module_name == name or module_name.startswith(name + '.') for name in allow):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            module = None
    cls = module
    for part in qualname.split('.') if module is not None else ():
        cls = _own_attribute(cls, part)
        if cls is None:
            break
    if not issubclass(type(cls), type):
        cls = _CLASSES.get(path)
    if cls is not None:
        _CLASSES[path] = cls
    return cls


def _own_attribute(owner, name: str):
    """`owner.name` where `owner` is a real module or class and `name` is in its own namespace, else None.

    Only the types of objects are asked, never the objects, and namespaces are read as the interpreter stores
    them: an object that imports on attribute access (a lazy proxy in a module's namespace, a lazily loaded
    module, a module `__getattr__`) runs nothing.
    """
    if issubclass(type(owner), ModuleType):
        namespace = ModuleType.__dict__['__dict__'].__get__(owner)  # past a lazy module's own __getattribute__
    elif issubclass(type(owner), type):
        namespace = type.__dict__['__dict__'].__get__(owner)  # the class's own, past its metaclass
    else:
        return None
    return namespace.get(name) if type(namespace) in (dict, MappingProxyType) else None


def unknown_class(path, where: str, instead: str) -> None:
    """Warn that the class `path` of the value at `where` is not found and what comes back `instead`."""
    warnings.warn(f'lazyphi.load found no class for {where}: {path!r:.200} is in no module imported or allowed, '
                  f'and load never imports a module the file names. {where} comes back as {instead}. Import the '
                  f'module first, or pass allow_modules=[...] naming it (or its package) if you trust the file',
                  UnknownClassWarning, stacklevel=4)


def allowed_modules(allow_modules) -> tuple[str, ...]:
    """`load`'s `allow_modules` as a tuple of module names (a single str is one name).

    Raises:
        TypeError: not a str or an iterable of str.
        ValueError: a name that is no absolute dotted module name.
    """
    if allow_modules is None:
        return ()
    names = (allow_modules,) if isinstance(allow_modules, str) else allow_modules
    if not isinstance(names, Iterable):
        raise TypeError(f"load(allow_modules=...) takes module names, like ['mypackage.models'], got "
                        f'{allow_modules!r:.200}')
    names = tuple(names)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"load(allow_modules=...) takes module names as str, like ['mypackage.models'], got "
                            f'{name!r:.200}')
        if not _MODULE_NAME.fullmatch(name):
            raise ValueError(f"load(allow_modules=...) takes absolute dotted module names like 'mypackage.models', "
                             f'got {name!r:.200}')
    return names
