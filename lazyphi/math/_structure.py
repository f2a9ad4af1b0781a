"""Operations that change the structure of tensors: stacking, concatenating, expanding, renaming, reshaping."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._errors import DimNotFound, IncompatibleShapes
from ._dims import instance, parse_dim_spec, shape
from ._kinds import Stacked, concat_dense, expand_to, joined_shape, stack_dense, stacked_shape
from ._shape import EMPTY_SHAPE, Shape, concat_shapes, merge_shapes, resolve_dims
from ._tensor import (
    CONCAT,
    RENAME_OP,
    RESHAPE,
    STACK,
    Dense,
    Op,
    Tensor,
    as_tensor,
    auto_cast,
    dims_in,
    dispatch,
)

FLAT_DIM = instance('flat')


def as_dim(dim, what: str = 'dim') -> Shape:
    """A rank-1 Shape from a Shape or a 'name:type' spec; anything else is a TypeError naming it."""
    if isinstance(dim, str):
        dim = parse_dim_spec(dim)
    if not isinstance(dim, Shape) or dim.rank != 1:
        raise TypeError(f'{what} must be a Shape with one dim such as batch("b") or channel(vector="x,y"), '
                        f'or a spec like "b:b"; got {dim!r}')
    return dim


def _dense_stack(ts: Sequence[Dense], dim: Shape) -> Tensor:
    shape = stacked_shape([t.shape for t in ts], dim)
    if not shape.is_uniform:
        return Stacked(ts, dim)
    first = ts[0]._shape
    backend = ts[0]._backend
    if all(t._shape == first and t._backend is backend for t in ts):  # identical layouts stack without alignment
        inner = shape.without(dim.name)
        if inner.names == first.names:
            natives = auto_cast(backend, [t._native for t in ts])
            return Dense(backend.stack(natives, shape.index(dim.name)), shape, backend)
    return stack_dense(ts, dim, shape)


STACK_OP = Op('stack', STACK, _dense_stack)


def stack_tensors(values: Sequence, dim: Shape) -> Tensor:
    """Stack tensors (or numbers) along the new dim `dim`; differing sizes give a non-uniform `Stacked` tensor."""
    tensors = [as_tensor(v) for v in values]
    if not tensors:
        raise ValueError(f'stack() needs at least one value to stack along {dim}')
    labels = dim.labels[0]
    if labels is None:
        dim = dim.with_size(len(tensors))
    elif len(labels) != len(tensors):
        raise IncompatibleShapes(f'stack() got {len(tensors)} values but dim {dim} has {len(labels)} labels')
    for t in tensors:
        if dim.name in t.shape.names:
            raise IncompatibleShapes(f'Cannot stack along {dim.name!r}: a value already has that dim ({t.shape})')
    return dispatch(STACK_OP, tensors, (dim,))


CONCAT_OP = Op('concat', CONCAT, concat_dense)


def concat_tensors(values: Sequence, dim) -> Tensor:
    """Join tensors along an existing dim `dim` (a name or Shape); labels are joined too when all have them."""
    tensors = [as_tensor(v) for v in values]
    if not tensors:
        raise ValueError('concat() needs at least one value')
    name = dim.name if isinstance(dim, Shape) else resolve_dims(dim)[0]
    if len(tensors) == 1:
        joined_shape(tensors, name)
        return tensors[0]
    return dispatch(CONCAT_OP, tensors, (name, joined_shape(tensors, name)))


def unstack_tensor(value: Tensor, dim) -> tuple:
    """Slices of `value` along `dim` (a name, Shape or filter), as a tuple; several dims are iterated jointly."""
    names = dims_in(value.shape, dim)
    if not names:
        raise DimNotFound(f'unstack(): {dim!r} names no dim of {value.shape}')
    if type(value) is Dense and len(names) == 1 and isinstance(value.shape.get_size(names[0]), int):
        return _unstack_dense(value, names[0])
    sizes = [value.shape.get_size(n) for n in names]
    result = []
    for flat in range(math.prod(sizes)):
        index, rest = {}, flat
        for n, s in zip(reversed(names), reversed(sizes), strict=True):
            index[n], rest = rest % s, rest // s
        result.append(value[index])
    return tuple(result)


def _unstack_dense(t: Dense, name: str) -> tuple:
    """Slices of a dense tensor along one dim: views of its native, made without a dispatch each."""
    shape = t._shape
    rest = shape.without(name)
    before = (slice(None),) * shape.index(name)
    native, backend = t._native, t._backend
    return tuple(Dense(native[(*before, i)], rest, backend) for i in range(shape.get_size(name)))


def expand_tensor(value, *dims) -> Tensor:
    """`value` with the dims `dims` added, lazily: the values are not repeated in memory."""
    value = as_tensor(value)
    add = merge_shapes(*[parse_dim_spec(d) if isinstance(d, str) else shape(d) for d in dims]) if dims \
        else EMPTY_SHAPE
    for name, size in zip(add.names, add.sizes, strict=True):
        if size is None:
            raise ValueError(f'expand() needs sizes for the new dims; {name!r} has none in {add}')
    full = merge_shapes(value.shape, add)  # a dim the value has must agree in size (and labels, where both have)
    labelled = [n for n in value.shape.names if value.shape.get_labels(n) != full.get_labels(n)]
    if labelled:  # labels given for dims the value has: the value takes them
        value = rename_tensor_dims(value, labelled, full.only(labelled, reorder=True))
    return expand_to(value, full)


def rename_tensor_dims(value, dims, names) -> Tensor:
    """`value` with the dims `dims` renamed to `names` (str, sequence, or a Shape that also sets types)."""
    value = as_tensor(value)
    requested = resolve_dims(dims, value.shape)
    new_names = names.names if isinstance(names, Shape) else resolve_dims(names)
    if len(new_names) != len(requested):
        raise ValueError(f'rename_dims() got {len(requested)} dims {requested} but {len(new_names)} new names '
                         f'{new_names}')
    keep = [i for i, n in enumerate(requested) if n in value.shape.names]
    if not keep:
        return value
    old = tuple(requested[i] for i in keep)
    if isinstance(names, Shape):
        new = names[[new_names[i] for i in keep]]
    else:
        new = value.shape.only(old, reorder=True).replace(old, tuple(new_names[i] for i in keep))
    return dispatch(RENAME_OP, (value,), (old, new))


def _dense_reshape(ts: Sequence[Dense], order: tuple, shape: Shape) -> Dense:
    t = ts[0]
    native = t._native_in(order)
    return Dense(t._backend.reshape(native, shape.sizes), shape, t._backend)


RESHAPE_OP = Op('reshape', RESHAPE, _dense_reshape)


def pack_tensor_dims(value: Tensor, dims, packed_dim: Shape, pos: int | None = None) -> Tensor:
    """Merge `dims` into the single dim `packed_dim`, in the order the dims are given (row-major).

    The packed dim goes where the first packed dim was, or to position `pos` among the remaining dims.
    Without dims to pack, `packed_dim` is added with its size (1 if it has none).
    """
    value = as_tensor(value)
    packed_dim = as_dim(packed_dim, 'packed_dim')
    names = tuple(n for n in resolve_dims(dims, value.shape) if n in value.shape.names)
    if not names:
        size = packed_dim.size if isinstance(packed_dim.size, int) else 1
        return expand_to(value, merge_shapes(value.shape, packed_dim.with_size(size)))
    size = math.prod(value.shape.get_size(n) for n in names)
    if packed_dim.labels[0] is not None and len(packed_dim.labels[0]) != size:
        raise IncompatibleShapes(f'pack_dims(): {packed_dim} has labels for {len(packed_dim.labels[0])} entries '
                                 f'but the packed dims {names} hold {size}')
    packed = packed_dim if packed_dim.labels[0] is not None else packed_dim.with_size(size)
    rest = [n for n in value.shape.names if n not in names]
    if pos is None:
        first = min(value.shape.index(n) for n in names)
        before = value.shape[[n for n in rest if value.shape.index(n) < first]]
        after = value.shape[[n for n in rest if value.shape.index(n) > first]]
    else:
        if not -len(rest) - 1 <= pos <= len(rest):
            raise ValueError(f'pack_dims(): pos={pos} is outside the {len(rest)} remaining dims {rest}')
        pos = pos % (len(rest) + 1)
        before, after = value.shape[rest[:pos]], value.shape[rest[pos:]]
    result = concat_shapes(before, packed, after)
    order = before.names + names + after.names
    return dispatch(RESHAPE_OP, (value,), (order, result))


def unpack_tensor_dim(value: Tensor, dim, *unpacked_dims) -> Tensor:
    """Split the dim `dim` into `unpacked_dims` (row-major); at most one of their sizes may be None."""
    value = as_tensor(value)
    name = dim.name if isinstance(dim, Shape) else resolve_dims(dim)[0]
    if name not in value.shape.names:
        raise DimNotFound(f'unpack_dim(): {name!r} is not a dim of {value.shape}')
    new = concat_shapes(*[parse_dim_spec(d) if isinstance(d, str) else d for d in unpacked_dims])
    total = value.shape.get_size(name)
    unknown = [n for n, s in zip(new.names, new.sizes, strict=True) if s is None]
    known = math.prod(s for s in new.sizes if s is not None)
    if len(unknown) > 1 or (not unknown and known != total) or (unknown and total % known):
        raise IncompatibleShapes(f'unpack_dim(): cannot split {name!r} of size {total} into {new}')
    if unknown:
        new = new.with_dim_size(unknown[0], total // known)
    i = value.shape.index(name)
    result = concat_shapes(value.shape[:i], new, value.shape[i + 1:])
    return dispatch(RESHAPE_OP, (value,), (value.shape.names, result))


def flatten_tensor(value, flat_dim: Shape = FLAT_DIM) -> Tensor:
    """All dims of `value` packed into `flat_dim`, in the order of its shape."""
    value = as_tensor(value)
    return pack_tensor_dims(value, value.shape.names, flat_dim)


def transpose(value, order) -> Tensor:
    """`value` laid out with its dims in `order` (a dim filter listing all of its dims)."""
    value = as_tensor(value)
    names = resolve_dims(order, value.shape)
    if set(names) != set(value.shape.names):
        raise ValueError(f'transpose(): order {names} must list exactly the dims of {value.shape}')
    return dispatch(RESHAPE_OP, (value,), (names, value.shape[list(names)]))
