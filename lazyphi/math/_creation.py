"""Making tensors: from natives, lists, numbers and Shapes, and filled, ranged or random ones; converting them."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np

from .._errors import IncompatibleShapes, NoBackendFound, NotConvertible
from ..backend import OBJECTS, Backend, DType, choose_backend, default_backend, get_precision, seed_backends
from ..backend import convert as convert_native
from ._convert import to_backend
from ._dims import channel, instance, parse_dim_spec, shape, spatial
from ._elementwise import FLOOR, IMAG, REAL, cast_tensor, where
from ._foreign import gives_host_values, tensor_source
from ._kinds import Stacked, expand_to
from ._layout import Layout, layout
from ._shape import CHANNEL, EMPTY_SHAPE, Shape, concat_shapes, merge_shapes
from ._structure import as_dim, stack_tensors, unpack_tensor_dim
from ._tensor import NUMBER_TYPES, RENAME_OP, Dense, Tensor, as_tensor, dispatch, read_only_native, scalar

PI = math.pi
DEFAULT_LIST_DIM = channel('vector')
TUPLE_DIM = spatial('sequence')  # of a vec() component given as a tuple
LIST_DIM = instance('sequence')  # of a vec() component given as a list


def _dims_of(dims: tuple) -> Shape:
    return concat_shapes(*[parse_dim_spec(d) if isinstance(d, str) else shape(d) for d in dims]) if dims \
        else EMPTY_SHAPE


def tensor(data, *shape, convert: bool = True, default_list_dim: Shape = DEFAULT_LIST_DIM) -> Tensor:
    """A Tensor holding `data`, with its axes named by `shape`.

    Args:
        data: a native array of any registered backend; a number; a (nested) list or tuple of numbers; a list or
            tuple of tensors, numbers, lists (stacked along the first dim, the others describing the items); a
            `Shape` (its sizes, labelled by the dim names along `channel('dims')` or the one dim given); a
            Tensor (renamed when dims are given); a str, None or a list of non-numbers (a layout, see `layout`).
            an `xarray.DataArray` (its dims by name; `*shape` types them, see `lazyphi.math._xarray`) or a
            `dask.array.Array` (stays lazy: each use computes only the part it selects).
        *shape: one Shape or dim spec ('b:b', 'x:s,y:s') per axis, in order; sizes are checked against the data,
            labels are kept. Without dims, 1-D lists, tuples and natives get `default_list_dim`. A single list of
            Shapes splits the axes of a native into several dims each (see `reshaped_tensor`).
        convert: put the values on the default backend (natives of another library are converted, through
            DLPack where possible); `False` (or `wrap`) keeps natives as they are and Python data in NumPy.

    Raises:
        NotConvertible: `convert` is set but the data holds strings or other non-numeric objects.
    """
    if len(shape) == 1 and isinstance(shape[0], list):
        return reshaped_tensor(data, shape[0], check_sizes=True, convert=convert)
    dims = _dims_of(shape)
    if isinstance(data, Shape):
        return tensor(*_shape_values(data, dims, bool(shape)), convert=convert)
    if isinstance(data, Tensor):
        result = to_backend(data, default_backend()) if convert else data
        if not shape:
            return result
        if dims.rank != data.shape.rank:
            raise IncompatibleShapes(f'tensor(): {dims} names {dims.rank} dims but the tensor has shape {data.shape}')
        return dispatch(RENAME_OP, (result,), (data.shape.names, _named(data.shape.sizes, dims)))
    if isinstance(data, str) or data is None:
        return _non_numeric(data, dims, convert)
    if isinstance(data, (list, tuple)):
        return _from_sequence(data, dims, convert, default_list_dim)
    if isinstance(data, NUMBER_TYPES):
        native = _native_from_python(data, default_backend() if convert else None)
    else:
        convert_from = tensor_source(data)  # xarray, dask, SciPy's sparse matrices: see _foreign.py
        result = NotImplemented if convert_from is None else convert_from(data, dims)
        if result is not NotImplemented:
            return to_backend(result, default_backend()) if convert and gives_host_values(data) else result
        native = data
    try:
        backend = choose_backend(native)
    except NoBackendFound:  # a Python object no array library holds
        return _non_numeric(data, dims, convert)
    if backend is OBJECTS and not isinstance(native, np.ndarray):
        return _non_numeric(data, dims, convert)
    if convert and backend is not default_backend():
        native, backend = convert_native(native, default_backend()), default_backend()
    sizes = backend.staticshape(native)
    if not shape and len(sizes) == 1:
        dims = default_list_dim
    if len(sizes) != dims.rank:
        raise IncompatibleShapes(f'tensor(): the data has {len(sizes)} axes of sizes {tuple(sizes)} but {dims.rank} '
                                 f'dims were given ({dims}). Name every axis, e.g. tensor(data, batch("b"), '
                                 f'spatial("x"))')
    return Dense(read_only_native(native), _named(tuple(sizes), dims), backend)


def wrap(data, *shape, default_list_dim: Shape = DEFAULT_LIST_DIM) -> Tensor:
    """Like `tensor` but never converts: natives stay as they are, Python data in NumPy (or in a layout)."""
    return tensor(data, *shape, convert=False, default_list_dim=default_list_dim)


def _shape_values(data: Shape, dims: Shape, named: bool) -> tuple:
    """`tensor(shape)`: the sizes along `channel('dims')` labelled by the names, or along the one dim given."""
    if not named:
        return list(data.sizes), channel(dims=data.names)
    if not dims:
        if data.rank != 1:
            raise ValueError(f'tensor(shape) without dims makes a tensor of the sizes of several dims; got {data}, '
                             f'give one dim to make a scalar from a single dim')
        return (data.sizes[0],)
    if dims.rank != 1:
        raise ValueError(f'tensor(shape, dims): the sizes of {data} lie along one dim, but {dims} was given')
    return list(data.sizes), dims.with_size(data.names)


def _non_numeric(data, dims: Shape, convert: bool) -> Tensor:
    if convert and data is not None and not isinstance(data, str):
        raise NotConvertible(f'tensor(): {type(data).__name__} {data!r} cannot be converted to a numeric tensor; '
                             f'use wrap() or layout() to hold Python objects')
    return layout(data, *([dims] if dims else []))


def _from_sequence(data, dims: Shape, convert: bool, default_list_dim: Shape) -> Tensor:
    """A tensor from a list or tuple: numbers in one native, strings in a layout, anything else item by item."""
    if _numeric_nesting(data):
        native = _native_from_python(data, default_backend() if convert else None)
        sizes = choose_backend(native).staticshape(native)
        if not dims and len(sizes) == 1:
            dims = default_list_dim
        if len(sizes) != dims.rank:
            raise IncompatibleShapes(f'tensor(): the data has {len(sizes)} axes of sizes {tuple(sizes)} but '
                                     f'{dims.rank} dims were given ({dims}).')
        return Dense(read_only_native(native), _named(tuple(sizes), dims), choose_backend(native))
    outer = dims[0] if dims else default_list_dim
    if data and all(isinstance(d, str) for d in data):
        return layout(data, concat_shapes(outer, dims[1:]) if dims else outer)
    inner = [dims[1:]] if dims.rank > 1 else []
    try:
        items = [d if isinstance(d, Tensor) else tensor(d, *inner, convert=convert) for d in data]
        if any(type(t) is Layout for t in items):
            raise NotConvertible(f'tensor(): {data!r} holds values that are not numbers')
        common = merge_shapes(*[t.shape for t in items])
        return stack_tensors([expand_to(t, merge_shapes(common, t.shape)) for t in items], outer)
    except (IncompatibleShapes, NotConvertible):
        if convert:
            raise NotConvertible(f'tensor(): cannot convert {data!r} to a numeric tensor: its items are not numbers '
                                 f'or tensors of compatible shapes; use wrap() or layout() to hold them') from None
        return layout(data, concat_shapes(outer, dims[1:]) if dims else outer)


def _numeric_nesting(data) -> bool:
    """Whether `data` is a non-empty regular nesting of lists and tuples of numbers (or an empty list)."""
    if not data:
        return True
    if all(isinstance(d, NUMBER_TYPES) for d in data):
        return True
    if all(isinstance(d, (list, tuple)) for d in data):
        lengths = {len(d) for d in data}
        return len(lengths) == 1 and lengths != {0} and all(_numeric_nesting(d) for d in data)
    return False


def _native_from_python(data, backend: Backend | None):
    array = np.asarray(data)
    if array.dtype.kind == 'f' or (array.dtype.kind != 'c' and array.size == 0):
        array = array.astype({16: np.float16, 32: np.float32, 64: np.float64}[get_precision()])
    elif array.dtype.kind == 'c':
        array = array.astype(np.complex64 if get_precision() <= 32 else np.complex128)
    elif array.dtype.kind not in 'biu':
        raise NotConvertible(f'tensor(): cannot make a numeric tensor from {data!r}')
    return array if backend is None else backend.as_tensor(array)


def compatible_tensor(value, like: Tensor):
    """`value`, the other operand of an operator on `like`, as a tensor named after `like`'s dims.

    A Shape gives its sizes (one spatial dim: that size; else along `like`'s channel dim, labelled by the
    names). A tuple or list with tensors in it is stacked along `like`'s vector (or only channel) dim. Data
    with as many axes as `like` has channel dims lies along those; with one axis along its `vector` dim; with
    as many axes as `like` has dims, along its dims in the order of its shape (`t + [[1, 2], [3, 4]]` for a
    `t` of shape (b=2, x=2): rows along b). Strings and None become layouts. Anything else is NotImplemented.
    """
    if isinstance(value, Shape):
        if value.spatial.rank == 1:
            return wrap(value.spatial.size)
        return wrap(list(value.sizes), _only_channel(like, value).with_size(value.names))
    if isinstance(value, str) or value is None:
        return layout(value)
    if isinstance(value, (tuple, list)) and any(isinstance(v, Tensor) for v in value):
        dim = like.shape['vector'] if 'vector' in like.shape.names else _only_channel(like, value)
        items = [v if isinstance(v, Tensor) else wrap(v) for v in value]
        common = merge_shapes(*[t.shape for t in items])
        return stack_tensors([expand_to(t, merge_shapes(common, t.shape)) for t in items], dim.with_size(None)
                             if dim.labels[0] is None else dim)
    if isinstance(value, (tuple, list)):
        value = _native_from_python(value, None)
    try:
        backend = choose_backend(value)
    except NoBackendFound:
        return NotImplemented
    if backend is OBJECTS and not isinstance(value, np.ndarray):
        return NotImplemented
    ndim = backend.ndims(value)
    if ndim == 0:
        return Dense(value, EMPTY_SHAPE, backend)
    channel_dims = like.shape.channel
    if ndim == channel_dims.rank:
        return wrap(value, channel_dims.with_sizes([None] * ndim))
    if ndim == 1 and 'vector' in channel_dims.names:
        return wrap(value, channel_dims['vector'].with_size(None))
    if ndim == like.shape.rank:
        return wrap(value, like.shape.with_sizes([None] * ndim))
    raise IncompatibleShapes(f'Cannot combine a tensor of shape {like.shape} with data of {ndim} axes of sizes '
                             f'{backend.staticshape(value)}: data is matched to the channel dims, or to the one '
                             f'vector dim, or to all dims of the tensor in the order of its shape; wrap it with dim '
                             f'names first, e.g. wrap(data, spatial("x"))')


def _only_channel(like: Tensor, value) -> Shape:
    channel_dims = like.shape.channel
    if channel_dims.rank != 1:
        raise IncompatibleShapes(f'Cannot combine a tensor of shape {like.shape} with {value!r}: the values would '
                                 f'lie along its channel dim, but it has {channel_dims.rank}')
    return channel_dims


def reshaped_tensor(value, groups, check_sizes: bool = False, convert: bool = True) -> Tensor:
    """A tensor from a native whose axes each hold the dims of one group, unpacked row-major.

    Args:
        value: a native array with one axis per group.
        groups: one Shape per axis (or a spec like 'x:s'); a group of several dims must give their sizes
            (one may be None), an empty group stands for an axis of size 1.
        check_sizes: check the size of single-dim groups that give one against the axis.
        convert: convert the native to the default backend.
    """
    groups = [parse_dim_spec(g) if isinstance(g, str) else shape(g) for g in groups]
    axes = [g if g.rank == 1 else Shape((None,), (f'_group{i}',), ('batch',), (None,)) for i, g in enumerate(groups)]
    if not check_sizes:
        axes = [a.with_size(None) if a.labels[0] is None else a for a in axes]
    result = tensor(value, *axes, convert=convert)
    for i, group in enumerate(groups):
        if group.rank == 0:
            result = result[{f'_group{i}': 0}]
        elif group.rank > 1:
            size = result.shape.get_size(f'_group{i}')
            if check_sizes and group.well_defined and size != group.volume:
                raise IncompatibleShapes(f'reshaped_tensor(): axis {i} has {size} entries but the group {group} '
                                         f'holds {group.volume}')
            result = unpack_tensor_dim(result, f'_group{i}', group)
    return result


def _named(sizes: tuple, dims: Shape) -> Shape:
    for name, given, labels, actual in zip(dims.names, dims.sizes, dims.labels, sizes, strict=True):
        if labels is not None and len(labels) != actual:
            raise IncompatibleShapes(f'tensor(): dim {name!r} has {len(labels)} labels {labels} but the data has '
                                     f'{actual} entries along that axis')
        if given is not None and given != actual:
            raise IncompatibleShapes(f'tensor(): dim {name!r} was given size {given} but the data has {actual} '
                                     f'entries along that axis')
    return dims.with_sizes([labels if labels is not None else s for labels, s in zip(dims.labels, sizes,
                                                                                   strict=True)])


def vec(name: str | Shape = 'vector', *sequence, tuple_dim: Shape = TUPLE_DIM, list_dim: Shape = LIST_DIM,
        **components) -> Tensor:
    """Values laid out along a channel dim: `vec(x=1, y=2)` (labelled by the keywords) or `vec('c', 4, 5)`.

    Args:
        name: the dim's name, or a spec such as 'b:b' or '~vector' (a plain name is a channel dim), or a Shape.
        *sequence: values given in order; their str forms label the dim where they are distinct and not empty.
        tuple_dim: the dim of a component given as a tuple, `vec(x=(0, 1), y=0)`.
        list_dim: the dim of a component given as a list, `vec(x=[0, 1], y=0)`.
        **components: values by label; tensors are stacked (and broadcast) along the dim.
    """
    dim = name if isinstance(name, Shape) else parse_dim_spec(name, CHANNEL) if isinstance(name, str) else None
    if dim is None or dim.rank != 1:
        raise TypeError(f"vec() takes a dim name, a spec such as 'b:b' or a Shape of one dim as its name, got {name!r}")
    if sequence:
        if components:
            raise TypeError(f'vec() takes its values either in order or as keywords, not both; got {sequence} and '
                            f'{list(components)}')
        values = sequence[0] if len(sequence) == 1 and isinstance(sequence[0], (tuple, list)) else sequence
        labels = [str(v) for v in values]
        distinct = len(set(labels)) == len(labels) and all(labels)
        dim = dim.with_size(tuple(labels) if distinct else len(labels))
        return stack_tensors(list(values), dim)
    if not components:
        raise ValueError('vec() needs at least one component, e.g. vec(x=1, y=2) or vec("c", 1, 2)')
    dim = dim.with_size(tuple(components))
    values = [tensor(list(v), tuple_dim if isinstance(v, tuple) else list_dim) if isinstance(v, (tuple, list)) else v
              for v in components.values()]
    if all(isinstance(v, NUMBER_TYPES) for v in values):
        return tensor(values, dim)
    return stack_tensors(values, dim)


def _filled(value, shape: Shape, dtype) -> Tensor:
    target = DType.as_dtype(dtype) if dtype is not None else DType(float, get_precision())
    backend = default_backend()
    base = Dense(backend.cast(backend.as_tensor(value), target), EMPTY_SHAPE, backend)
    return _per_uniform_part(lambda part: expand_to(base, part), shape)


def _per_uniform_part(make: Callable[[Shape], Tensor], shape: Shape) -> Tensor:
    """`make(shape)` for a uniform shape; for a non-uniform one, `make` of each uniform part, stacked."""
    for name, size in zip(shape.names, shape.sizes, strict=True):
        if size is None:
            raise ValueError(f'Creating a tensor needs a size for every dim; {name!r} has none in {shape}')
    if shape.is_uniform:
        return make(shape)
    along = next(s.along[0] for s in shape.sizes if not isinstance(s, int))
    parts = [_per_uniform_part(make, shape.after_gather({along: i})) for i in range(shape.get_size(along))]
    return Stacked(parts, shape[along])


def zeros(*shape, dtype=None) -> Tensor:
    """A tensor of zeros of the given shape; no memory is used for the values until an operation needs them."""
    return _filled(0, _dims_of(shape), dtype)


def ones(*shape, dtype=None) -> Tensor:
    """A tensor of ones of the given shape, stored lazily as one value."""
    return _filled(1, _dims_of(shape), dtype)


def zeros_like(obj) -> Tensor:
    """Zeros with the shape and dtype of `obj`."""
    obj = obj if isinstance(obj, Tensor) else scalar(obj)
    return _filled(0, obj.shape, obj.dtype)


def ones_like(value) -> Tensor:
    """Ones with the shape and dtype of `value`."""
    value = value if isinstance(value, Tensor) else scalar(value)
    return _filled(1, value.shape, value.dtype)


def arange(dim: Shape, start_or_stop=None, stop=None, step=1, backend: Backend | None = None) -> Tensor:
    """Integers along `dim`: `arange(spatial(x=4))` or `arange(spatial('x'), 2, 10, 2)`.

    Args:
        dim: the dim of the values; its size is the stop when no bounds are given.
        start_or_stop: the start if `stop` is given too, else the stop (the start is 0).
        stop: the end, excluded.
        step: the distance between values.
        backend: where the values are made; the default backend if None.

    The bounds may be int tensors with other dims: each of their elements gives one range along `dim`, so the
    result has those dims too, and a non-uniform size along `dim` where the ranges differ in length
    (`arange(instance('i'), wrap([1, 2], spatial('x')))`). The bounds' values are read to know the sizes.
    """
    dim = as_dim(dim)
    if start_or_stop is None:
        if stop is not None:
            raise ValueError(f'arange(): give start_or_stop with stop={stop!r}')
        if dim.size is None:
            raise ValueError(f'arange() needs a stop value or a dim with a size; got {dim}')
        start, stop = 0, dim.size
    elif stop is None:
        start, stop = 0, start_or_stop
    else:
        start = start_or_stop
    backend = backend or default_backend()
    if not all(isinstance(bound, NUMBER_TYPES) for bound in (start, stop, step)):
        bounds = [wrap(bound) for bound in (start, stop, step)]
        for name, bound in zip(('start', 'stop', 'step'), bounds, strict=True):
            if bound.dtype.kind is not int:
                raise TypeError(f'arange(): bounds given as tensors must hold integers; {name} holds {bound.dtype}')
        return _batched_ranges(dim, *bounds, backend)
    native = backend.range(start, stop, step, DType(int, 64))
    return wrap(native, dim.with_size(None) if dim.labels[0] is None else dim)


def _batched_ranges(dim: Shape, start: Tensor, stop: Tensor, step: Tensor, backend: Backend) -> Tensor:
    """One range along `dim` per element of the bounds' other dims, stacked along those dims."""
    batch = merge_shapes(start.shape, stop.shape, step.shape)
    if dim.name in batch.names:
        raise IncompatibleShapes(f'arange(): the bounds must not have the dim {dim.name!r} of the range; their '
                                 f'dims are {batch}')
    if not batch:
        return arange(dim.with_size(None), int(start), int(stop), int(step), backend)
    outer = next(n for n, size in zip(batch.names, batch.sizes, strict=True) if isinstance(size, int))
    parts = [_batched_ranges(dim, start[{outer: i}], stop[{outer: i}], step[{outer: i}], backend)
             for i in range(batch.get_size(outer))]
    return stack_tensors(parts, batch[outer])


