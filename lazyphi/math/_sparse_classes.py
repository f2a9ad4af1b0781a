"""The public classes of sparse tensors, one per kind of format, constructed from phiml's arguments:
`SparseCoordinateTensor` ('coo'), `CompressedSparseMatrix` ('csr', 'csc', from row pointers) and
`CompactSparseTensor` ('compact-rows', 'compact-cols'). Each turns its arguments into the coordinates that every
`SparseTensor` holds (`_sparse_kind.py`); `make_sparse` builds results of the class of their format.
"""

from __future__ import annotations

from ..backend import DType
from ._creation import meshgrid, zeros
from ._dims import channel, instance
from ._gather_scatter import scatter
from ._kinds import Expanded, expand_to
from ._magic_ops import pack_dims, stack
from ._shape import Shape, merge_shapes
from ._sorting import cumulative_sum
from ._sparse_kind import ENTRIES, FORMAT_CLASSES, SparseTensor
from ._structure import rename_tensor_dims
from ._tensor import Tensor, as_tensor


class SparseCoordinateTensor(SparseTensor):
    """A sparse tensor of coordinates in any order, maybe repeated ('coo'), constructed as in phiml.

    Args:
        indices: integers with one instance dim listing the entries and one channel dim whose item labels name the
            sparse dims; maybe batch dims.
        values: the entries' values along that instance dim, with any value and batch dims.
        dense_shape: the sparse dims with their sizes.
        can_contain_double_entries: whether a coordinate may be listed more than once (its values add up).
        indices_sorted: informational, as in `sparse_tensor`.
        indices_constant: informational, as in `sparse_tensor`.

    The parts are taken as given, as phiml does: `sparse_tensor` checks them.
    """

    __slots__ = ()

    def __init__(self, indices: Tensor, values: Tensor, dense_shape: Shape, can_contain_double_entries: bool = True,
                 indices_sorted: bool = False, indices_constant: bool = True):
        super().__init__(indices, values, dense_shape, 'coo', not can_contain_double_entries)


class CompressedSparseMatrix(SparseTensor):
    """A sparse matrix sorted by its compressed dims, each coordinate once ('csr', 'csc'), constructed as in phiml
    from compressed row pointers; lazyphi keeps the coordinates, so every backend runs it through gather and scatter.

    The format is 'csr' where the compressed dims are non-dual (rows), 'csc' where they are dual (columns).

    Args:
        indices: the position of each entry along the uncompressed dims (flattened row-major), listed along one
            instance dim in the order of the compressed dims.
        pointers: along one instance dim of size `compressed_dims.volume + 1`: where the entries of each position
            of the compressed dims (flattened row-major) start in `indices`, then the number of entries.
        values: the entries' values along the instance dim of `indices`, with any value and batch dims.
        uncompressed_dims: the dims `indices` points along, with their sizes.
        compressed_dims: the dims `pointers` points along, with their sizes; all dual or all non-dual.
        indices_constant: informational, as in `sparse_tensor`.
        uncompressed_offset: None only (phiml marks slices of a larger matrix with it; lazyphi's slices re-index).
        uncompressed_indices: phiml's cache of the row coordinates: not used.
        uncompressed_indices_perm: phiml's cache of their order: not used.

    The parts are taken as given (sorted, each coordinate once), as phiml does; the row of each entry is computed
    from `pointers` with tensor operations, so the parts may be traced.

    Raises:
        ValueError: compressed dims both dual and non-dual, pointers of the wrong size, indices without one instance
            dim, or an `uncompressed_offset`.
    """

    __slots__ = ()

    def __init__(self, indices: Tensor, pointers: Tensor, values: Tensor, uncompressed_dims: Shape,
                 compressed_dims: Shape, indices_constant: bool = True, uncompressed_offset: int | None = None,
                 uncompressed_indices: Tensor | None = None, uncompressed_indices_perm: Tensor | None = None):
        if uncompressed_offset is not None:
            raise ValueError(f'CompressedSparseMatrix: uncompressed_offset must be None in lazyphi (its slices '
                             f're-index the entries), got {uncompressed_offset!r}')
        if compressed_dims.dual and compressed_dims.non_dual:
            raise ValueError(f'CompressedSparseMatrix: the compressed dims {compressed_dims} must be all rows '
                             f'(non-dual) or all columns (dual)')
        indices, pointers = as_tensor(indices), as_tensor(pointers)
        entries, pointer_dim = indices.shape.instance, pointers.shape.instance
        if entries.rank != 1 or pointer_dim.rank != 1:
            raise ValueError(f'CompressedSparseMatrix: indices and pointers need one instance dim each, got '
                             f'{indices.shape} and {pointers.shape}')
        if pointer_dim.size != compressed_dims.volume + 1:
            raise ValueError(f'CompressedSparseMatrix: pointers {pointers.shape} must have compressed_dims.volume + 1 '
                             f'= {compressed_dims.volume + 1} entries for compressed dims {compressed_dims}')
        rows = _rows_of_entries(pointers, entries)
        components = {**_unravel(rows, compressed_dims), **_unravel(indices, uncompressed_dims)}
        coordinates = stack(components, channel('index'), expand_values=True)
        values = as_tensor(values)
        if entries.name not in values.shape.names:
            values = Expanded(values, merge_shapes(entries, values.shape))._dense()
        format = 'csc' if compressed_dims.dual else 'csr'
        super().__init__(coordinates, values, merge_shapes(compressed_dims, uncompressed_dims), format, True)


