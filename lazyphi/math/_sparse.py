"""Sparse tensors, the public functions: building them (`sparse_tensor`, from SciPy's matrices by `from_scipy`),
their formats (`to_format` and its short forms), reading their entries (`stored_values`, `stored_indices`,
`get_sparsity`) and `tensor_like`.

The kind itself, `SparseTensor`, and the conversions between formats are in `_sparse_kind.py`, the public classes
of the formats in `_sparse_classes.py`; this module names them all, as the rest of lazyphi imports them from here.
"""

from __future__ import annotations

import numpy as np

from ..backend import DType
from ._creation import meshgrid, wrap, zeros
from ._creation import tensor_like as dense_tensor_like
from ._dims import channel, instance
from ._kinds import Expanded, PartsKind, expand_to
from ._magic_ops import pack_dims, stack
from ._reductions import REDUCTIONS
from ._shape import Shape, merge_shapes
from ._sparse_classes import CompactSparseTensor, CompressedSparseMatrix, SparseCoordinateTensor
from ._sparse_kind import ENTRIES, FORMATS, INDEX, SparseTensor, _sorted, dense, make_sparse, to_format
from ._structure import rename_tensor_dims
from ._tensor import Tensor, as_tensor

__all__ = ['ENTRIES', 'FORMATS', 'INDEX', 'CompactSparseTensor', 'CompressedSparseMatrix', 'SparseCoordinateTensor',
           'SparseTensor', 'dense', 'from_scipy', 'get_format', 'get_sparsity', 'is_sparse', 'make_sparse', 'sparse',
           'sparse_tensor', 'stored_indices', 'stored_values', 'tensor_like', 'to_compact_cols', 'to_compact_rows',
           'to_coo', 'to_csc', 'to_csr', 'to_format']


def sparse_tensor(indices: Tensor | None, values, dense_shape: Shape, can_contain_double_entries=True,
                  indices_sorted=False, format=None, indices_constant: bool = True) -> Tensor:
    """A tensor holding `values` at the coordinates `indices` and zero everywhere else; repeated coordinates add up.

    Args:
        indices: integers with one instance dim listing the entries and one channel dim whose item labels are the
            names of `dense_shape` (in any order); maybe batch dims. A single sparse dim may go without the channel
            dim. None: no entries. Or phiml's compact form: the other sparse dims (rows) and, named as the one
            sparse dim they index, a dim listing the entries of each row (a `CompactSparseTensor`).
        values: the values of the entries (along the instance dim of `indices`), with any value dims (such as a
            vector's components) and batch dims; a number or a tensor without the entries' dim is the same for all.
        dense_shape: the sparse dims, with their sizes.
        can_contain_double_entries: informational: repeated coordinates always add up.
        indices_sorted: informational: lazyphi sorts where a format needs it.
        format: None (coordinates as given: 'coo'), or a format `to_format` accepts.
        indices_constant: unused: lazyphi's compiled functions take the indices as they take every tensor.

    Raises:
        ValueError: `indices` not of either form, coordinates
            outside `dense_shape`, an instance dim of `values` other than the entries', or an unknown `format`.
    """
    if not isinstance(dense_shape, Shape) or not dense_shape or any(not isinstance(s, int) for s in dense_shape.sizes):
        raise ValueError(f'sparse_tensor(): dense_shape must be a Shape of the sparse dims with their sizes, got '
                         f'{dense_shape!r}')
    if indices is None:
        indices = zeros(instance(entries=0), channel(index=dense_shape.names), dtype=DType(int, 64))
    indices = as_tensor(indices)
    if indices.dtype.kind is not int:
        raise ValueError(f'sparse_tensor(): indices must hold integers, got {indices.dtype}')
    if all(n in indices.shape.names for n in dense_shape.names):  # phiml's compact form
        return _compact(indices, values, dense_shape, format)
    if indices.shape.instance.rank != 1:
        raise ValueError(f'sparse_tensor(): indices must have exactly one instance dim listing the entries, got '
                         f'{indices.shape}')
    if not indices.shape.channel and dense_shape.rank == 1:
        indices = stack({dense_shape.name: indices}, channel('index'))
    index = indices.shape.channel
    if index.rank != 1 or set(index.item_names[0] or ()) != set(dense_shape.names) or index.size != dense_shape.rank:
        raise ValueError(f'sparse_tensor(): indices need one channel dim whose item labels name the sparse dims '
                         f'{dense_shape.names}, got {indices.shape}')
    entries = indices.shape.instance
    if indices.available and entries.volume:  # products gather at the coordinates unchecked (`gather_in_range`)
        for name, size in zip(dense_shape.names, dense_shape.sizes, strict=True):
            component = indices[{index.name: name}]
            low = int(REDUCTIONS['min'](component, component.shape.names))
            high = int(REDUCTIONS['max'](component, component.shape.names))
            if low < 0 or high >= size:
                raise ValueError(f'sparse_tensor(): the coordinates along {name!r} reach {low if low < 0 else high}, '
                                 f'outside 0 to {size - 1} of dense_shape {dense_shape}')
    values = as_tensor(values)
    if values.shape.instance.without(entries.names):
        raise ValueError(f'sparse_tensor(): values {values.shape} may have no instance dim but the entries\' '
                         f'{entries}')
    if entries.name not in values.shape.names:
        values = Expanded(values, merge_shapes(entries, values.shape))._dense()
    result = make_sparse(indices, values, dense_shape, unique=not can_contain_double_entries)
    return result if format is None else to_format(result, format)