def linspace(start, stop, dim: Shape) -> Tensor:
    """`dim.size` evenly spaced values from `start` to `stop`, both included.

    Args:
        start: numbers, tensors (whose dims the result gets too) or tuples and lists (along `vector`).
        stop: the last value, in the same forms as `start`.
        dim: the dim of the values, with a size; several dims give a grid: the values along each dim, stacked
            along a channel dim `vector` labelled by their names, where a `vector` dim of `start` and `stop`
            holds one bound per dim (`linspace((0, 1), (1, 2), spatial(x=4, y=3))`).
    """
    dims = parse_dim_spec(dim) if isinstance(dim, str) else dim
    if not isinstance(dims, Shape) or not dims:
        raise TypeError(f'linspace() takes the dims of the values as a Shape such as spatial(x=10); got {dim!r}')
    for name, size in zip(dims.names, dims.sizes, strict=True):
        if not isinstance(size, int):
            raise ValueError(f'linspace() needs a dim with a size, e.g. spatial(x=10); got {dims}, where {name!r} '
                             f'has {size}')
    if dims.rank > 1:
        fraction = stack_tensors([expand_to(linspace(0, 1, dims[name]), dims) for name in dims.names],
                                 DEFAULT_LIST_DIM.with_size(dims.names))
    elif isinstance(start, NUMBER_TYPES) and isinstance(stop, NUMBER_TYPES):
        return tensor(default_backend().linspace(start, stop, dims.size), dims)
    else:
        fraction = linspace(0, 1, dims)
    start, stop = (bound if isinstance(bound, NUMBER_TYPES) else wrap(bound) for bound in (start, stop))
    return start + (stop - start) * fraction


