"""Making tensors: from natives, lists and numbers, and filled, ranged or random ones."""

from __future__ import annotations

import math
from numbers import Number

import numpy as np

from .._errors import IncompatibleShapes
from ..backend import Backend, DType, choose_backend, default_backend, get_precision
from ._dims import channel, instance, parse_dim_spec, shape, spatial
from ._foreign import tensor_source
from ._kinds import expand_to
from ._shape import CHANNEL, EMPTY_SHAPE, Shape, concat_shapes, merge_shapes
from ._structure import as_dim, stack_tensors
from ._tensor import NUMBER_TYPES, Dense, Tensor, read_only_native, scalar

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
        data: a native array of any registered backend, a number, a (nested) list or tuple of numbers,
            a Tensor (renamed or returned as is), a list/tuple of Tensors (stacked along the first dim given),
            an `xarray.DataArray` (its dims by name; `*shape` types them, see `lazyphi.math._xarray`) or a
            `dask.array.Array` (stays lazy: each use computes only the part it selects).
        *shape: one Shape or dim spec ('b:b', 'x:s,y:s') per axis, in order; sizes are checked against the data,
            labels are kept. Without dims, 1-D lists and tuples get `default_list_dim`; natives with axes need dims.
        convert: for Python lists and numbers, create the native with the default backend. Natives are never
            copied or converted: wrap a NumPy array in a torch tensor with `convert(t, TORCH)` explicitly.
    """
    dims = _dims_of(shape)
    if isinstance(data, Tensor):
        if not dims:
            return data
        if dims.rank != data.shape.rank:
            raise IncompatibleShapes(f'tensor(): {dims} names {dims.rank} dims but the tensor has shape {data.shape}')
        dense = data._dense()
        return Dense(dense._native, _named(dense.shape.sizes, dims), dense.backend)
    if isinstance(data, (list, tuple)) and data and any(isinstance(v, Tensor) for v in data):
        stack_dim = dims[0] if dims else default_list_dim
        return stack_tensors(data, stack_dim)
    if isinstance(data, (list, tuple, Number, np.number, np.bool_)) and not isinstance(data, np.ndarray):
        native = _native_from_python(data, default_backend() if convert else None)
        backend = choose_backend(native)
    else:
        convert_from = tensor_source(data)  # xarray, dask: see _foreign.py
        if convert_from is not None:
            return convert_from(data, dims)
        backend = choose_backend(data)
        native = data
    sizes = backend.staticshape(native)
    if not dims and len(sizes) == 1 and isinstance(data, (list, tuple)):
        dims = default_list_dim
    if len(sizes) != dims.rank:
        raise IncompatibleShapes(f'tensor(): the data has {len(sizes)} axes of sizes {tuple(sizes)} but {dims.rank} '
                                 f'dims were given ({dims}). Name every axis, e.g. tensor(data, batch("b"), '
                                 f'spatial("x"))')
    return Dense(read_only_native(native), _named(tuple(sizes), dims), backend)


def wrap(data, *shape, default_list_dim: Shape = DEFAULT_LIST_DIM) -> Tensor:
    """Like `tensor` but never converts: Python data stays in NumPy whatever the default backend."""
    return tensor(data, *shape, convert=False, default_list_dim=default_list_dim)


def _native_from_python(data, backend: Backend | None):
    array = np.asarray(data)
    if array.dtype.kind == 'f':
        array = array.astype({16: np.float16, 32: np.float32, 64: np.float64}[get_precision()])
    elif array.dtype.kind == 'c':
        array = array.astype(np.complex64 if get_precision() <= 32 else np.complex128)
    elif array.dtype.kind == 'O':
        raise TypeError(f'tensor(): cannot make a numeric tensor from {data!r}; lists must hold numbers of one '
                        f'nesting depth')
    return array if backend is None else backend.as_tensor(array)


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
        *sequence: values given in order; their str forms label the dim where they are distinct.
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
        dim = dim.with_size(tuple(labels) if len(set(labels)) == len(labels) else len(labels))
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
    for name, size in zip(shape.names, shape.sizes, strict=True):
        if not isinstance(size, int):
            raise ValueError(f'Creating a tensor needs a size for every dim; {name!r} has {size!r} in {shape}')
    return expand_to(base, shape)


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


def ones_like(obj) -> Tensor:
    """Ones with the shape and dtype of `obj`."""
    obj = obj if isinstance(obj, Tensor) else scalar(obj)
    return _filled(1, obj.shape, obj.dtype)


def arange(dim: Shape, start_or_stop: int | None = None, stop: int | None = None, step: int = 1) -> Tensor:
    """Integers along `dim`: `arange(spatial(x=4))` or `arange(spatial('x'), 2, 10, 2)`."""
    dim = as_dim(dim)
    if start_or_stop is None:
        if dim.size is None:
            raise ValueError(f'arange() needs a stop value or a dim with a size; got {dim}')
        start, stop = 0, dim.size
    elif stop is None:
        start, stop = 0, start_or_stop
    else:
        start = start_or_stop
    backend = default_backend()
    native = backend.range(start, stop, step, DType(int, 64))
    return tensor(native, dim.with_size(None) if dim.labels[0] is None else dim)


def linspace(start, stop, dim: Shape) -> Tensor:
    """`dim.size` evenly spaced values from `start` to `stop`, both included; start and stop may be tensors."""
    dim = as_dim(dim)
    if dim.size is None:
        raise ValueError(f'linspace() needs a dim with a size, e.g. spatial(x=10); got {dim}')
    if isinstance(start, Tensor) or isinstance(stop, Tensor):
        fraction = linspace(0, 1, dim)
        return start + (stop - start) * fraction
    backend = default_backend()
    native = backend.linspace(start, stop, dim.size)
    return tensor(native, dim)


def meshgrid(dims=None, stack_dim: Shape = DEFAULT_LIST_DIM, **dimensions) -> Tensor:
    """Coordinates of a regular grid, stacked along `stack_dim`: `meshgrid(x=4, y=3)` or `meshgrid(spatial(x=4))`.

    Sizes give the integer coordinates 0..size-1; a sequence of values or a 1-D tensor gives those values.
    """
    axes = {}
    if dims is not None:
        for name, size in zip(shape(dims).names, shape(dims).sizes, strict=True):
            axes[name] = (shape(dims)[name], size)
    for name, values in dimensions.items():
        axes[name] = (None, values)
    if not axes:
        raise ValueError('meshgrid() needs at least one dim, e.g. meshgrid(x=4, y=3)')
    coordinates = []
    for name, (dim, values) in axes.items():
        dim = dim if dim is not None else parse_dim_spec(f'{name}:s')
        if isinstance(values, int):
            coordinates.append(arange(dim.with_size(values)))
        elif isinstance(values, Tensor):
            coordinates.append(values)
        else:
            coordinates.append(tensor(list(values), dim))
    grid = merge_shapes(*[c.shape for c in coordinates])
    labels_dim = stack_dim.with_size(tuple(axes)) if stack_dim.labels[0] is None else stack_dim
    return stack_tensors([expand_to(c, grid) for c in coordinates], labels_dim)


def random_normal(*shape, dtype=None) -> Tensor:
    """Samples of the standard normal distribution."""
    dims = _dims_of(shape)
    backend = default_backend()
    target = DType.as_dtype(dtype) if dtype is not None else DType(float, get_precision())
    return Dense(read_only_native(backend.random_normal(dims.sizes, target)), dims, backend)


def random_uniform(*shape, low=0, high=1, dtype=None) -> Tensor:
    """Samples of the uniform distribution on [low, high); integer dtypes give integers."""
    dims = _dims_of(shape)
    backend = default_backend()
    target = DType.as_dtype(dtype) if dtype is not None else DType(float, get_precision())
    return Dense(read_only_native(backend.random_uniform(dims.sizes, low, high, target)), dims, backend)

