"""Tagged JSON: the config fields and plain values of a save, and the classes its nodes name.

JSON holds None, bool, int, str, lists and str-keyed dicts as they are; every other value a save stores is
an object tagged `{'$type': ...}` (float specials, complex, tuple, slice, enum, NumPy scalar, Shape, DType,
a dict that has the key '$type' itself). Classes of dataclass nodes and enums are named `module:QualName`.
"""

from __future__ import annotations

import enum
import importlib
import math as pymath
import weakref

import numpy as np

from .._errors import ManifestDamaged
from ..backend import DType
from ..math import Shape
from ..math.kinds import DIM_TYPES
from ._results import class_path

TAG = '$type'  # key marking a tagged JSON value

# classes saved or loaded in this process, by `module:QualName`: found even where the path cannot be imported
_CLASSES: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()


def encode(value, where: str):
    """`value` as JSON: plain JSON types as they are, others tagged `{'$type': ..., ...}`.

    Raises:
        TypeError: a value of another type; the message names `where` it lies and its type.
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
    if type(value) is list:
        return [encode(v, f'{where}[{i}]') for i, v in enumerate(value)]
    if type(value) is tuple:
        return {TAG: 'tuple', 'items': [encode(v, f'{where}[{i}]') for i, v in enumerate(value)]}
    if type(value) is dict and all(isinstance(k, str) for k in value):
        items = {k: encode(v, f'{where}[{k!r}]') for k, v in value.items()}
        return {TAG: 'dict', 'items': items} if TAG in value else items
    if type(value) is slice:
        return {TAG: 'slice', 'start': encode(value.start, where), 'stop': encode(value.stop, where),
                'step': encode(value.step, where)}
    if type(value) is Shape and all(s is None or type(s) is int for s in value.sizes):
        return {TAG: 'shape', 'sizes': list(value.sizes), 'names': list(value.names), 'types': list(value.types),
                'labels': [None if lab is None else list(lab) for lab in value.labels]}
    if type(value) is DType:
        return {TAG: 'dtype', 'value': str(value)}
    raise TypeError(f'save() cannot store {where} of type {type(value).__module__}.{type(value).__qualname__}: '
                    f'{value!r}. Config fields and plain values may be None, bool, int, float, complex, str, slices, '
                    f'enums, Shapes, DTypes, NumPy scalars, and lists, tuples and str-keyed dicts of those')


def decode(value, where: str):
    """The value `encode` wrote. Raises ManifestDamaged for a malformed tag, TypeError for an unknown enum class."""
    if isinstance(value, list):
        return [decode(v, f'{where}[{i}]') for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if TAG not in value:
        return {k: decode(v, f'{where}[{k!r}]') for k, v in value.items()}
    tag = value[TAG]
    if tag == 'enum':
        cls = find_class(value.get('class', '?'), where)
        if not issubclass(cls, enum.Enum) or value.get('name') not in cls.__members__:
            raise TypeError(f'Cannot load {where}: {value.get("class")!r} is not an Enum with a member '
                            f'{value.get("name")!r}')
        return cls[value['name']]
    try:
        if tag == 'dict':
            return {k: decode(v, f'{where}[{k!r}]') for k, v in value['items'].items()}
        if tag == 'tuple':
            return tuple(decode(v, f'{where}[{i}]') for i, v in enumerate(value['items']))
        if tag == 'float':
            return float(value['value'])
        if tag == 'complex':
            return complex(decode(value['real'], where), decode(value['imag'], where))
        if tag == 'numpy':
            return np.dtype(value['dtype']).type(decode(value['value'], where))
        if tag == 'slice':
            return slice(*(decode(value[k], where) for k in ('start', 'stop', 'step')))
        if tag == 'shape':
            if not set(value['types']) <= set(DIM_TYPES) or len({len(value[k]) for k in
                                                                 ('sizes', 'names', 'types', 'labels')}) != 1:
                raise ValueError('names, sizes, types and labels must have equal lengths and valid types')
            labels = tuple(None if lab is None else tuple(lab) for lab in value['labels'])
            return Shape(tuple(value['sizes']), tuple(value['names']), tuple(value['types']), labels)
        if tag == 'dtype':
            return DType.as_dtype(value['value'])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ManifestDamaged(f'The manifest holds a malformed value at {where}: {value!r:.200} ({err})') from err
    raise ManifestDamaged(f'The manifest holds a value of unknown type {tag!r} at {where}')


def find_class(path: str, where: str) -> type:
    """The class at `module:QualName`: imported, else one saved or loaded in this process.

    Raises:
        TypeError: neither finds it.
    """
    module, _, qualname = path.partition(':')
    cls = None
    try:
        cls = importlib.import_module(module)
        for part in qualname.split('.'):
            cls = getattr(cls, part)
    except (ImportError, AttributeError, ValueError):
        cls = None
    if not isinstance(cls, type):
        cls = _CLASSES.get(path)
    if cls is None:
        raise TypeError(f'Cannot load {where}: its class {path!r} cannot be imported, and no class of that path was '
                        f'saved or loaded in this process. Define or import the class first (a class defined in '
                        f"__main__ or inside a function is found only in the process that saved it)")
    _CLASSES[path] = cls
    return cls
