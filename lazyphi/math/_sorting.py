"""Operations along dims: sorting, arg-extrema and the values there, quantiles and cumulative sums.

Each is an `Op` of category `ALONG`: it combines the values along some dims and works element-wise along
every other. Its parameters are `(dims, result, *rest)`, where `result(inputs, dims, *rest)` gives the
result's `ShapeDtype`, so the tracer knows the result without running the operation. The dense
implementations cast where the libraries disagree (indices are int64, integer sums int64), so the
declared dtype holds on every backend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._errors import DimNotFound
from ..backend import DType, get_precision
from ._dims import channel, instance, non_batch, parse_dim_spec
from ._elementwise import float_input
from ._gather_scatter import gather
from ._shape import Shape, ShapeDtype, concat_shapes, resolve_dims
from ._structure import expand_tensor, rename_tensor_dims
from ._tensor import ALONG, Dense, Op, Tensor, as_tensor, dims_in, dispatch
from ._tree import tree_map

INT64 = DType(int, 64)
INDEX_DIM = channel('index')
QUANTILES_DIM = instance('quantiles')


def _flat_native(t: Dense, dims: tuple):
    """`t`'s native laid out as (the other dims..., `dims` flattened into one last axis), and the other dims."""
    rest = t._shape.without(dims)
    native = t._native_in(rest.names + dims)
    count = math.prod(t._shape.get_size(d) for d in dims)
    return t._backend.reshape(native, (*tuple(rest.sizes), count)), rest


def _as_int64(backend, native):
    return native if backend.dtype(native) == INT64 else backend.cast(native, INT64)


def _without_labels(shape: Shape, dims: tuple) -> Shape:
    for d in dims:
        shape = shape.with_dim_size(d, shape.get_size(d))
    return shape


# --- sorting -------------------------------------------------------------------------------


def _sorted_result(inputs: Sequence[Tensor], dims: tuple) -> ShapeDtype:
    return ShapeDtype(_without_labels(inputs[0].shape, dims), inputs[0].dtype)


def _argsorted_result(inputs: Sequence[Tensor], dims: tuple) -> ShapeDtype:
    return ShapeDtype(_without_labels(inputs[0].shape, dims), INT64)


def _dense_sort(ts: Sequence[Dense], dims: tuple, result) -> Dense:
    t = ts[0]
    native = t._backend.sort(t._native, t._shape.index(dims[0]))
    return Dense(native, result(ts, dims).shape, t._backend)


def _dense_argsort(ts: Sequence[Dense], dims: tuple, result) -> Dense:
    t = ts[0]
    native = _as_int64(t._backend, t._backend.argsort(t._native, t._shape.index(dims[0])))
    return Dense(native, result(ts, dims).shape, t._backend)


SORT = Op('sort', ALONG, _dense_sort)
ARGSORT = Op('argsort', ALONG, _dense_argsort)


def _sort_dim(shape: Shape, dim) -> str | None:
    names = dims_in(shape, dim)
    if len(names) > 1:
        raise ValueError(f'sort() sorts along one dim at a time but got {names}; pack them into one with '
                         f'pack_dims() first')
    return names[0] if names else None


def sort(x, dim=non_batch, key: Tensor | None = None):
    """`x` sorted in ascending order along `dim`; the labels along `dim` are dropped.

    Args:
        x: a Tensor; with `key`, any tree of tensors, in which the type `range` stands for the permutation.
        dim: the one dim to sort along; if `x` (or `key`) lacks it, `x` is returned as it is.
        key: sort by these values instead of `x`'s, reordering every tensor of `x` alike.

    Returns:
        The sorted tensor or tree. `sort((x, range), key=k)` gives `(x sorted by k, the permutation)`.
    """
    if key is None:
        x = as_tensor(x)
        name = _sort_dim(x.shape, dim)
        if name is None:
            return x
        return dispatch(SORT, (x,), ((name,), _sorted_result))
    key = as_tensor(key)
    name = _sort_dim(key.shape, dim)
    if name is None:
        return x
    permutation = dispatch(ARGSORT, (key,), ((name,), _argsorted_result))
    return _map_with_range(lambda v: take_along(v, name, permutation), x, permutation)


def _map_with_range(fn, tree, indices: Tensor):
    """`fn` applied to every tensor of `tree`; the type `range` in it becomes `indices`."""
    if tree is range:
        return indices
    return tree_map(lambda leaf: indices if leaf is range else fn(leaf), tree, leaf_types=(Tensor, type))