class CompactSparseTensor(SparseTensor):
    """A sparse tensor listing the same number of entries at each position of its other dims ('compact-cols' where
    the compressed dims are dual, else 'compact-rows'), constructed as in phiml.

    Args:
        indices: the positions along `compressed_dims` of the entries: a tensor with the other dims and, in place of
            the compressed dim, a dim of the same name listing the entries of each position (fewer than its size).
        values: the entries' values, with the dims of `indices` and any value dims.
        compressed_dims: the one sparse dim the entries lie along, with its size.
        indices_constant: informational, as in `sparse_tensor`.

    The dims of `indices` other than the compressed one and batch dims become sparse dims (the rows); lazyphi keeps
    the coordinates, so every operation of sparse tensors applies.

    Raises:
        ValueError: `compressed_dims` not one dim with a size, or missing from `indices`.
    """

    __slots__ = ()

    def __init__(self, indices: Tensor, values: Tensor, compressed_dims: Shape, indices_constant: bool = True):
        if compressed_dims.rank != 1 or not isinstance(compressed_dims.size, int):
            raise ValueError(f'CompactSparseTensor: compressed_dims must be one dim with its size, got '
                             f'{compressed_dims!r}')
        indices, values = as_tensor(indices), as_tensor(values)
        name = compressed_dims.name
        if name not in indices.shape.names:
            raise ValueError(f'CompactSparseTensor: indices {indices.shape} must list the entries along the '
                             f'compressed dim {name!r}')
        slot = instance(_compact_slot=indices.shape.get_size(name))
        rows = indices.shape.without(name).non_batch
        listed = merge_shapes(rows, slot)
        positions = rename_tensor_dims(indices, name, slot)
        components = {**{r: meshgrid(rows, stack_dim=None) if rows.rank == 1 else meshgrid(rows)[{'vector': r}]
                         for r in rows.names}, name: positions}
        coordinates = pack_dims(stack(components, channel('index'), expand_values=True), listed, ENTRIES)
        values = expand_to(rename_tensor_dims(values, name, slot) if name in values.shape.names else values,
                           merge_shapes(listed, values.shape.without(name)))
        format = 'compact-cols' if compressed_dims.dual else 'compact-rows'
        super().__init__(coordinates, pack_dims(values, listed, ENTRIES), merge_shapes(rows, compressed_dims),
                         format, True)


FORMAT_CLASSES.update({'coo': SparseCoordinateTensor, 'csr': CompressedSparseMatrix, 'csc': CompressedSparseMatrix,
                       'compact-rows': CompactSparseTensor, 'compact-cols': CompactSparseTensor})


def _rows_of_entries(pointers: Tensor, entries: Shape) -> Tensor:
    """The compressed position of each entry along `entries`, from CSR pointers: the count of rows started before."""
    pointer_dim = pointers.shape.instance.name
    starts = rename_tensor_dims(pointers[{pointer_dim: slice(1, -1)}], pointer_dim, instance('_row_starts'))
    marks = scatter(zeros(entries, dtype=DType(int, 64)), {entries.name: starts}, 1, mode='add',
                    outside_handling='discard')
    return cumulative_sum(marks, entries.name, include_0=False, include_sum=True)


def _unravel(flat: Tensor, dims: Shape) -> dict:
    """The position along each of `dims` of the row-major flat index `flat`."""
    result, stride = {}, 1
    for name, size in reversed(tuple(zip(dims.names, dims.sizes, strict=True))):
        result[name] = (flat // stride) % size if dims.rank > 1 else flat
        stride *= size
    return dict(reversed(result.items()))
