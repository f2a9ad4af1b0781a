"""Comparing values: `close`, `equal`, `always_close`, `assert_close`, what `==` between tensors means inside
`equality_by_...` blocks, and where two trees differ (`find_differences`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._errors import IncompatibleShapes, NoBackendFound
from ..backend import OBJECTS, choose_backend
from ._autodiff import compiling
from ._dims import merge_shapes, shape
from ._elementwise import IS_NAN
from ._layout import Layout
from ._reductions import REDUCTIONS
from ._tensor import EQUALITY_MODE, NUMBER_TYPES, Dense, Tensor, as_tensor, dims_in, dispatch
from ._tree import lists_attributes, tree_map, value_attributes


def _close_mask(a: Tensor, b: Tensor, rel_tolerance, abs_tolerance, equal_nan: bool) -> Tensor:
    """Where `a` and `b` agree: |a - b| <= abs_tolerance + rel_tolerance * |b| (NumPy's `isclose`)."""
    if a.dtype.kind is bool or b.dtype.kind is bool:
        agree = a == b
    else:
        agree = abs(a - b) <= abs_tolerance + rel_tolerance * abs(b)
    if equal_nan and (a.dtype.kind in (float, complex) or b.dtype.kind in (float, complex)):
        agree = agree | (dispatch(IS_NAN, (a,)) & dispatch(IS_NAN, (b,)))
    return agree


def close(*tensors, rel_tolerance=1e-5, abs_tolerance=0, equal_nan: bool = False, reduce=shape):
    """Whether all `tensors` equal the first within the tolerances, broadcasting by dim name.

    Args:
        *tensors: tensors or numbers (or `None`: then all must be `None`).
        rel_tolerance: relative tolerance (a number or a tensor, broadcast by dim name).
        abs_tolerance: absolute tolerance (a number or a tensor).
        equal_nan: count NaN as equal to NaN.
        reduce: the dims over which all values must be close; by default all of them, giving a `bool`.
            Otherwise a bool tensor over the dims not reduced.

    Returns:
        `False` for tensors of incompatible shapes; else whether they are close (see `reduce`).
    """
    if any(t is None for t in tensors):
        return all(t is None for t in tensors)
    like = next((t for t in tensors if isinstance(t, Tensor)), None)
    values = [as_tensor(t, like) for t in tensors]
    tolerances = [as_tensor(rel_tolerance), as_tensor(abs_tolerance)]
    result = None
    for other in values[1:]:
        try:
            agree = _close_mask(values[0], other, tolerances[0], tolerances[1], equal_nan)
        except IncompatibleShapes:
            return False
        result = agree if result is None else result & agree
    if result is None:
        return True
    dims = dims_in(result.shape, reduce)
    result = REDUCTIONS['all'](result, dims)
    return bool(result) if reduce is shape else result


def equal(*objects, equal_nan: bool = False) -> bool:
    """Whether all `objects` equal the first: tensors and numbers by their values (broadcasting by dim name;
    incompatible shapes are unequal), other objects by `==`."""
    if len(objects) < 2:
        return True
    if all(isinstance(o, (Tensor, *NUMBER_TYPES)) for o in objects):
        return close(*objects, rel_tolerance=0, abs_tolerance=0, equal_nan=equal_nan)
    first = objects[0]
    return all(o is first or _plain_equal(first, o) for o in objects[1:])


def _plain_equal(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def always_close(t1, t2, rel_tolerance=1e-5, abs_tolerance=0, equal_nan: bool = False) -> bool:
    """Whether `t1` and `t2` are certainly close in all values, usable inside `jit_compile`d functions.

    While a function is being compiled (or a value is not available), only the same tensor or the same
    native counts as close; otherwise the values are compared like `close`. Tensors of incompatible shapes
    are never close.
    """
    if t1 is t2:
        return True
    if not _concrete(t1, t2):
        return type(t1) is Dense and type(t2) is Dense and t1.shape == t2.shape and t1._native is t2._native
    if isinstance(t1, Tensor) and isinstance(t2, Tensor) and set(t1.shape.names) != set(t2.shape.names):
        return False
    return bool(close(t1, t2, rel_tolerance=rel_tolerance, abs_tolerance=abs_tolerance, equal_nan=equal_nan))


def _concrete(*values) -> bool:
    """Whether the values of all tensors among `values` can be read (not tracers, not inside a compilation)."""
    if compiling():
        return not any(isinstance(v, Tensor) for v in values)
    return all(v.available for v in values if isinstance(v, Tensor))


def assert_close(*values, rel_tolerance: float = 1e-5, abs_tolerance: float = 0, msg: str = '', verbose: bool = True,
                 equal_nan: bool = True) -> None:
    """Raise an AssertionError unless all `values` equal the first within the tolerances, broadcasting by dim name.

    Values may be tensors (non-uniform ones too), numbers, NumPy arrays (compared by position) or trees of
    those of equal structure. The message names the largest difference and where it occurs (and with
    `verbose`, the two values there).
    """
    if len(values) < 2:
        return
    leaves = [_leaves(v) for v in values]
    for other in leaves[1:]:
        if len(other) != len(leaves[0]):
            raise AssertionError(f'{msg + ": " if msg else ""}the values differ in structure: {values[0]!r} and '
                                 f'{other!r}')
        for a, b in zip(leaves[0], other, strict=True):
            _assert_pair(a, b, rel_tolerance, abs_tolerance, msg, equal_nan, verbose)


def _leaves(value) -> list:
    """The leaves of a tree holding tensors; anything else (numbers, arrays, nested lists of numbers) is one leaf."""
    if _holds_tensor(value):
        found = []
        tree_map(lambda t: found.append(t) or t, value, leaf_types=(Tensor, *NUMBER_TYPES, np.ndarray))
        return found
    return [value]


def _holds_tensor(value) -> bool:
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, Tensor) or _holds_tensor(v) for v in value)
    if hasattr(value, '__array__'):  # array-like data (a non-uniform size, say), compared as one value
        return False
    return isinstance(value, dict) or hasattr(type(value), '__dataclass_fields__')