def meshgrid(dims=spatial, stack_dim: Shape | str | None = DEFAULT_LIST_DIM, **dimensions) -> Tensor:
    """Coordinates of a regular grid, stacked along `stack_dim`: `meshgrid(x=4, y=3)` or `meshgrid(spatial(x=4))`.

    Args:
        dims: the grid's dims as a Shape with sizes, or the type of the dims named by keyword (`spatial`,
            `instance`, ...).
        stack_dim: the channel dim of the coordinates, labelled by the dims' names unless it has labels; a str
            names it. `None` returns the coordinates of a grid of one dim without it.
        **dimensions: per dim, a size (an int or a 0-d int tensor: the coordinates 0..size-1), or its
            coordinates as a sequence, a 1-D native or a 1-D tensor.
    """
    dim_type = spatial
    axes = []
    if isinstance(dims, Shape):
        axes = [arange(dims[name]) for name in dims.names]
    elif callable(dims):
        dim_type = dims
    else:
        raise TypeError(f'meshgrid(): dims must be a Shape or a dim type such as spatial, got {dims!r}')
    axes += [_grid_axis(dim_type(name), values) for name, values in dimensions.items()]
    if not axes:
        raise ValueError('meshgrid() needs at least one dim, e.g. meshgrid(x=4, y=3)')
    names = tuple(axis.shape.names[0] for axis in axes)
    if isinstance(stack_dim, str):
        stack_dim = parse_dim_spec(stack_dim, CHANNEL)
    if not stack_dim:
        if len(axes) > 1:
            raise ValueError(f'meshgrid() of several dims {names} needs a stack_dim for their coordinates')
        return axes[0]
    if stack_dim.name in names:
        raise ValueError(f'meshgrid(): the stack_dim {stack_dim.name!r} is one of the grid dims {names}; name it '
                         f'otherwise, e.g. stack_dim=channel("vector")')
    grid = merge_shapes(*[axis.shape for axis in axes])
    labelled = stack_dim.with_size(names) if stack_dim.labels[0] is None else stack_dim
    return stack_tensors([expand_to(axis, grid) for axis in axes], labelled)


