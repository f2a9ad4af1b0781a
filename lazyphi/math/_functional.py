"""Functional tools: iterating a map, calling a function per slice (`map`, `broadcast`), changing dim types
around a call (`map_types`), and timing (`perf_counter`)."""

from __future__ import annotations

import builtins
import functools
import time
from collections.abc import Callable

import numpy as np

from ..backend import NUMPY
from ._dims import batch, channel, dual, instance, merge_shapes, shape, spatial
from ._magic_ops import rename_dims, slice_, stack
from ._shape import EMPTY_SHAPE, Shape
from ._structure import as_dim, stack_tensors
from ._tensor import NUMBER_TYPES, Dense, Tensor, dims_in


def iterate(map_function: Callable, iterations: int | Shape, *x0, f_kwargs: dict | None = None,
            range: Callable = builtins.range, measure: Callable | None = None, substeps: int = 1, **f_kwargs_):
    """Apply `map_function` repeatedly, each time to the previous result, starting from `x0`.

    Args:
        map_function: called as `map_function(*x, **f_kwargs)`; returns the next state (a tuple for several
            values). If it returns more values than `x0` has, only the first `len(x0)` are passed on, but all
            are returned.
        iterations: the number of steps, or a dim such as `batch(time=10)` along which the trajectory is
            stacked: `x0` followed by the state after each step (values of `x0` that are None are left out).
        *x0: the initial state.
        f_kwargs: keyword arguments passed to every call (as are any further keyword arguments).
        range: the range function to loop with (for example a progress-bar range); used for the steps only.
        measure: a function without arguments (such as `time.perf_counter`) called before and after each step;
            the differences are returned too: their sum, or their trajectory along the iterations dim.
        substeps: calls of `map_function` per step; only steps are recorded and measured.

    Returns:
        The final state or the stacked trajectory (a tuple for several values); with `measure`, a pair of
        that and the measurements.
    """
    if not x0:
        raise ValueError('iterate() needs at least one initial value after `iterations`')
    if not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f'iterate(): substeps must be a positive int, got {substeps!r}')
    kwargs = {**(f_kwargs or {}), **f_kwargs_}
    count = len(x0)
    if isinstance(iterations, Shape):
        dim = as_dim(iterations, 'iterations')
        if not isinstance(dim.size, int):
            raise ValueError(f'iterate(): the trajectory dim needs a size, e.g. batch(time=10); got {dim}')
        steps = dim.size
    elif isinstance(iterations, int) and not isinstance(iterations, bool) and iterations >= 0:
        dim, steps = None, iterations
    else:
        raise ValueError(f'iterate(): iterations must be a non-negative int or a dim with a size; got {iterations!r}')
    state, trajectory, measured = tuple(x0), [tuple(x0)], []
    for _ in range(steps):
        start = measure() if measure is not None else None
        for _ in builtins.range(substeps):
            state = _as_state(map_function(*state[:count], **kwargs))
        if measure is not None:
            measured.append(measure() - start)
        if dim is not None:
            trajectory.append(state)
    if dim is None:
        result = state if len(state) > 1 else state[0]
        return (result, builtins.sum(measured)) if measure is not None else result
    stacked = tuple(_stack_trajectory([s[i] for s in trajectory if len(s) > i and s[i] is not None], dim)
                    for i in builtins.range(len(state)))
    result = stacked if len(stacked) > 1 else stacked[0]
    if measure is None:
        return result
    return result, stack_tensors([_scalar64(m) for m in measured], dim.with_size(len(measured)))


