"""Sparse tensors, the kind: values stored at listed coordinates, zero everywhere else.

`SparseTensor` is a tensor kind (see `kinds.py`). It holds an integer tensor of indices (one instance dim
listing the entries, one channel dim whose item labels name the *sparse dims*, and maybe batch dims), the
values (the entries' dim and the *value dims*, such as the components of a vector, and maybe batch dims), the
shape of the sparse dims and a format tag: 'coo' (coordinates in any order, maybe repeated), 'csr' / 'csc'
(coordinates sorted by rows / columns, each listed once) and 'compact-cols' / 'compact-rows' (sorted as 'csr' /
'csc'). The compressed formats are stored as sorted coordinates: every backend runs them through the same
gather and scatter operations. Repeated coordinates add up, as in phiml.

The kind handles, without materialising: element-wise operations that keep zeros (negation, `abs`, `sqrt`,
multiplying by or dividing by a dense tensor, operations of two sparse tensors sharing their indices, ...),
reductions over value dims, sums over sparse dims, `dot` / `@` with a dense tensor, slicing along value and
batch dims, slicing sparse dims by int or slice (reading the indices) and renaming. Everything else runs on the
materialised tensor (`_dense()`, a scatter-add into zeros). Conversions between the formats (`to_format`) are
here too, as the tensor's `compress` methods and its coalescing use them.

The public classes of the formats, which take phiml's constructor arguments, are in `_sparse_classes.py` (which
fills `FORMAT_CLASSES`); the public functions building and reading sparse tensors in `_sparse.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..backend import NUMPY, Backend, DType, to_numpy_dtype
from ._convert import dense as dense_trees
from ._creation import wrap
from ._dims import channel, instance
from ._gather_scatter import boolean_mask, gather, gather_in_range, nonzero, scatter
from ._kinds import expand_to
from ._magic_ops import concat, stack
from ._natives import promoted_dtype
from ._reductions import REDUCTIONS, reduction_of
from ._shape import Shape, merge_shapes
from ._sorting import cumulative_sum, sort
from ._structure import concat_tensors, rename_tensor_dims, stack_tensors
from ._tensor import CONCAT, ELEMENTWISE, EXPAND, GATHER, REDUCE, RENAME, STACK, Dense, Op, Tensor, as_tensor, dispatch
from ._tree import tree_map

ENTRIES = instance('entries')  # the dim listing stored values and indices by default
INDEX = channel('index')  # the dim of the index components by default
FORMATS = ('dense', 'sparse', 'coo', 'csr', 'csc', 'compact-rows', 'compact-cols')
_SORTED = {'csr': False, 'compact-cols': False, 'csc': True, 'compact-rows': True}  # format -> columns first
# element-wise operations of one tensor that map 0 to 0, so the zeros need not be stored
_KEEPING_ZERO = {'negative', 'abs', 'sign', 'round', 'ceil', 'floor', 'real', 'imag', 'conj', 'isnan', 'isinf',
                 'cast', 'sqrt', 'sin', 'tan', 'arcsin', 'arctan', 'sinh', 'tanh', 'arcsinh', 'arctanh', 'erf'}
_LINEAR = {'negative', 'real', 'imag', 'conj'}  # of those, the ones that may act on repeated coordinates
_SAME_PATTERN = {'add', 'sub', 'mul', 'maximum', 'minimum'}  # of two sparse tensors with the same entries
# reductions over sparse dims, as phiml: over the stored values only (a row without entries: the scatter's default,
# 0 for sums, -inf / inf for max / min, NaN for means, False / True for any / all); reduction -> scatter mode
_OVER_ENTRIES = {'sum': 'add', 'max': 'max', 'min': 'min', 'mean': 'mean', 'any': 'any', 'all': 'all'}


class SparseTensor(Tensor):
    """A tensor zero everywhere but at the coordinates `indices`, where it holds `values` (see the module)."""

    __slots__ = ('_dense_shape', '_format', '_host', '_indices', '_shape', '_unique', '_values')
    _kind_priority = 25

    def __init__(self, indices: Tensor, values: Tensor, dense_shape: Shape, format: str = 'coo', unique: bool = False):
        self._indices = indices
        self._values = values
        self._dense_shape = dense_shape
        self._format = format
        self._unique = unique or format != 'coo'  # whether each coordinate is listed at most once
        self._host = {}  # key -> a host object derived from the values (see derived)
        entries, index = self._entries, self._index_dim
        self._shape = merge_shapes(dense_shape, values.shape.without(entries), indices.shape.without((entries, index)))

    @property
    def _entries(self) -> str:
        return self._indices.shape.instance.names[0]

    @property
    def _index_dim(self) -> str:
        return self._indices.shape.channel.names[0]

    @property
    def _sparse_names(self) -> tuple:
        """The sparse dims in the order of the index components."""
        return self._indices.shape.get_item_names(self._index_dim)

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._values.dtype

    @property
    def backend(self) -> Backend:
        return self._values.backend if self._values.backend is not NUMPY else self._indices.backend

    @property
    def available(self) -> bool:
        return self._indices.available and self._values.available

    @property
    def entry_count(self) -> int:
        return self._indices.shape.get_size(self._entries)

    def _memory_bytes(self) -> int:
        return self._indices._memory_bytes() + self._values._memory_bytes()

    def _dense(self) -> Dense:
        if self.entry_count == 0:
            return dispatch_zeros(self._shape, self.dtype, self.backend)
        mode = 'any' if self.dtype.kind is bool else 'add'  # repeated True coordinates stay True, as in SciPy
        result = scatter(self._shape, self._indices, self._values, mode=mode, outside_handling='undefined')
        return result._dense()

    def _with(self, indices: Tensor | None = None, values: Tensor | None = None, dense_shape: Shape | None = None,
              format: str | None = None) -> SparseTensor:
        return make_sparse(self._indices if indices is None else indices, self._values if values is None else values,
                           self._dense_shape if dense_shape is None else dense_shape,
                           self._format if format is None else format, self._unique)

    def _coalesced(self) -> SparseTensor | None:
        """This tensor with each coordinate listed once (repeated ones added up); None where that needs indices that
        are not at hand."""
        if self._unique:
            return self
        if not self._indices.available or self._indices.shape.without((self._entries, self._index_dim)):
            return None
        return _sorted(self, 'csr')._with(format='coo')

    def derived(self, key: tuple, make: Callable):
        """`make()`, computed at the first call with `key` and kept with this tensor for later ones: an object derived
        from its values on the host, such as SciPy's matrix (`host_csr`) or its factors. The tensor is immutable, so
        what was derived from it stays true; it lives as long as the tensor."""
        if key not in self._host:
            self._host[key] = make()
        return self._host[key]

    def host_csr(self, rows: Sequence[str], columns: Sequence[str], dtype: DType):
        """This tensor as a `scipy.sparse.csr_matrix` of `dtype`: its rows the sparse dims `rows` and its columns the
        sparse dims `columns` (together all of them), each side flattened row-major in the given order (as
        `reshaped_native` packs dims), repeated coordinates added up. Built once per arguments and kept: the tensor
        is immutable.

        None where no such matrix exists: indices or values not at hand (inside `jit_compile`, or traced), batch or
        value dims, or `rows` and `columns` not splitting the sparse dims.
        """
        rows, columns = tuple(rows), tuple(columns)
        entries, index = self._entries, self._index_dim
        names = self._sparse_names
        if not self.available or self._values.shape.names != (entries,) or \
                set(self._indices.shape.names) != {entries, index} or sorted(rows + columns) != sorted(names):
            return None
        return self.derived(('csr', rows, columns, dtype), lambda: self._csr(rows, columns, dtype))

    def _csr(self, rows: tuple, columns: tuple, dtype: DType):
        import scipy.sparse
        entries, index = self._entries, self._index_dim
        names = self._sparse_names
        coordinates = self._indices.backend.numpy(self._indices.native([entries, index])).astype(np.int64)

        def flat(side: tuple) -> np.ndarray:
            if not side:
                return np.zeros(coordinates.shape[0], np.int64)
            return np.ravel_multi_index([coordinates[:, names.index(n)] for n in side],
                                        [self._dense_shape.get_size(n) for n in side])
        values = self._values.backend.numpy(self._values.native([entries])).astype(to_numpy_dtype(dtype))
        size = [int(np.prod([self._dense_shape.get_size(n) for n in side], dtype=np.int64)) for side in (rows, columns)]
        matrix = scipy.sparse.csr_matrix((values, (flat(rows), flat(columns))), shape=tuple(size))
        matrix.sum_duplicates()
        return matrix

    def _jit_parts(self) -> tuple:
        """The tensors `jit_compile` passes through a compiled function in place of this one."""
        return self._indices, self._values

    def _with_jit_parts(self, parts: Sequence[Tensor]) -> SparseTensor:
        rebuilt = self._with(*parts)
        if all(new is old or (type(new) is Dense and type(old) is Dense and new._native is old._native)
               for new, old in zip(parts, self._jit_parts(), strict=True)):
            rebuilt._host = self._host  # the same values (called on values, not traced): the same host objects
        return rebuilt

    def compress(self, dims) -> SparseTensor:
        """This matrix with `dims` compressed: the rows (its non-dual dims, `non_dual`) give 'csr', the columns (its
        dual dims, `dual`) give 'csc' (see `to_format`).

        Raises:
            ValueError: `dims` are neither all the rows nor all the columns.
        """
        chosen = set(self._dense_shape.only(dims).names)
        rows = set(self._dense_shape.non_dual.names)
        if chosen and chosen == rows:
            return to_format(self, 'csr')
        if chosen and chosen == set(self._dense_shape.dual.names):
            return to_format(self, 'csc')
        raise ValueError(f'compress(): dims {dims!r} select {sorted(chosen)}; lazyphi compresses all the rows '
                         f'{sorted(rows)} (non_dual) or all the columns {list(self._dense_shape.dual.names)} (dual)')

    def compress_rows(self) -> SparseTensor:
        """This matrix sorted by rows, each coordinate once: 'csr'."""
        return to_format(self, 'csr')

    def compress_cols(self) -> SparseTensor:
        """This matrix sorted by columns, each coordinate once: 'csc'."""
        return to_format(self, 'csc')

    def __reduce__(self):
        return make_sparse, (self._indices, self._values, self._dense_shape, self._format, self._unique)

    def __repr__(self) -> str:
        return f'sparse {self._format} {self._shape} with {self.entry_count} entries: {self._values!r}'

    def print(self, layout: str = 'full', float_format: str | None = None, threshold: int = 8,
              include_shape: bool | None = None, include_dtype: bool | None = None) -> None:
        """Print the format, the shape, the number of entries and the stored values."""
        print(repr(self))

    def _repr_html_(self) -> str:
        return f'<pre>{self!r}</pre>'

    # --- operations without materialising -------------------------------------------------------------
    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        category = op.category
        if category == ELEMENTWISE:
            return _elementwise(op, tensors, params)
        if op.name == 'dot':
            return _dot(tensors, params)
        if category == STACK:
            return _stack(tensors, params[0])
        if category == CONCAT:
            return _concat(tensors, params[0])
        if category == EXPAND:  # the new dims are value dims (or batch dims) of the values
            added = params[0].without(tensors[0].shape)
            return tensors[0]._with(values=expand_to(tensors[0]._values, merge_shapes(tensors[0]._values.shape, added)))
        self = tensors[0]
        if category == REDUCE:
            return self._reduce(op, params[0])
        if category == GATHER:
            return self._gather(params[0])
        if category == RENAME:
            return self._rename(*params)
        return NotImplemented

    def _reduce(self, op: Op, dims: tuple):
        reduction = reduction_of(op)
        if reduction is None:
            return NotImplemented
        sparse = [d for d in dims if d in self._dense_shape.names]
        index_batch = self._indices.shape.without((self._entries, self._index_dim)).names
        if any(d in index_batch for d in dims):
            return NotImplemented
        value_dims = tuple(d for d in dims if d in self._values.shape.names)
        if not sparse:  # zero stays zero along value dims
            return self._with(values=reduction(self._values, value_dims))
        if reduction.name not in _OVER_ENTRIES:
            return NotImplemented
        if reduction.name != 'sum':  # over the stored values: repeated coordinates are added up first
            coalesced = self._coalesced()
            self = self if coalesced is None else coalesced
        values = reduction(self._values, value_dims) if value_dims else self._values
        kept = tuple(n for n in self._sparse_names if n not in sparse)
        if not kept:
            return reduction(values, (self._entries,))
        base = self._shape.without(dims)
        return scatter(base, self._indices[{self._index_dim: _positions(self._sparse_names, kept)}], values,
                       mode=_OVER_ENTRIES[reduction.name], outside_handling='undefined')

    def _gather(self, selection: dict):
        value_sel = {d: s for d, s in selection.items() if d in self._values.shape.names}
        index_sel = {d: s for d, s in selection.items() if d in self._indices.shape.names}
        sparse_sel = {d: s for d, s in selection.items() if d in self._dense_shape.names}
        result = self._with(indices=self._indices[index_sel] if index_sel else None,
                            values=self._values[value_sel] if value_sel else None)
        if not sparse_sel:
            return result
        if not result.available or result._indices.shape.without((result._entries, result._index_dim)) or \
                any(not isinstance(s, (int, slice)) or (isinstance(s, slice) and s.step not in (None, 1))
                    for s in sparse_sel.values()):
            return NotImplemented  # the kept entries depend on the indices' values, or a form not handled here
        return result._slice_sparse(sparse_sel)

    def _slice_sparse(self, selection: dict) -> SparseTensor:
        """The entries inside int or step-1 slice `selection` along sparse dims, re-indexed (reads the indices)."""
        indices, values, shape = self._indices, self._values, self._dense_shape
        keep = None
        offsets = {}
        for dim, sel in selection.items():
            size = shape.get_size(dim)
            start, stop = (sel, sel + 1) if isinstance(sel, int) else sel.indices(size)[:2]
            component = indices[{self._index_dim: dim}]
            inside = (component >= start) & (component < stop)
            keep = inside if keep is None else keep & inside
            offsets[dim] = start
        kept = boolean_mask((indices, values), self._entries, keep)
        indices, values = kept
        shift = stack({n: offsets.get(n, 0) for n in self._sparse_names}, channel(self._index_dim))
        indices = indices - shift
        dropped = [d for d, s in selection.items() if isinstance(s, int)]
        if dropped:
            remaining = tuple(n for n in self._sparse_names if n not in dropped)
            indices = indices[{self._index_dim: _positions(self._sparse_names, remaining)}]
        return make_sparse(indices, values, shape.after_gather(selection), self._format)

    def _rename(self, old: tuple, new: Shape):
        mapping = dict(zip(old, new.names, strict=True))
        values, indices = self._values, self._indices
        in_values = tuple(n for n in old if n in values.shape.names)
        if in_values:
            values = rename_tensor_dims(values, in_values, new[[mapping[n] for n in in_values]])
        in_indices = tuple(n for n in old if n in indices.shape.names and n != self._index_dim)
        if in_indices:
            indices = rename_tensor_dims(indices, in_indices, new[[mapping[n] for n in in_indices]])
        sparse = tuple(n for n in old if n in self._dense_shape.names)
        if sparse:
            labels = tuple(mapping.get(n, n) for n in self._sparse_names)
            indices = rename_tensor_dims(indices, self._index_dim, channel(**{self._index_dim: labels}))
        dense_shape = self._dense_shape.replace(sparse, new[[mapping[n] for n in sparse]]) if sparse else None
        return self._with(indices, values, dense_shape)

# format -> the public class of its tensors (`make_sparse`), filled by `_sparse_classes.py`
FORMAT_CLASSES: dict = {}


def make_sparse(indices: Tensor, values: Tensor, dense_shape: Shape, format: str = 'coo',
                unique: bool = False) -> SparseTensor:
    """The sparse tensor of these parts (see `SparseTensor`), of the public class of its format."""
    result = object.__new__(FORMAT_CLASSES[format])
    SparseTensor.__init__(result, indices, values, dense_shape, format, unique)
    return result


def dispatch_zeros(shape: Shape, dtype: DType, backend: Backend) -> Dense:
    native = backend.zeros(shape.sizes, dtype)
    return Dense(native, shape, backend)


def _positions(labels: tuple, names: Sequence[str]) -> tuple:
    return tuple(labels.index(n) for n in names)


def _elementwise(op: Op, tensors: Sequence[Tensor], params: tuple):
    sparse = [t for t in tensors if isinstance(t, SparseTensor)]
    if len(tensors) == 1:
        self = tensors[0]
        if op.name == 'convert':  # to another backend: the indices and the values
            return self._with(indices=dispatch(op, (self._indices,), params), values=dispatch(op, (self._values,),
                                                                                            params))
        if op.name not in _KEEPING_ZERO:
            return NotImplemented
        if op.name not in _LINEAR and not (op.name == 'cast' and params[0].kind in (float, complex)):
            self = self._coalesced()  # f(a) + f(b) is not f(a + b): repeated coordinates are added up first
            if self is None:
                return NotImplemented
        return self._with(values=dispatch(op, (self._values,), params))
    if len(tensors) != 2:
        return NotImplemented
    a, b = tensors
    if len(sparse) == 2:
        if op.name not in _SAME_PATTERN or a._dense_shape != b._dense_shape:
            return NotImplemented
        if op.name not in ('add', 'sub'):  # not linear: each coordinate once
            a, b = a._coalesced(), b._coalesced()
            if a is None or b is None:
                return NotImplemented
        if a._indices is b._indices or _same_entries(a, b):
            return a._with(values=dispatch(op, (a._values, b._values), params))
        return NotImplemented
    if op.name == 'mul':
        self, other = (a, b) if isinstance(a, SparseTensor) else (b, a)
    elif op.name == 'div' and isinstance(a, SparseTensor):
        self, other = a, b
    elif op.name == 'pow' and isinstance(a, SparseTensor) and _positive_number(b) and a._coalesced() is not None:
        a = a._coalesced()
        return a._with(values=dispatch(op, (a._values, b), params))
    else:
        return NotImplemented
    if self._entries in other.shape.names:
        return NotImplemented
    shared = tuple(n for n in self._sparse_names if n in other.shape.names)
    if shared:  # the other operand's values at the stored entries
        other = gather(other, self._indices[{self._index_dim: _positions(self._sparse_names, shared)}])
    operands = (self._values, other) if self is a else (other, self._values)
    return self._with(values=dispatch(op, operands, params))


def _same_entries(a: SparseTensor, b: SparseTensor) -> bool:
    return a._indices.shape == b._indices.shape and a.available and b.available and \
        bool((a._indices == b._indices).all)


def _stack(tensors: Sequence[Tensor], dim: Shape):
    """Sparse tensors sharing their entries stacked: their values stacked along `dim`, the indices kept."""
    first = tensors[0]
    if not all(isinstance(t, SparseTensor) and t._dense_shape == first._dense_shape and
               (t._indices is first._indices or _same_entries(first, t)) for t in tensors):
        return NotImplemented
    return first._with(values=stack_tensors([t._values for t in tensors], dim))


def _concat(tensors: Sequence[Tensor], dim: str):
    """Sparse tensors joined along a value or batch dim of their values (sharing their entries: the values joined)
    or along a sparse dim (the entries of all listed together, shifted along `dim`, as 'coo')."""
    first = tensors[0]
    if not all(isinstance(t, SparseTensor) and t._entries == first._entries and t._index_dim == first._index_dim
               and set(t._sparse_names) == set(first._sparse_names) for t in tensors):
        return NotImplemented
    if dim not in first._dense_shape.names:
        if not all(t._dense_shape == first._dense_shape and dim in t._values.shape.names and
                   dim not in t._indices.shape.names and (t._indices is first._indices or _same_entries(first, t))
                   for t in tensors):
            return NotImplemented
        return first._with(values=concat_tensors([t._values for t in tensors], dim))
    if any(t._dense_shape.without(dim) != first._dense_shape.without(dim) or
           t._values.shape.without(t._entries) != first._values.shape.without(first._entries) or
           t._indices.shape.without(t._entries) != first._indices.shape.without(first._entries) for t in tensors):
        return NotImplemented
    names = first._sparse_names
    indices, offset = [], 0
    for t in tensors:
        own = t._indices[{t._index_dim: _positions(t._sparse_names, names)}]
        indices.append(own + stack({n: offset if n == dim else 0 for n in names}, channel(first._index_dim)))
        offset += t._dense_shape.get_size(dim)
    dense_shape = first._dense_shape.with_dim_size(dim, offset)
    return make_sparse(concat_tensors(indices, first._entries), concat_tensors([t._values for t in tensors],
                       first._entries), dense_shape, 'coo', all(t._unique for t in tensors))


def _positive_number(value: Tensor) -> bool:
    return type(value) is Dense and not value.shape and value.available and value.dtype.kind in (int, float) and \
        float(value) > 0


def _dot(tensors: Sequence[Tensor], params: tuple):
    """`dot` of a sparse tensor with a tensor of another kind: gather the other's values at the entries, multiply,
    and add them up into the dims left (a scatter-add)."""
    x, y = tensors
    x_dims, _result, y_dims = params
    if isinstance(x, SparseTensor) and not isinstance(y, SparseTensor):
        sparse, sparse_dims, other, other_dims = x, x_dims, y, y_dims
    elif isinstance(y, SparseTensor) and not isinstance(x, SparseTensor):
        sparse, sparse_dims, other, other_dims = y, y_dims, x, x_dims
    else:
        return NotImplemented
    names = sparse._sparse_names
    if not all(d in names for d in sparse_dims) or sparse._entries in other.shape.names or \
            any(n in other.shape.without(other_dims).names for n in sparse._dense_shape.names):
        return NotImplemented
    kept = tuple(n for n in names if n not in sparse_dims)
    on_host = _host_dot(sparse, sparse_dims, kept, other, other_dims)
    if on_host is not None:
        return on_host
    index = sparse._indices[{sparse._index_dim: _positions(names, sparse_dims)}]
    index = rename_tensor_dims(index, sparse._index_dim, channel(**{sparse._index_dim: tuple(other_dims)}))
    products = sparse._values * gather_in_range(other, index)
    if not kept:
        return REDUCTIONS['sum'](products, (sparse._entries,))
    base = merge_shapes(sparse._dense_shape.only(kept), products.shape.without(sparse._entries))
    return scatter(base, sparse._indices[{sparse._index_dim: _positions(names, kept)}], products, mode='add',
                   outside_handling='undefined')


def _host_dot(sparse: SparseTensor, sparse_dims: tuple, kept: tuple, other: Tensor, other_dims: tuple) -> Dense | None:
    """The product of NumPy tensors through SciPy's compiled CSR product: the sparse tensor's rows are its `kept`
    dims, its columns `sparse_dims`, the other's columns `other_dims` (paired in order) and the rest of its dims.
    None where the gather and scatter-add run instead: another backend, values not at hand, batch or value dims of
    the sparse tensor, nothing kept, or integer / boolean values (their sums keep lazyphi's integer rules).

    A 64x64 Laplace matrix times a grid: 48 us (12 us of them SciPy's) instead of 580 us for the gather and
    scatter-add.
    """
    if not kept or sparse.backend is not NUMPY or other.backend is not NUMPY or not other.available:
        return None
    dtype = promoted_dtype([sparse.dtype, other.dtype])
    if dtype.kind not in (float, complex):
        return None
    rows = sparse._dense_shape.only(kept)
    matrix = sparse.host_csr(rows.names, sparse_dims, dtype)
    if matrix is None:
        return None
    rest = other.shape.without(other_dims)
    columns = NUMPY.cast(other.native(other_dims + rest.names), dtype)
    product = matrix @ columns.reshape(matrix.shape[1], rest.volume)
    result = Dense(product.reshape(rows.sizes + rest.sizes), rows + rest, NUMPY)
    out = merge_shapes(rows, rest)
    return result if out.names == result.shape.names else Dense(result.native(out.names), out, NUMPY)


# --- conversions between the formats ----------------------------------------------------------------------------------


def to_format(x: Tensor, format: str) -> Tensor:
    """`x` (sparse or dense) stored in `format`.

    Args:
        x: a tensor.
        format: 'dense'; 'sparse' (`x` if sparse, else 'csr' on NumPy and torch, 'coo' on JAX and TensorFlow, as
            phiml chooses); 'coo'; 'csr' or 'compact-cols' (entries sorted by row: the non-dual sparse dims, then
            the dual ones); 'csc' or 'compact-rows' (sorted by column). The sorted formats list each coordinate
            once (repeated ones are added up) and their index components in that order.

    Raises:
        ValueError: an unknown format; a dense `x` with batch dims, or one whose values are not at hand (the
            number of entries depends on them); a sorted format of indices not at hand or with batch dims.
    """
    if format not in FORMATS:
        raise ValueError(f'to_format(): format must be one of {FORMATS}, got {format!r}')
    x = as_tensor(x)
    if format == 'dense':
        return dense(x)
    if format == 'sparse':
        if isinstance(x, SparseTensor):
            return x
        format = 'csr' if x.backend.name in ('numpy', 'torch') else 'coo'
    if not isinstance(x, SparseTensor):
        x = _from_dense(x)
    if x._format == format:
        return x
    if format == 'coo':
        return x._with(format='coo')
    return _sorted(x, format)


def _from_dense(x: Tensor) -> SparseTensor:
    """The non-zero values of `x` as coordinates, in row-major order of `x`'s dims (all of them sparse)."""
    if x.shape.batch:
        raise ValueError(f'to_format(): a dense tensor with batch dims {x.shape.batch} cannot be made sparse in '
                         f'lazyphi; unstack it first')
    if not x.available:
        raise ValueError(f'to_format(): making the dense tensor {x.shape} sparse reads its values (the number of '
                         f'entries depends on them), which are not at hand here (inside jit_compile or a trace)')
    indices = nonzero(x, instance('nonzero'), channel('index'), (), x.shape.names)
    return make_sparse(indices, gather(x, indices), x.shape, unique=True)


def _sorted(x: SparseTensor, format: str) -> SparseTensor:
    """`x` with each coordinate listed once, sorted by rows ('csr', 'compact-cols') or columns (reads indices)."""
    entries, index = x._entries, x._index_dim
    if not x._indices.available or x._indices.shape.without((entries, index)):
        raise ValueError(f"to_format(): the format {format!r} sorts the entries, which needs indices at hand and "
                         f"without batch dims; got {x._indices.shape}{'' if x._indices.available else ' (traced)'}")
    names = x._sparse_names
    rows = tuple(n for n in x._dense_shape.names if n not in x._dense_shape.dual.names)
    columns = x._dense_shape.dual.names
    order = columns + rows if _SORTED[format] else rows + columns
    indices = x._indices[{index: _positions(names, order)}]
    key = 0
    for name in order:
        key = key * x._dense_shape.get_size(name) + indices[{index: name}]
    if x.entry_count == 0:
        return make_sparse(indices, x._values, x._dense_shape, format)
    key, indices, values = sort((key, indices, x._values), entries, key=key)
    updates = instance('_sparse_updates')
    first = _first_of_runs(key, entries)
    count = int(first.sum)
    if count < x.entry_count:  # repeated coordinates: add their values up, keep one coordinate
        group = rename_tensor_dims(cumulative_sum(first, entries) - 1, entries, updates)
        base = x._values.shape.with_dim_size(entries, count)
        values = scatter(base, {entries: group}, rename_tensor_dims(values, entries, updates), mode='add')
        indices = boolean_mask(indices, entries, first)
    return make_sparse(indices, values, x._dense_shape, format)


def _first_of_runs(key: Tensor, dim: str) -> Tensor:
    """True where a sorted `key` differs from the value before (and at the start)."""
    size = key.shape.get_size(dim)
    previous = key[{dim: slice(0, size - 1)}]
    later = key[{dim: slice(1, size)}]
    return concat([wrap([True], instance(dim)), later != previous], dim)


def dense(x):
    """`x` (a tensor or tree of tensors) with every tensor holding all its values in one native array.

    Sparse tensors are materialised (also inside `jit_compile`); lazily expanded, stacked and joined tensors
    too; dense tensors, non-uniform tensors and tensors whose values are not at hand are returned as they are.
    """
    return dense_trees(tree_map(lambda t: t._dense() if isinstance(t, SparseTensor) else t, x))