def _varying_dim(t: Tensor) -> str | None:
    """A dim that the non-uniform sizes of `t` vary along, or None for a uniform tensor."""
    for size in t.shape.sizes:
        along = getattr(size, 'along', None)
        if along:
            return along[0]
    return None


def _assert_pair(a, b, rel: float, abs_: float, msg: str, equal_nan: bool, verbose: bool) -> None:
    if a is b:
        return
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        like = a if isinstance(a, Tensor) else b
        a, b = as_tensor(a, like), as_tensor(b, like)
        varying = _varying_dim(a) or _varying_dim(b)
        if varying is not None:  # non-uniform: compare the uniform parts along a dim the sizes vary with
            size = (a if varying in a.shape.names else b).shape.get_size(varying)
            for i in range(size):
                where = f'{msg}, non-uniform part {varying}={i}' if msg else f'non-uniform part {varying}={i}'
                _assert_pair(a[{varying: i}], b[{varying: i}], rel, abs_, where, equal_nan, verbose)
            return
        full = merge_shapes(a.shape, b.shape)
        a_np = np.broadcast_to(a.numpy(full.names), full.sizes)
        b_np = np.broadcast_to(b.numpy(full.names), full.sizes)
        where = full
    else:
        a_np, b_np, where = np.asarray(a), np.asarray(b), None
    if a_np.dtype.kind in 'biufc' and b_np.dtype.kind in 'biufc':
        if np.allclose(a_np, b_np, rtol=rel, atol=abs_, equal_nan=equal_nan):
            return
        diff = np.abs(a_np.astype(complex) - b_np.astype(complex)) if a_np.size or b_np.size else np.zeros(0)
        diff = np.broadcast_to(np.where(np.isnan(diff), np.inf, diff), np.broadcast_shapes(a_np.shape, b_np.shape))
    elif np.array_equal(a_np, b_np):
        return
    else:
        diff = np.broadcast_to(np.asarray(a_np != b_np, float), np.broadcast_shapes(a_np.shape, b_np.shape))
    worst = np.unravel_index(np.argmax(diff), diff.shape) if diff.size else ()
    location = dict(zip(where.names, (int(i) for i in worst), strict=True)) if where is not None else worst
    a_at = np.broadcast_to(a_np, diff.shape)[worst] if diff.size else a_np
    b_at = np.broadcast_to(b_np, diff.shape)[worst] if diff.size else b_np
    values = f' ({a_at!r} vs {b_at!r})' if verbose else ''
    raise AssertionError(f'{msg + ": " if msg else ""}values differ beyond rel={rel}, abs={abs_}: largest '
                         f'difference {diff[worst] if diff.size else "n/a"} at {location}{values}')


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
        rel_tolerance: relative tolerance, as for `close`.
        abs_tolerance: absolute tolerance, as for `close`.
        equal_nan: count NaN as equal to NaN.
    """
    token = EQUALITY_MODE.set(('value', rel_tolerance, abs_tolerance, equal_nan))
    try:
        yield
    finally:
        EQUALITY_MODE.reset(token)


# --- differences between trees ---------------------------------------------------------------------


def find_differences(tree1, tree2, compare_tensors_by_id: bool = False, attr_type: Callable = value_attributes,
                     tensor_equality: Callable | None = None) -> list[tuple[str, str, Any, Any]]:
    """Every place where two trees differ, as `(description, path, value in tree1, value in tree2)`.

    The trees are walked together: tuples and lists item by item (path `[i]`), dicts key by key (`[key]`),
    dataclasses and objects listing `__value_attrs__` attribute by attribute (`.name`), layouts through the
    objects they hold. A difference is reported where the structures part (one value is None, types,
    lengths, keys or attributes differ) or where two leaves differ: tensors by their dims (in any order) and
    then their values, natives by their shape and values, other objects by `==`. NaN equals NaN.

    Args:
        tree1: a tree or leaf.
        tree2: a tree or leaf.
        compare_tensors_by_id: tensors differ unless they are the same object.
        attr_type: the attributes of dataclasses and other objects to compare: `value_attributes` or
            `variable_attributes` (both in `lazyphi.math.magic`), or a function of the object giving names.
        tensor_equality: compares two tensors of the same dims; by default `equal(a, b, equal_nan=True)`.

    Returns:
        A list, empty where the trees agree.
    """
    found = []
    _differences(tree1, tree2, '', found, compare_tensors_by_id, attr_type,
                 tensor_equality or functools.partial(equal, equal_nan=True))
    return found


def _differences(a, b, path: str, found: list, by_id: bool, attr_type: Callable, tensor_equality: Callable) -> None:
    if a is b:
        return
    if a is None or b is None:
        found.append(('Only one tree has a value, other is None', path, a, b))
    elif isinstance(a, Layout) or isinstance(b, Layout):
        if not (isinstance(a, Layout) and isinstance(b, Layout)):
            other = b if isinstance(a, Layout) else a
            found.append((f'Only one value is a Layout, the other is {type(other).__name__}', path, a, b))
        else:
            _differences(a._obj, b._obj, path, found, by_id, attr_type, tensor_equality)
    elif isinstance(a, Tensor) or isinstance(b, Tensor):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            found.append((f'Only one value is a Tensor: {type(a).__name__} vs {type(b).__name__}', path, a, b))
        elif by_id:
            found.append(('Tensor ids do not match', path, a, b))
        elif _dims_of(a.shape) != _dims_of(b.shape):
            found.append((f'Tensor shapes do not match: {a.shape} vs {b.shape}', path, a, b))
        elif not tensor_equality(a, b):
            found.append(('Tensor values do not match', path, a, b))
    elif type(a) is not type(b):
        found.append((f'Types do not match: {type(a).__name__} vs {type(b).__name__}', path, a, b))
    elif isinstance(a, (tuple, list)):
        if len(a) != len(b):
            found.append((f'Lengths do not match: {len(a)} vs {len(b)}', path, a, b))
        else:
            for i, (item_a, item_b) in enumerate(zip(a, b, strict=True)):
                _differences(item_a, item_b, f'{path}[{i}]', found, by_id, attr_type, tensor_equality)
    elif isinstance(a, dict):
        if set(a) != set(b):
            found.append((f'Keys do not match: {set(a)} vs {set(b)}', path, a, b))
        else:
            for key, value in a.items():
                _differences(value, b[key], f'{path}[{key}]', found, by_id, attr_type, tensor_equality)
    elif dataclasses.is_dataclass(a) or lists_attributes(a):
        names_a, names_b = attr_type(a), attr_type(b)
        if set(names_a) != set(names_b):
            found.append((f'Available properties do not match: {set(names_a)} vs {set(names_b)}', path, a, b))
        else:
            for name in names_a:
                _differences(getattr(a, name), getattr(b, name), f'{path}.{name}', found, by_id, attr_type,
                             tensor_equality)
    else:
        difference = _leaf_difference(a, b)
        if difference:
            found.append((difference, path, a, b))


def _dims_of(s) -> dict:
    return {n: (size, t, labels) for n, size, t, labels in zip(s.names, s.sizes, s.types, s.labels, strict=True)}


def _leaf_difference(a, b) -> str | None:
    """How two leaves of one type differ: natives by shape and values (NaN equal to NaN), others by `==`."""
    if isinstance(a, NUMBER_TYPES):
        same = a == b or (a != a and b != b)  # NaN is the only value unequal to itself
        return None if same else 'Values do not match'
    try:
        backend = choose_backend(a, b)
    except NoBackendFound:
        backend = None
    if backend is None or backend is OBJECTS or isinstance(a, str):
        if isinstance(a, np.ndarray):
            return None if np.array_equal(a, b) else 'Values do not match'  # object arrays: element by element
        return None if _plain_equal(a, b) else 'Values do not match'
    shape_a, shape_b = tuple(backend.staticshape(a)), tuple(backend.staticshape(b))
    if shape_a != shape_b:
        return f'Shapes do not match: {shape_a} vs {shape_b}'
    same = backend.equal(a, b)
    if backend.dtype(a).kind in (float, complex):
        same = backend.or_(same, backend.and_(backend.isnan(a), backend.isnan(b)))
    return None if bool(backend.numpy(backend.all(same))) else 'Values do not match'
