"""Comparing whole tensors: `close`, and what `==` between tensors means inside `equality_by_...` blocks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from .._errors import IncompatibleShapes
from ._shape import merge_shapes
from ._tensor import EQUALITY_MODE, Tensor, as_tensor


def close(*tensors, rel_tolerance: float = 1e-5, abs_tolerance: float = 0, equal_nan: bool = True) -> bool:
    """Whether all `tensors` (tensors, numbers, natives) hold the same values within the tolerances.

    Values are compared after broadcasting by dim name; tensors whose shapes cannot be broadcast together
    are not close. Python data next to a tensor is named after its dims as in an operator (`t == [1, 2]`).
    """
    if len(tensors) < 2:
        return True
    first = tensors[0]
    return all(_pair_close(first, other, rel_tolerance, abs_tolerance, equal_nan) for other in tensors[1:])


def _pair_close(a, b, rel: float, abs_: float, equal_nan: bool) -> bool:
    if a is b:
        return True
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        like = a if isinstance(a, Tensor) else b
        a, b = as_tensor(a, like), as_tensor(b, like)
        try:
            shape = merge_shapes(a.shape, b.shape)
        except IncompatibleShapes:
            return False
        a_np = np.broadcast_to(a.numpy(shape.names), shape.sizes)
        b_np = np.broadcast_to(b.numpy(shape.names), shape.sizes)
    else:
        a_np, b_np = np.asarray(a), np.asarray(b)
        try:
            np.broadcast_shapes(a_np.shape, b_np.shape)
        except ValueError:
            return False
    if a_np.dtype.kind not in 'biufc' or b_np.dtype.kind not in 'biufc':
        return bool(np.all(a_np == b_np))
    return bool(np.allclose(a_np, b_np, rtol=rel, atol=abs_, equal_nan=equal_nan))


@contextlib.contextmanager
def equality_by_ref() -> Iterator[None]:
    """Inside the block, `a == b` between tensors is `a is b` (a 0-d bool tensor) instead of element-wise.

    Useful to compare structures holding tensors, such as tuples or dataclasses, by identity.
    """
    token = EQUALITY_MODE.set('ref')
    try:
        yield
    finally:
        EQUALITY_MODE.reset(token)


@contextlib.contextmanager
def equality_by_shape_and_value(rel_tolerance: float = 0., abs_tolerance: float = 0.,
                                equal_nan: bool = False) -> Iterator[None]:
    """Inside the block, `a == b` between tensors is whether they have the same dims and `close` values.

    Args:
        rel_tolerance, abs_tolerance, equal_nan: as for `close`.
    """
    token = EQUALITY_MODE.set(('value', rel_tolerance, abs_tolerance, equal_nan))
    try:
        yield
    finally:
        EQUALITY_MODE.reset(token)