def _grid_axis(dim: Shape, values) -> Tensor:
    """The coordinates along one dim of a grid: 0..size-1 for a size, else the values given, along `dim`."""
    if isinstance(values, Tensor) and values.shape.rank == 0 and values.dtype.kind is int:
        values = int(values)
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        return arange(dim.with_size(int(values)))
    if isinstance(values, Tensor) and values.shape.rank != 1:
        raise IncompatibleShapes(f'meshgrid(): the coordinates along {dim.name!r} must have one dim, got '
                                 f'{values.shape}')
    return tensor(values, dim)


def const_vec(value, dim) -> Tensor:
    """A vector with every component `value`: along `dim` (a single non-spatial dim, as a Shape), or along a channel
    dim `vector` labelled by spatial dims (a Shape of them) or by names (`'x,y'`, a tuple or list).

    Raises:
        ValueError: `dim` mixes spatial and other dims, or names several non-spatial dims.
    """
    if isinstance(dim, Shape):
        if dim.spatial and dim.non_spatial:
            raise ValueError(f'const_vec(): {dim} mixes spatial dims (which label the components) with others')
        if not dim.spatial and dim.rank != 1:
            raise ValueError(f'const_vec(): {dim} must be one dim to lay the components along, or spatial dims')
        along = channel(vector=dim.names) if dim.spatial else dim
    else:
        along = channel(vector=parse_dim_spec(dim).names if isinstance(dim, str) else tuple(dim))
    return wrap([value] * along.volume, along)


