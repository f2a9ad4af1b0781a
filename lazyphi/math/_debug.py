"""`enable_debug_checks`: check the invariants of Shapes and tensors whenever one is made.

The constructors of `Shape`, `Dense` and `Expanded` store their arguments as they are, because they sit on
every hot path. `enable_debug_checks()` puts checking constructors in their place (for the rest of the
process, as in phiml), so a broken invariant raises where the value is made instead of surfacing later as a
wrong result. Until it is called, the checks cost nothing.
"""

import numbers

from ..backend import Backend
from ._kinds import Expanded
from ._shape import DIM_TYPES, NonUniform, Shape
from ._tensor import Dense


def _check_shape(shape: Shape) -> None:
    parts = (shape.sizes, shape.names, shape.types, shape.labels)
    if not all(isinstance(p, tuple) for p in parts) or len({len(p) for p in parts}) != 1:
        raise ValueError(f'Shape: sizes, names, types and labels must be tuples of one length, got sizes='
                         f'{shape.sizes!r}, names={shape.names!r}, types={shape.types!r}, labels={shape.labels!r}')
    if not all(isinstance(n, str) and n for n in shape.names):
        raise ValueError(f'Shape: dim names must be non-empty str, got {shape.names!r}')
    for name, size, dim_type, labels in zip(shape.names, shape.sizes, shape.types, shape.labels, strict=True):
        if dim_type not in DIM_TYPES:
            raise ValueError(f'Shape: dim {name!r} has the type {dim_type!r}; the types are {DIM_TYPES}')
        known = isinstance(size, numbers.Integral) and not isinstance(size, bool)
        if not (size is None or isinstance(size, NonUniform) or (known and size >= 0)):
            raise ValueError(f'Shape: dim {name!r} has the size {size!r}; a size is an int >= 0, None or a '
                             f'NonUniform')
        if labels is None:
            continue
        if not isinstance(labels, tuple) or not all(isinstance(label, str) for label in labels):
            raise ValueError(f'Shape: the labels of dim {name!r} must be a tuple of str, got {labels!r}')
        if known and len(labels) != size:
            raise ValueError(f'Shape: dim {name!r} has size {size} but {len(labels)} labels {labels}')


def _check_dense(tensor: Dense) -> None:
    shape, backend = tensor._shape, tensor._backend
    if not isinstance(shape, Shape) or not isinstance(backend, Backend):
        raise TypeError(f'Dense takes a native, a Shape and a Backend, got a {type(shape).__name__} and a '
                        f'{type(backend).__name__}')
    if not shape.is_uniform:
        raise ValueError(f'Dense: the shape {shape} is non-uniform; one native cannot hold it')
    axes = tuple(backend.staticshape(tensor._native))
    if len(axes) != shape.rank or any(a not in (None, s, 1) and s is not None  # 1: broadcast along the dim
                                      for a, s in zip(axes, shape.sizes, strict=True)):
        raise ValueError(f'Dense: the native has the axes {axes} but the shape {shape} says {shape.sizes}')


def _check_expanded(tensor: Expanded) -> None:
    inner, shape = tensor._inner.shape, tensor._shape
    missing = [n for n in inner.names if n not in shape.names]
    differing = [n for n in inner.names if n in shape.names and inner.get_size(n) != shape.get_size(n)]
    if missing or differing:
        raise ValueError(f'Expanded: the inner shape {inner} does not lie within {shape} (dims {missing} missing, '
                         f'{differing} of other sizes)')


def _checking(cls: type, check) -> None:
    unchecked = cls.__init__

    def __init__(self, *args, **kwargs):
        unchecked(self, *args, **kwargs)
        check(self)
    __init__.debug_checked = True
    cls.__init__ = __init__


def enable_debug_checks() -> None:
    """From now on, check every Shape, dense tensor and expanded tensor when it is made.

    A Shape must have tuples of one length, names that are non-empty str, known dim types, sizes that are
    ints >= 0, None or `NonUniform`, and as many labels (str) as entries (the shape functions check for
    repeated names themselves); a dense tensor's native must have one axis per dim, of the dim's size (or 1,
    broadcast); an expanded tensor's values must lie within its Shape. A violation raises a ValueError
    naming it. This slows every operation down; there is no way to turn the checks off again.
    """
    for cls, check in ((Shape, _check_shape), (Dense, _check_dense), (Expanded, _check_expanded)):
        if not getattr(cls.__init__, 'debug_checked', False):
            _checking(cls, check)