def _as_state(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _stack_trajectory(values: list, dim: Shape):
    return stack(values, dim.with_size(len(values)))


def _scalar64(value) -> Tensor:
    return Dense(np.asarray(value, np.float64), EMPTY_SHAPE, NUMPY)


# --- calling a function per slice ----------------------------------------------------------


def map(function: Callable, *args, dims=shape, range=builtins.range, unwrap_scalars: bool = True,
        expand_results: bool = False, simplify: bool = False, map_name=None, **kwargs):
    """Call `function` on every slice of the arguments along `dims` and stack the results along those dims.

    Args:
        function: called once per position along `dims`; returns a value that can be stacked (a tensor,
            number or tree) or a tuple of them, or None (then every call must return None there).
        *args: positional arguments; tensors and trees are sliced along `dims`, other values passed as they are.
        dims: the dims to iterate over: a dim filter applied to the shape of all arguments together
            (by default all of their dims), or a Shape.
        range: the range function to loop with (for example a progress-bar range).
        unwrap_scalars: pass a tensor holding one value without dims as that value (a Python number) instead.
        expand_results: expand results to the dims any of them has before stacking.
        simplify: unused; results are stacked as they are.
        map_name: unused; a name for progress displays.
        **kwargs: keyword arguments, sliced like `args`.

    Returns:
        The stacked results (a tuple of them for a function returning a tuple).
    """
    sliceable = [a for a in (*args, *kwargs.values()) if _has_shape(a)]
    full = merge_shapes(*[shape(a) for a in sliceable], allow_varying_sizes=True) if sliceable else EMPTY_SHAPE
    names = dims.names if isinstance(dims, Shape) else dims_in(full, dims)
    grid = full.only(names, reorder=True)
    for name, size in zip(grid.names, grid.sizes, strict=True):
        if not isinstance(size, int):
            raise ValueError(f'map(): dim {name!r} has no single size ({size}); map along the dims it varies with')
    results = []
    for flat in range(int(np.prod(grid.sizes, dtype=np.int64)) if grid else 1):
        position = dict(zip(grid.names, np.unravel_index(flat, grid.sizes), strict=True)) if grid else {}
        position = {n: int(i) for n, i in position.items()}
        call_args = [_sliced(a, position, unwrap_scalars) for a in args]
        call_kwargs = {k: _sliced(v, position, unwrap_scalars) for k, v in kwargs.items()}
        results.append(function(*call_args, **call_kwargs))
    if not grid:
        return results[0]
    if all(r is None for r in results):
        return None
    if isinstance(results[0], tuple):
        return tuple(_stacked([r[i] for r in results], grid, expand_results) for i in builtins.range(len(results[0])))
    return _stacked(results, grid, expand_results)


def _has_shape(value) -> bool:
    if isinstance(value, (str, bytes)) or value is None:
        return False
    try:
        return bool(shape(value))
    except TypeError:
        return False


def _sliced(value, position: dict, unwrap_scalars: bool):
    if not _has_shape(value):
        return value
    result = slice_(value, position) if position else value
    if unwrap_scalars and isinstance(result, Tensor) and not result.shape:
        return result.numpy().item()
    return result


def _stacked(results: list, grid: Shape, expand_values: bool):
    """Stack the results of a flat loop over `grid` (last dim fastest) along its dims."""
    if grid.rank == 1:
        return stack(list(results), grid, expand_values=expand_values)
    inner = grid[1:]
    per = int(np.prod(inner.sizes, dtype=np.int64))
    rows = [_stacked(results[i * per:(i + 1) * per], inner, expand_values) for i in builtins.range(grid.sizes[0])]
    return stack(rows, grid[0], expand_values=expand_values)


def broadcast(function: Callable | None = None, dims=shape, range=builtins.range, unwrap_scalars: bool = True,
              simplify: bool = False, name: str | bool = True):
    """Decorate `function` to be called once per slice of its tensor arguments along `dims` (see `map`).

    Usable as `@broadcast` or `@broadcast(dims=channel)`.
    """
    if function is None:
        return functools.partial(broadcast, dims=dims, range=range, unwrap_scalars=unwrap_scalars, simplify=simplify,
                                 name=name)

    @functools.wraps(function)
    def broadcast_function(*args, **kwargs):
        return map(function, *args, dims=dims, range=range, unwrap_scalars=unwrap_scalars, simplify=simplify,
                   **kwargs)
    return broadcast_function


# --- changing dim types around a call ------------------------------------------------------


def map_types(f: Callable, dims, dim_type) -> Callable:
    """`f` wrapped so that it sees the dims `dims` of its arguments as dims of type `dim_type`.

    The dims are converted on the way in and converted back in the results.

    Args:
        f: the function.
        dims: a dim filter (such as `spatial`), names or a Shape selecting the dims to convert.
        dim_type: the type they have inside `f` (a constructor such as `batch`, or a type name).
    """
    @functools.wraps(f)
    def with_types(*args, **kwargs):
        converted = {}

        def convert(value):
            if not _has_shape(value):
                return value
            own = shape(value)
            selected = own.only(dims_in(own, dims), reorder=True)
            if not selected:
                return value
            for name in selected.names:
                converted[name] = selected[name]
            return rename_dims(value, selected.names, selected.as_type(dim_type))
        result = f(*[convert(a) for a in args], **{k: convert(v) for k, v in kwargs.items()})
        return _restored_types(result, converted)
    return with_types


def _restored_types(value, converted: dict):
    if isinstance(value, tuple):
        return tuple(_restored_types(v, converted) for v in value)
    if not _has_shape(value):
        return value
    present = [n for n in shape(value).names if n in converted]
    if not present:
        return value
    original = converted[present[0]]
    for name in present[1:]:
        original = original & converted[name] if name not in original.names else original
    return rename_dims(value, present, original.only(present, reorder=True))


def _map_between(dims, dim_type, name: str, description: str) -> Callable:
    def convert(f: Callable, *, dims=dims, dim_type=dim_type) -> Callable:
        return map_types(f, dims, dim_type)
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = f'`map_types(f, dims, dim_type)` converting {description} by default.'
    return convert


map_c2b = _map_between(channel, batch, 'map_c2b', 'channel dims to batch dims')
map_c2d = _map_between(channel, dual, 'map_c2d', 'channel dims to dual dims')
map_d2b = _map_between(dual, batch, 'map_d2b', 'dual dims to batch dims')
map_d2c = _map_between(dual, channel, 'map_d2c', 'dual dims to channel dims')
map_i2b = _map_between(instance, batch, 'map_i2b', 'instance dims to batch dims')
map_s2b = _map_between(spatial, batch, 'map_s2b', 'spatial dims to batch dims')


# --- timing --------------------------------------------------------------------------------


def perf_counter(wait_for_tensor, *wait_for_tensors: Tensor) -> Tensor:
    """`time.perf_counter()` once the given tensors are computed, as a float64 tensor without dims.

    Inside a function being compiled by `jit_compile` the time is taken while tracing.
    """
    for t in (wait_for_tensor, *wait_for_tensors):
        if isinstance(t, Tensor) and t.available:
            dense = t._dense()
            dense.backend.block_until_ready(dense._native)
        elif not isinstance(t, (Tensor, *NUMBER_TYPES)) and t is not None:
            raise TypeError(f'perf_counter() waits for tensors, got {type(t).__name__}')
    return Dense(np.asarray(time.perf_counter(), np.float64), EMPTY_SHAPE, NUMPY)