def tensor_like(existing_tensor: Tensor, values, value_order: str | None = None) -> Tensor:
    """A tensor of the shape of `existing_tensor` holding `values`: expanded over its non-batch dims, or, for values
    along an instance dim, that dim unpacked into them (one value per element, in the order of its dims).

    `value_order` is accepted for phiml's signature; it matters for sparse tensors only, which lazyphi lacks.
    """
    values = as_tensor(values)
    if values.shape.instance:
        return unpack_tensor_dim(values, values.shape.instance.name, existing_tensor.shape.non_batch)
    return expand_to(values, existing_tensor.shape.non_batch & values.shape)


def seed(seed: int | None) -> None:
    """Seeds the random generators of every backend (also those loaded later) and Python's `random` module, so that
    `random_normal`, `random_uniform` and the libraries' own draws repeat; None seeds them from the system's
    entropy.

    Raises:
        TypeError: `seed` is not an int or None.
    """
    seed_backends(seed)
    random.seed(seed)


def random_normal(*shape, dtype=None) -> Tensor:
    """Samples of the standard normal distribution; an int or bool `dtype` gets the samples cast to it."""
    backend = default_backend()
    target = DType.as_dtype(dtype) if dtype is not None else DType(float, get_precision())
    sampled = target if target.kind in (float, complex) else DType(float, get_precision())

    def sample(part: Shape) -> Dense:
        native = backend.random_normal(part.sizes, sampled)
        return Dense(read_only_native(native if sampled is target else backend.cast(native, target)), part, backend)
    return _per_uniform_part(sample, _dims_of(shape))


