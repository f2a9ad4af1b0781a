"""Iterating a map, and checking values for closeness."""

from __future__ import annotations

import builtins
from collections.abc import Callable

import numpy as np

from ._shape import Shape, merge_shapes
from ._structure import as_dim, stack_tensors
from ._tensor import Tensor, as_tensor


def iterate(map_function: Callable, iterations: int | Shape, *x0, f_kwargs: dict | None = None,
            range: Callable = builtins.range):
    """Apply `map_function` repeatedly, starting from `x0`.

    Args:
        map_function: called as `map_function(*x, **f_kwargs)`; returns the next state (a tuple when
            there are several state values).
        iterations: the number of applications, or a dim (e.g. `batch(time=10)`) along which the
            trajectory is stacked: `x0` followed by every state, `size + 1` entries in all.
        *x0: the initial state.
        f_kwargs: extra keyword arguments passed to every call.
        range: the range function to loop with (for example a progress-bar range).

    Returns:
        The final state, or the stacked trajectory; a tuple when there are several state values.
    """
    if not x0:
        raise ValueError('iterate() needs at least one initial value after `iterations`')
    kwargs = f_kwargs or {}
    if isinstance(iterations, Shape):
        dim = as_dim(iterations, 'iterations')
        if not isinstance(dim.size, int):
            raise ValueError(f'iterate(): the trajectory dim needs a size, e.g. batch(time=10); got {dim}')
        trajectory = [x0]
        for _ in range(dim.size):
            x0 = _as_state(map_function(*x0, **kwargs))
            trajectory.append(x0)
        stacked = tuple(stack_tensors([step[i] for step in trajectory], dim.with_size(dim.size + 1))
                        for i in builtins.range(len(x0)))
        return stacked if len(stacked) > 1 else stacked[0]
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 0:
        raise ValueError(f'iterate(): iterations must be a non-negative int or a dim with a size; got {iterations!r}')
    for _ in range(iterations):
        x0 = _as_state(map_function(*x0, **kwargs))
    return x0 if len(x0) > 1 else x0[0]


def _as_state(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def assert_close(*values, rel_tolerance: float = 1e-5, abs_tolerance: float = 0, msg: str = '',
                 equal_nan: bool = True) -> None:
    """Raise an AssertionError unless all `values` are equal within the tolerances, broadcasting by dim name.

    Values may be tensors, numbers or NumPy arrays (compared positionally). The message names the
    largest difference and where it occurs.
    """
    if len(values) < 2:
        return
    first = values[0]
    for other in values[1:]:
        _assert_pair(first, other, rel_tolerance, abs_tolerance, msg, equal_nan)


def _assert_pair(a, b, rel: float, abs_: float, msg: str, equal_nan: bool) -> None:
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        like = a if isinstance(a, Tensor) else b
        a, b = as_tensor(a, like), as_tensor(b, like)
        shape = merge_shapes(a.shape, b.shape)
        a_np = np.broadcast_to(a.numpy(shape.names), shape.sizes)
        b_np = np.broadcast_to(b.numpy(shape.names), shape.sizes)
        where = shape
    else:
        a_np, b_np, where = np.asarray(a), np.asarray(b), None
    if np.allclose(a_np, b_np, rtol=rel, atol=abs_, equal_nan=equal_nan):
        return
    diff = np.abs(a_np.astype(complex) - b_np.astype(complex)) if a_np.size else np.zeros(0)
    diff = np.where(np.isnan(diff), np.inf, diff)
    worst = np.unravel_index(np.argmax(diff), diff.shape) if diff.size else ()
    location = dict(zip(where.names, (int(i) for i in worst), strict=True)) if where is not None else worst
    raise AssertionError(f'{msg + ": " if msg else ""}values differ beyond rel={rel}, abs={abs_}: largest difference '
                         f'{diff[worst] if diff.size else "n/a"} at {location} ({a_np[worst]!r} vs {b_np[worst]!r})')