def take_along(value: Tensor, dim: str, indices: Tensor) -> Tensor:
    """`value` reordered along `dim` by the integer `indices`, which have `dim` too (other dims broadcast)."""
    value = as_tensor(value)
    if dim not in value.shape.names:
        return value
    temporary = dim + '_taken'
    picked = rename_tensor_dims(indices, dim, temporary)
    return rename_tensor_dims(value[{dim: picked}], temporary, indices.shape[dim])


# --- arg-extrema ---------------------------------------------------------------------------


def _arg_extremum_result(inputs: Sequence[Tensor], dims: tuple, index_dim: Shape) -> ShapeDtype:
    return ShapeDtype(concat_shapes(inputs[0].shape.without(dims), index_dim.with_size(dims)), INT64)


def _dense_arg_extremum(fn_name: str):
    def run(ts: Sequence[Dense], dims: tuple, result, index_dim: Shape) -> Dense:
        t = ts[0]
        backend = t._backend
        flat, rest = _flat_native(t, dims)
        flat_index = _as_int64(backend, getattr(backend, fn_name)(flat, len(rest.sizes)))
        components = []
        stride = math.prod(t._shape.get_size(d) for d in dims)
        for d in dims:
            size = t._shape.get_size(d)
            stride //= size
            components.append(backend.mod(backend.floordiv(flat_index, stride), size))
        native = backend.stack(components, len(rest.sizes))
        return Dense(native, result(ts, dims, index_dim).shape, backend)
    return run


ARGMAX = Op('argmax', ALONG, _dense_arg_extremum('argmax'))
ARGMIN = Op('argmin', ALONG, _dense_arg_extremum('argmin'))


def _arg_extremum(op: Op, x, dim, index_dim: Shape) -> Tensor:
    x = as_tensor(x)
    names = dims_in(x.shape, dim)
    if not names:
        raise DimNotFound(f'{op.name}(): {dim!r} names no dim of {x.shape}')
    return dispatch(op, (x,), (names, _arg_extremum_result, index_dim))


def argmax(x: Tensor, dim, index_dim: Shape = INDEX_DIM) -> Tensor:
    """The position of the largest value along `dim`, as integers along `index_dim` labelled by the dim names.

    Several dims are searched jointly; the first position wins among equal values.
    """
    return _arg_extremum(ARGMAX, x, dim, index_dim)


def argmin(x: Tensor, dim, index_dim: Shape = INDEX_DIM) -> Tensor:
    """The position of the smallest value along `dim`, as integers along `index_dim` labelled by the dim names."""
    return _arg_extremum(ARGMIN, x, dim, index_dim)


def _at_extremum(op: Op, value, key, dim):
    key = as_tensor(key)
    names = dims_in(key.shape, dim)
    if not names:
        raise DimNotFound(f'{op.name}(): {dim!r} names no dim of the key {key.shape}')
    index = dispatch(op, (key,), (names, _arg_extremum_result, INDEX_DIM))
    return _map_with_range(lambda v: gather(v, index), value, index)


def at_max(value, key: Tensor, dim=non_batch):
    """The entries of `value` where `key` is largest along `dim`.

    Args:
        value: a Tensor or tree of tensors to look up; the type `range` in it stands for the positions.
        key: the values compared; they have the dims `dim`.
        dim: the dims searched.
    """
    return _at_extremum(ARGMAX, value, key, dim)


def at_min(value, key: Tensor, dim=non_batch):
    """The entries of `value` where `key` is smallest along `dim` (see `at_max`)."""
    return _at_extremum(ARGMIN, value, key, dim)


# --- quantiles -----------------------------------------------------------------------------


def _float_dtype(dtype: DType) -> DType:
    return dtype if dtype.kind in (float, complex) else DType(float, get_precision())


def _quantile_result(inputs: Sequence[Tensor], dims: tuple, quantiles: tuple, quantile_dim) -> ShapeDtype:
    rest = inputs[0].shape.without(dims)
    shape = rest if quantile_dim is None else concat_shapes(quantile_dim, rest)
    return ShapeDtype(shape, _float_dtype(inputs[0].dtype))


def _dense_quantile(ts: Sequence[Dense], dims: tuple, result, quantiles: tuple, quantile_dim) -> Dense:
    t = ts[0]
    backend = t._backend
    flat, _ = _flat_native(t, dims)
    flat = float_input(backend, flat)
    q = backend.cast(backend.as_tensor(list(quantiles) if quantile_dim is not None else quantiles[0]),
                     backend.dtype(flat))
    return Dense(backend.quantile(flat, q), result(ts, dims, quantiles, quantile_dim).shape, backend)


QUANTILE = Op('quantile', ALONG, _dense_quantile)