def _compact(indices: Tensor, values, dense_shape: Shape, format) -> Tensor:
    """The compact form of `sparse_tensor`: the one dim listing fewer entries than `dense_shape` has is compressed."""
    compressed = dense_shape.only([n for n in dense_shape.names if indices.shape.get_size(n) < dense_shape.get_size(n)])
    if compressed.rank != 1 or indices.shape.channel or set(indices.shape.non_batch.names) != set(dense_shape.names):
        raise ValueError(f'sparse_tensor(): indices {indices.shape} of the compact form hold the sparse dims of '
                         f'{dense_shape}, one of them (the compressed dim) listing fewer entries than its size, '
                         f'and no other dims but batch dims')
    values = as_tensor(values)
    result = CompactSparseTensor(indices, expand_to(values, merge_shapes(indices.shape, values.shape)), compressed)
    return result if format is None else to_format(result, format)


def is_sparse(x: Tensor) -> bool:
    """Whether `x` is a sparse tensor (of any format)."""
    return isinstance(x, SparseTensor)


def get_format(x: Tensor) -> str:
    """The storage format of `x`: 'coo', 'csr', 'csc', 'compact-rows', 'compact-cols' or 'dense'."""
    return x._format if isinstance(x, SparseTensor) else 'dense'


def sparse(x: Tensor, *, format: str = 'sparse') -> Tensor:
    """`x` as a sparse tensor: as it is if sparse, else in the format its backend prefers (see `to_format`)."""
    return to_format(x, format)


def to_coo(x: Tensor, *, format: str = 'coo') -> Tensor:
    """`x` as a sparse tensor of coordinates: `to_format(x, 'coo')`."""
    return to_format(x, format)


def to_csr(x: Tensor, *, format: str = 'csr') -> Tensor:
    """`x` as a sparse matrix sorted by rows (the non-dual dims): `to_format(x, 'csr')`."""
    return to_format(x, format)


def to_csc(x: Tensor, *, format: str = 'csc') -> Tensor:
    """`x` as a sparse matrix sorted by columns (the dual dims): `to_format(x, 'csc')`.

    (phiml 1.16's `to_csc` gives 'csr'; this gives 'csc'.)
    """
    return to_format(x, format)


def to_compact_rows(x: Tensor, *, format: str = 'compact-rows') -> Tensor:
    """`x` as a sparse matrix in the 'compact-rows' format, held like 'csc' (see `to_format`)."""
    return to_format(x, format)


def to_compact_cols(x: Tensor, *, format: str = 'compact-cols') -> Tensor:
    """`x` as a sparse matrix in the 'compact-cols' format, held like 'csr' (see `to_format`)."""
    return to_format(x, format)


def stored_values(x: Tensor, list_dim=ENTRIES, invalid='discard') -> Tensor:
    """The values `x` stores, listed along `list_dim`.

    A sparse tensor gives its entries' values (with its value and batch dims); a dense one all its values, its
    non-batch dims packed into `list_dim`; a lazily expanded one only the values it holds.

    Args:
        x: a tensor.
        list_dim: the instance dim listing the values (a Shape or a name).
        invalid: 'discard', 'clamp' or 'keep': lazyphi stores no invalid entries, so all three give the same.
    """
    _check_invalid(invalid)
    list_dim = instance(list_dim) if isinstance(list_dim, str) else list_dim
    x = as_tensor(x)
    if isinstance(x, SparseTensor):
        return rename_tensor_dims(x._values, x._entries, list_dim)
    while isinstance(x, Expanded):
        x = x._inner
    if isinstance(x, SparseTensor):
        return stored_values(x, list_dim, invalid)
    return pack_dims(x, x.shape.non_batch, list_dim)


def stored_indices(x: Tensor, list_dim=ENTRIES, index_dim=INDEX, invalid='discard') -> Tensor:
    """The coordinates of the values `x` stores (see `stored_values`), listed along `list_dim`.

    Args:
        x: a sparse tensor, or a dense one without batch dims (all its coordinates of non-batch, non-channel dims,
            in row-major order).
        list_dim: the instance dim listing the coordinates.
        index_dim: the channel dim of the components, labelled by the sparse dims.
        invalid: 'discard', 'clamp' or 'keep': lazyphi stores no invalid entries, so all three give the same.

    Raises:
        ValueError: a dense `x` with batch dims, or a bad `invalid`.
    """
    _check_invalid(invalid)
    list_dim = instance(list_dim) if isinstance(list_dim, str) else list_dim
    index_dim = channel(index_dim) if isinstance(index_dim, str) else index_dim
    x = as_tensor(x)
    inner = x
    while isinstance(inner, Expanded):
        inner = inner._inner
    if isinstance(inner, SparseTensor):  # its stored coordinates; a lazily expanded dense tensor lists all (below)
        x = inner
        labelled = index_dim.with_size(x._sparse_names)
        return rename_tensor_dims(x._indices, (x._entries, x._index_dim), merge_shapes(list_dim, labelled))
    if x.shape.batch:
        raise ValueError(f'stored_indices(): a dense tensor with batch dims {x.shape.batch} has no single list of '
                         f'coordinates; slice or unstack the batch dims first')
    dims = x.shape.non_batch.non_channel
    grid = meshgrid(dims, stack_dim=index_dim.with_size(dims.names))
    return pack_dims(grid, dims, list_dim)