def random_uniform(*shape, low=0, high=1, dtype=None) -> Tensor:
    """Samples of the uniform distribution on [low, high).

    Args:
        *shape: the dims of the result (Shapes or specs).
        low: the lower bound: a number, or a tensor whose dims the result gets too (each element is drawn
            between its own bounds, independently of the others).
        high: the upper bound (excluded), in the same forms as `low`.
        dtype: `float` (the current precision) by default; integer dtypes give integers, complex dtypes values
            whose real parts lie between the bounds' real parts and imaginary parts between their imaginary
            parts (real bounds give real values); bool dtypes ignore the bounds.
    """
    target = DType.as_dtype(dtype) if dtype is not None else DType(float, get_precision())
    dims = _dims_of(shape)
    if not (isinstance(low, NUMBER_TYPES) and isinstance(high, NUMBER_TYPES)):
        return _uniform_between(dims, tensor(low, convert=False), tensor(high, convert=False), target)
    backend = default_backend()
    return _per_uniform_part(lambda part: Dense(read_only_native(backend.random_uniform(part.sizes, low, high, target)),
                                                part, backend), dims)


def _uniform_between(dims: Shape, low: Tensor, high: Tensor, target: DType) -> Tensor:
    """Uniform samples of `target` between bounds given as tensors: unit samples scaled element by element."""
    dims = merge_shapes(dims, low.shape, high.shape)
    if target.kind is bool:
        return random_uniform(dims, dtype=target)
    if target.kind is complex:
        unit = random_uniform(dims, high=1 + 1j, dtype=target)
        real = _scaled(dispatch(REAL, (unit,)), dispatch(REAL, (low,)), dispatch(REAL, (high,)))
        imag = _scaled(dispatch(IMAG, (unit,)), dispatch(IMAG, (low,)), dispatch(IMAG, (high,)))
        return cast_tensor(real + imag * 1j, target)
    if target.kind is float:
        return cast_tensor(_scaled(random_uniform(dims, dtype=target), low, high), target)
    if target.kind is not int:
        raise ValueError(f'random_uniform() draws bool, int, float and complex values, not {target}')
    span = high - low  # integers: low + floor(unit * span), at most span - 1 where the product rounds up to it
    offset = dispatch(FLOOR, (random_uniform(dims, dtype=DType(float, 64)) * span,))
    return cast_tensor(low + where(offset < span, offset, span - 1), target)


def _scaled(unit: Tensor, low: Tensor, high: Tensor) -> Tensor:
    return low + (high - low) * unit


randn = random_normal
rand = random_uniform


def range_tensor(*shape) -> Tensor:
    """Integers 0, 1, ... numbering the elements of `shape` in row-major order (`arange` for one dim)."""
    dims = _dims_of(shape)
    flat = arange(instance('_range'), 0, dims.volume)
    return unpack_tensor_dim(flat, '_range', dims)