def quantile(value: Tensor, quantiles, dim=non_batch) -> Tensor:
    """Quantiles of the values along `dim`, interpolating linearly between values (NumPy's default).

    Args:
        value: the values; integers are read as floats of the current precision.
        quantiles: a number in [0, 1]; a tuple or list of them (listed along `instance('quantiles')`);
            or a tensor of them with one dim (listed along that dim).
        dim: the dims to take quantiles over; several are taken jointly.
    """
    value = as_tensor(value)
    if isinstance(quantiles, Tensor):
        if quantiles.shape.rank > 1:
            raise ValueError(f'quantile(): a tensor of quantiles must have at most one dim, got {quantiles.shape}')
        quantile_dim = quantiles.shape if quantiles.shape.rank else None
        quantiles = tuple(float(q) for q in quantiles.numpy().reshape(-1))
    elif isinstance(quantiles, (tuple, list)):
        quantile_dim = QUANTILES_DIM.with_size(len(quantiles))
        quantiles = tuple(float(q) for q in quantiles)
    else:
        quantile_dim, quantiles = None, (float(quantiles),)
    if not all(0 <= q <= 1 for q in quantiles):
        raise ValueError(f'quantile(): quantiles must lie in [0, 1], got {quantiles}')
    names = dims_in(value.shape, dim)
    if not names:
        raise DimNotFound(f'quantile(): {dim!r} names no dim of {value.shape}')
    return dispatch(QUANTILE, (value,), (names, _quantile_result, quantiles, quantile_dim))


def median(value, dim=non_batch) -> Tensor:
    """The median of the values along `dim` (the mean of the two middle values for an even count)."""
    return quantile(value, 0.5, dim)


# --- cumulative sums -----------------------------------------------------------------------


def _cumsum_dtype(dtype: DType) -> DType:
    return INT64 if dtype.kind in (bool, int) else dtype


def _cumsum_result(inputs: Sequence[Tensor], dims: tuple, include_0: bool, include_sum: bool) -> ShapeDtype:
    shape = inputs[0].shape
    change = int(include_0) + int(include_sum) - 1
    for d in dims:
        shape = shape.with_dim_size(d, shape.get_size(d) + change)
    return ShapeDtype(shape, _cumsum_dtype(inputs[0].dtype))


def _dense_cumsum(ts: Sequence[Dense], dims: tuple, result, include_0: bool, include_sum: bool) -> Dense:
    t = ts[0]
    backend = t._backend
    flat, rest = _flat_native(t, dims)
    if backend.dtype(flat).kind in (bool, int):
        flat = _as_int64(backend, flat)
    native = backend.cumsum(flat, len(rest.sizes))
    if include_0:
        native = backend.pad(native, [(0, 0)] * len(rest.sizes) + [(1, 0)])
    if not include_sum:
        native = native[(slice(None),) * len(rest.sizes) + (slice(0, -1),)]
    shape = result(ts, dims, include_0, include_sum).shape
    along = shape.only(dims, reorder=True)
    laid_out = Dense(backend.reshape(native, tuple(rest.sizes) + tuple(along.sizes)), concat_shapes(rest, along),
                     backend)
    return Dense(laid_out._native_in(shape.names), shape, backend)


CUMSUM = Op('cumulative_sum', ALONG, _dense_cumsum)


def cumulative_sum(x: Tensor, dim, include_0: bool = False, include_sum: bool = True, index_dim=None) -> Tensor:
    """Cumulative sum of `x` along `dim`; several dims are summed as one, flattened in the order given.

    Args:
        x: the values; integer and bool sums are 64-bit integers.
        dim: the dim or dims to sum along.
        include_0: start with a 0 (one more entry along `dim`).
        include_sum: end with the total (without it, one entry less).
        index_dim: if given (a channel dim or its name), the result is expanded along it, labelled by `dim`.
    """
    x = as_tensor(x)
    names = resolve_dims(dim, x.shape)
    missing = [n for n in names if n not in x.shape.names]
    if missing or not names:
        raise DimNotFound(f'cumulative_sum(): {dim!r} names dims {missing or names} that {x.shape} lacks')
    if len(names) > 1 and include_0 == include_sum:
        raise ValueError(f'cumulative_sum() over several dims {names} keeps their sizes only with exactly one of '
                         f'include_0 and include_sum; got include_0={include_0}, include_sum={include_sum}')
    result = dispatch(CUMSUM, (x,), (names, _cumsum_result, include_0, include_sum))
    if index_dim is not None:
        if len(names) != 1:
            raise ValueError(f'cumulative_sum(index_dim=...) needs a single dim but got {names}')
        index = parse_dim_spec(index_dim + ':c') if isinstance(index_dim, str) else index_dim
        result = expand_tensor(result, index.with_size(names))
    return result