def get_sparsity(x: Tensor) -> float:
    """The fraction of the values of `x` that are stored, as phiml counts them: a sparse tensor's entries (times its
    value dims), an expanded tensor's values before expanding, a stack's or join's parts' stored values added up,
    over the volume of the shape.
    """
    x = as_tensor(x)
    return _stored_count(x) / x.shape.volume


def _stored_count(x: Tensor) -> int:
    if isinstance(x, SparseTensor):
        return x._values.shape.volume
    if isinstance(x, Expanded):
        return _stored_count(x._inner)
    if isinstance(x, PartsKind):
        return sum(_stored_count(part) for part in x._parts)
    return x.shape.volume


def _check_invalid(invalid) -> None:
    if invalid not in ('discard', 'clamp', 'keep'):
        raise ValueError(f"invalid must be 'discard', 'clamp' or 'keep', got {invalid!r}")


def tensor_like(existing_tensor: Tensor, values, value_order: str | None = None) -> Tensor:
    """A tensor like `existing_tensor` holding `values`: for a sparse one, its entries with `values` (one per entry
    along an instance dim, in the stored order, or one value for all); for a dense one see the dense version.

    `value_order` is accepted for phiml's signature: values are always taken in the stored order.
    """
    if not isinstance(existing_tensor, SparseTensor):
        return dense_tensor_like(existing_tensor, values, value_order)
    values = as_tensor(values)
    entries = existing_tensor._indices.shape[existing_tensor._entries]
    listed = values.shape.instance
    if listed:
        if listed.rank != 1 or listed.size != entries.size:
            raise ValueError(f'tensor_like(): values {values.shape} must list one value per entry of the sparse '
                             f'tensor ({entries.size}) along one instance dim')
        values = rename_tensor_dims(values, listed.name, entries)
    else:
        values = Expanded(values, merge_shapes(entries, values.shape))._dense()
    return existing_tensor._with(values=values)


def from_scipy(data, dims: Shape):
    """A sparse tensor (on NumPy) of the SciPy sparse matrix `data`, or NotImplemented for other SciPy objects.

    `tensor()` and `wrap()` call this (registered in `_foreign.py`). As in phiml, the rows lie along the non-dual
    dims of `dims` and the columns along the dual ones where `dims` has both, else along its two dims in order;
    several dims on one side need their sizes (row-major, like `pack_dims`), a single one takes the matrix's.
    'csr' and 'csc' matrices keep their format ('coo' the others), their repeated coordinates added up.

    Raises:
        ValueError: `dims` that do not split into rows and columns, or whose sizes disagree with the matrix.
    """
    from scipy.sparse import issparse
    if not issparse(data):
        return NotImplemented
    if dims.dual and dims.non_dual:
        rows, columns = dims.non_dual, dims.dual
    elif dims.rank == 2:
        rows, columns = dims[0], dims[1]
    else:
        raise ValueError(f'tensor(): a SciPy sparse matrix needs its rows and columns named: dual dims for the '
                         f'columns and others for the rows, or two dims; got {dims}')
    rows, columns = (_matrix_side(side, size, data) for side, size in zip((rows, columns), data.shape, strict=True))
    coo = data.tocoo()
    positions = [np.unravel_index(np.asarray(coo.row, np.int64), rows.sizes),
                 np.unravel_index(np.asarray(coo.col, np.int64), columns.sizes)]
    components = np.stack([c for side in positions for c in side], -1).astype(np.int64).reshape(-1, dims.rank)
    dense_shape = merge_shapes(rows, columns)
    indices = wrap(components, ENTRIES, channel(index=rows.names + columns.names))
    values = wrap(np.asarray(coo.data), ENTRIES)
    result = make_sparse(indices, values, dense_shape, unique=bool(getattr(coo, 'has_canonical_format', False)))
    return _sorted(result, data.format) if data.format in ('csr', 'csc') else result


def _matrix_side(side: Shape, size: int, data) -> Shape:
    if all(isinstance(s, int) for s in side.sizes):
        if side.volume != size:
            raise ValueError(f'tensor(): the SciPy matrix of shape {data.shape} has {size} along {side}')
        return side
    if side.rank != 1:
        raise ValueError(f'tensor(): several dims {side} on one side of a SciPy matrix need their sizes')
    return side.with_size(size)
