"""`Tensor`, its dense kind, and the one dispatch path every operation takes.

An operation is an `Op`: a name, a *category* that says how shapes flow through it
(element-wise, reduction, selection, ...) and a dense implementation working on
backend natives. `dispatch(op, tensors, params)` runs it. When every argument is
`Dense` the dense implementation runs directly. Otherwise each tensor kind present
is asked, most specialised first, through its `__handle__(op, tensors, params)`
class method; a kind returns `NotImplemented` to pass, and when all pass the
arguments are materialised with `_dense()` and the dense implementation runs.
A new kind (a tracer, a disk-backed tensor) therefore takes part in every
operation by implementing `_dense()` and, where it can do better, `__handle__`
per category, without touching any operation.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._errors import DimNotFound, IncompatibleShapes, LabelNotFound
from ..backend import (
    NUMPY,
    Backend,
    DType,
    backend_by_name,
    choose_backend,
    combine_types,
    convert,
    get_precision,
    to_numpy_dtype,
)
from ._bound import BoundDim
from ._html import tensor_html
from ._shape import EMPTY_SHAPE, Shape, merge_shapes, resolve_dims

ELEMENTWISE = 'elementwise'  # n-ary, broadcasting by name; params are non-tensor arguments
REDUCE = 'reduce'  # params: (dims,) — names present in the tensor
GATHER = 'gather'  # params: (selection,) — dict name -> int | slice | tuple of ints
RENAME = 'rename'  # params: (old names, new Shape of the same rank)
RESHAPE = 'reshape'  # params: (input dim order, result Shape of the same volume)
GATHER_TENSOR = 'gather_tensor'  # (tensor, integer index tensor); params: (dim,) — dim replaced by the index dims
STACK = 'stack'  # params: (dim,) — a rank-1 Shape with size and labels set
CONCAT = 'concat'  # params: (dim name, result Shape)
FFT = 'fft'  # params: (dims,); element-wise along every other dim
EXPAND = 'expand'  # params: (result Shape,) — the value seen constant along the dims it adds
# params: (dims, result, *rest) — combines values along `dims`, element-wise along every other dim;
# result(inputs, dims, *rest) is a module-level function giving the result's ShapeDtype without running the op
ALONG = 'along'

NUMBER_TYPES = (int, float, complex, bool, np.number, np.bool_)


class Op:
    """A registered operation: its name, how shapes flow through it, and its dense implementation.

    `any_kind`: the implementation accepts tensors of every kind as they are, so when no kind handles the
    operation its arguments are passed on without being materialised (lazy wrapping such as expanding).
    """

    __slots__ = ('any_kind', 'category', 'dense', 'name')

    def __init__(self, name: str, category: str, dense: Callable, any_kind: bool = False):
        self.name = name
        self.category = category
        self.dense = dense
        self.any_kind = any_kind

    def __repr__(self) -> str:
        return f'Op({self.name!r}, {self.category})'


def dispatch(op: Op, tensors: Sequence[Tensor], params: tuple = ()) -> Any:
    """Run `op` on `tensors`, letting non-dense tensor kinds take over (see the module docstring)."""
    kinds = None
    for t in tensors:
        if type(t) is not Dense:
            if kinds is None:
                kinds = []
            if type(t) not in kinds:
                kinds.append(type(t))
    if kinds is None:
        return op.dense(tensors, *params)
    kinds.sort(key=lambda k: -k._kind_priority)
    for kind in kinds:
        result = kind.__handle__(op, tensors, params)
        if result is not NotImplemented:
            return result
    return op.dense(tensors if op.any_kind else [t._dense() for t in tensors], *params)


class Tensor:
    """A backend-native array with named, typed dims. Immutable.

    Kinds of tensors subclass this: `Dense` holds one native whose axes are the
    shape's dims in order; other kinds (see `_kinds.py`) defer materialising.
    """

    __slots__ = ()
    _kind_priority = 0

    # --- the kind protocol ---------------------------------------------------------
    @property
    def shape(self) -> Shape:
        raise NotImplementedError(type(self).__name__)

    @property
    def dtype(self) -> DType:
        raise NotImplementedError(type(self).__name__)

    @property
    def backend(self) -> Backend:
        raise NotImplementedError(type(self).__name__)

    @property
    def available(self) -> bool:
        """Whether the values are in memory (False for tracers and data still on disk)."""
        return True

    def _memory_bytes(self) -> int:
        """Bytes the tensor holds in memory: its elements (see `element_bytes`); a kind holding less says so."""
        return element_bytes(self.shape, self.dtype)

    def _dense(self) -> Dense:
        raise NotImplementedError(type(self).__name__)

    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple) -> Any:
        return NotImplemented

    # --- access --------------------------------------------------------------------
    def native(self, order=None, force_expand: bool = True):
        """The backend native with axes in `order` (a dim filter; default: the shape's order).

        Dims in `order` that the tensor lacks become axes of size 1. Every dim of size > 1
        must appear in `order`. Lazily expanded dims are materialised only when
        `force_expand` is set; otherwise they stay size-1 axes.
        """
        return self._dense()._native_in(order)

    def numpy(self, order=None):
        """The values as a read-only NumPy array with axes in `order`; a view wherever possible."""
        native = self.native(order)
        return read_only_native(self.backend.numpy(native))

    def __float__(self) -> float:
        return float(self._single_value('float'))

    def __int__(self) -> int:
        return int(self._single_value('int'))

    def __complex__(self) -> complex:
        return complex(self._single_value('complex'))

    def __bool__(self) -> bool:
        return bool(self._single_value('bool'))

    def __index__(self) -> int:
        if self.dtype.kind not in (int, bool):
            raise TypeError(f'Only integer tensors can be used as an index, got dtype {self.dtype}')
        return int(self._single_value('int'))

    def _single_value(self, what: str):
        shape = self.shape
        if shape.volume != 1:
            raise ValueError(f'{what}() needs a tensor holding one value, but its shape is {shape}. '
                             f'Reduce it first (sum, mean, max, ...) or slice out a single element.')
        return self.numpy(shape.names).reshape(())

    def __len__(self) -> int:
        shape = self.shape
        if shape.rank != 1:
            raise TypeError(f'len() needs a tensor with exactly one dim, got {shape}. Use t.shape.get_size(dim).')
        return shape.sizes[0]

    def __iter__(self):
        shape = self.shape
        if shape.rank != 1:
            raise TypeError(f'Only tensors with exactly one dim can be iterated, got {shape}. '
                            f'Use unstack(t, dim) to iterate along one dim.')
        return iter(self.numpy().tolist())

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    # --- dims and slicing ----------------------------------------------------------
    def __getattr__(self, name: str):
        if name.startswith('_'):
            raise AttributeError(name)
        shape = self.shape
        if name in shape.names:
            return BoundDim(self, name)
        if '~' + name in shape.names:  # t.x on a dual dim ~x is not x
            raise AttributeError(f"Tensor has no dim '{name}' but has dual dim '~{name}'; use t['~{name}'] ...")
        raise AttributeError(f"'{type(self).__name__}' has no attribute or dim '{name}' (dims: {shape.names})")

    def __getitem__(self, item) -> Tensor:
        if isinstance(item, Tensor):
            return _boolean_mask(self, item)
        if isinstance(item, dict) and any(isinstance(v, Tensor) and v.shape.rank for v in item.values()):
            result = self
            for dim, index in item.items():
                result = gather_by_tensor(result, dim, index) if isinstance(index, Tensor) else result[{dim: index}]
            return result
        selection = normalize_selection(self.shape, item)
        if not selection:
            return self
        return dispatch(GATHER_OP, (self,), (selection,))

    # --- operators -----------------------------------------------------------------
    def __add__(self, other):
        return _binary(self, other, ADD)

    def __radd__(self, other):
        return _binary_r(self, other, ADD)

    def __sub__(self, other):
        return _binary(self, other, SUB)

    def __rsub__(self, other):
        return _binary_r(self, other, SUB)

    def __mul__(self, other):
        return _binary(self, other, MUL)

    def __rmul__(self, other):
        return _binary_r(self, other, MUL)

    def __truediv__(self, other):
        return _binary(self, other, DIV)

    def __rtruediv__(self, other):
        return _binary_r(self, other, DIV)

    def __floordiv__(self, other):
        return _binary(self, other, FLOORDIV)

    def __rfloordiv__(self, other):
        return _binary_r(self, other, FLOORDIV)

    def __mod__(self, other):
        return _binary(self, other, MOD)

    def __rmod__(self, other):
        return _binary_r(self, other, MOD)

    def __pow__(self, other):
        return _binary(self, other, POW)

    def __rpow__(self, other):
        return _binary_r(self, other, POW)

    def __eq__(self, other):  # element-wise, as for arrays
        return _binary(self, other, EQUAL)

    def __ne__(self, other):
        return _binary(self, other, NOT_EQUAL)

    def __lt__(self, other):
        return _binary_r(self, other, GREATER)

    def __le__(self, other):
        return _binary_r(self, other, GREATER_EQUAL)

    def __gt__(self, other):
        return _binary(self, other, GREATER)

    def __ge__(self, other):
        return _binary(self, other, GREATER_EQUAL)

    def __and__(self, other):
        return _binary(self, other, AND)

    def __rand__(self, other):
        return _binary_r(self, other, AND)

    def __or__(self, other):
        return _binary(self, other, OR)

    def __ror__(self, other):
        return _binary_r(self, other, OR)

    def __xor__(self, other):
        return _binary(self, other, XOR)

    def __rxor__(self, other):
        return _binary_r(self, other, XOR)

    def __invert__(self):
        return dispatch(INVERT, (self,))

    def __neg__(self):
        return dispatch(NEGATIVE, (self,))

    def __pos__(self):
        return self

    def __abs__(self):
        return dispatch(ABS, (self,))

    __hash__ = None  # == is element-wise, so tensors are not hashable

    # --- printing, pickling, tokenizing --------------------------------------------
    def __repr__(self) -> str:
        shape, dtype = self.shape, self.dtype
        if not self.available:
            return f'{type(self).__name__}{shape} {dtype}'
        values = self.numpy()
        if values.size <= 8:
            body = np.array2string(values.reshape(-1) if shape.rank <= 1 else values, separator=', ')
            return f'{shape} {dtype} {body}' if shape.rank else f'{values.reshape(()).item()!r}'
        finite = values[np.isfinite(values)] if values.dtype.kind in 'fc' else values
        if finite.size and values.dtype.kind in 'iuf':
            return f'{shape} {dtype} {finite.mean():.3g} ± {finite.std():.3g} ({finite.min():.3g}...{finite.max():.3g})'
        return f'{shape} {dtype}'

    def _repr_html_(self) -> str:
        return tensor_html(self)

    def __dask_tokenize__(self):
        """Shape, dtype and content: equal data gives equal Dask keys whatever its kind or backend."""
        dense = self._dense()
        return 'lazyphi.Tensor', dense._shape, str(dense.dtype), content_hash(dense._native, dense.backend)


def element_bytes(shape: Shape, dtype) -> int:
    """Bytes of `shape.volume` elements of `dtype` (a DType or a Python type); 8 per object or string element.

    A shape of unknown size has 0 bytes.
    """
    return (shape.volume or 0) * (DType.as_dtype(dtype).itemsize or 8)


_HASHES: dict[int, str] = {}  # id of a native -> its content hash, while the native lives


def content_hash(native, backend: Backend) -> str:
    """The content hash of a native of `backend` (`Backend.content_hash`), computed once per native while it lives.

    Tensors never change, so neither do their natives' hashes. (A NumPy array a tensor was made from is
    viewed, not copied: writing into that array afterwards is not seen.)
    """
    key = id(native)
    found = _HASHES.get(key)
    if found is None:
        found = backend.content_hash(native)
        try:
            weakref.finalize(native, _HASHES.pop, key, None)
        except TypeError:  # a native that cannot be referenced weakly is hashed each time
            return found
        _HASHES[key] = found
    return found


def read_only_native(array):
    if isinstance(array, np.ndarray) and array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


class Dense(Tensor):
    """A tensor holding one backend native whose axes are its shape's dims, in order."""

    __slots__ = ('_backend', '_native', '_shape')

    def __init__(self, native, shape: Shape, backend: Backend):
        self._native = native
        self._shape = shape
        self._backend = backend

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        return self._backend.dtype(self._native)

    @property
    def backend(self) -> Backend:
        return self._backend

    def _dense(self) -> Dense:
        return self

    def _single_value(self, what: str):
        if self._shape.volume != 1:
            return super()._single_value(what)  # raises, naming the shape
        return self._backend.numpy(self._native).reshape(())  # converted at once: no read-only view needed

    def _native_in(self, order):
        if order is None:
            return self._native
        shape = self._shape
        names = resolve_dims(order, shape)
        if names == shape.names:
            return self._native
        kept, perm, sources = _layout(shape.names, names)
        if len(kept) < shape.rank:
            dropped = [(n, s) for i, (n, s) in enumerate(zip(shape.names, shape.sizes, strict=True))
                       if i not in kept and s != 1]
            if dropped:
                raise DimNotFound(f'native(order={names}) must list every dim of {shape}; missing '
                                  f'{tuple(n for n, _ in dropped)}')
        return _relayout(self, kept, perm, sources)

    def __reduce__(self):
        return _rebuild_dense, (self._backend.for_pickling(self._native), self._shape, self._backend.name)


def _rebuild_dense(native, shape: Shape, backend_name: str) -> Dense:
    return Dense(native, shape, backend_by_name(backend_name))


# --- wrapping scalars ------------------------------------------------------------------

def scalar(value, backend: Backend = NUMPY) -> Dense:
    """A tensor without dims holding a Python number, in the current precision for floats."""
    if isinstance(value, float):
        native = np.array(value, dtype=np.float16 if get_precision() == 16 else
                          np.float32 if get_precision() == 32 else np.float64)
    elif isinstance(value, complex):
        native = np.array(value, dtype=np.complex64 if get_precision() <= 32 else np.complex128)
    else:
        native = np.asarray(value)
    return Dense(native, EMPTY_SHAPE, backend)


def as_tensor(value) -> Tensor:
    """`value` as a Tensor if it is one or a number (or 0-d native); else a TypeError naming it."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, NUMBER_TYPES):
        return scalar(value)
    backend = choose_backend(value)
    if backend.ndims(value) == 0:
        return Dense(value, EMPTY_SHAPE, backend)
    raise TypeError(f'Cannot combine a Tensor with a {type(value).__name__} of shape {backend.staticshape(value)} '
                    f'without dim names; wrap it first: tensor(value, spatial("x"), ...)')


# --- element-wise ----------------------------------------------------------------------

def aligned_native(t: Dense, out: Shape, backend: Backend | None = None):
    """`t`'s native, transposed and reshaped with size-1 axes so that it broadcasts against `out`.

    With `backend`, a native of another backend is converted to it (see `common_backend` for the rule).
    """
    shape = t._shape
    native = t._native if shape is out or shape.names == out.names else _relayout(t, *_layout(shape.names, out.names))
    if backend is not None and t._backend is not backend:
        native = convert(native, backend)
    return native


@functools.lru_cache(maxsize=4096)
def _layout(names: tuple, order: tuple) -> tuple:
    """How to lay out axes `names` as `order`: (axes kept, permutation or None, source axis per output axis).

    Axes not in `order` are dropped (they must have size 1); names of `order` missing from
    `names` become size-1 axes (source -1). Cached: layouts repeat across calls.
    """
    kept = tuple(i for i, n in enumerate(names) if n in order)
    kept_names = [names[i] for i in kept]
    perm = tuple(kept_names.index(n) for n in order if n in kept_names)
    sources = tuple(kept[kept_names.index(n)] if n in kept_names else -1 for n in order)
    return kept, (perm if perm != tuple(range(len(perm))) else None), (sources if -1 in sources else None)


def _relayout(t: Dense, kept: tuple, perm: tuple | None, sources: tuple | None):
    native = t._native
    backend = t._backend
    sizes = t._shape.sizes
    if len(kept) < len(sizes):
        native = backend.reshape(native, tuple(sizes[i] for i in kept))
    if perm is not None:
        native = backend.transpose(native, perm)
    if sources is not None:
        native = backend.reshape(native, tuple(1 if i < 0 else sizes[i] for i in sources))
    return native


def common_backend(tensors: Sequence[Dense]) -> Backend:
    backend = tensors[0]._backend
    for t in tensors[1:]:
        if t._backend is not backend:
            if backend is NUMPY:
                backend = t._backend
            elif t._backend is not NUMPY:
                raise TypeError(f'Cannot combine tensors of backends {backend.name} and {t._backend.name} in one '
                                f'operation; convert one first (convert(t, backend)).')
    return backend


def _dense_elementwise(fn_name: str, to_float: bool = False) -> Callable:
    """An element-wise operation on Dense tensors; `to_float`: ints and bools become floats of the precision first."""
    def run(tensors: Sequence[Dense], *params):
        out = tensors[0]._shape if len(tensors) == 1 else merge_shapes(*[t._shape for t in tensors])
        backend = common_backend(tensors)
        natives = [aligned_native(t, out, backend) for t in tensors]
        if to_float:
            natives = [backend.cast(n, backend.float_type) if backend.dtype(n).kind in (int, bool) else n
                       for n in natives]
        if len(natives) > 1:
            natives = auto_cast(backend, natives)
        return Dense(getattr(backend, fn_name)(*natives, *params), out, backend)
    return run


def auto_cast(backend: Backend, natives: list) -> list:
    """Cast natives of different dtypes to their common type (`promoted_dtype`), floats in the current precision."""
    dtype = backend.dtype
    first = dtype(natives[0])
    if all(dtype(n) == first for n in natives[1:]):
        return natives
    dtypes = [dtype(n) for n in natives]
    kinds = {d.kind for d in dtypes}
    if len(kinds) == 1 and first.kind in (int, bool):
        return natives  # the library's own integer promotion is exact (and what `promoted_dtype` says)
    target = promoted_dtype(dtypes)
    return [n if d == target else backend.cast(n, target) for n, d in zip(natives, dtypes, strict=True)]


def promoted_dtype(dtypes: Sequence[DType]) -> DType:
    """The dtype an operation combining values of `dtypes` gives: one dtype stays; mixed floats take the precision."""
    first = dtypes[0]
    if all(d == first for d in dtypes[1:]):
        return first
    if len({d.kind for d in dtypes}) == 1 and first.kind in (int, bool):
        return combine_types(*dtypes)
    return combine_types(*dtypes, fp_precision=get_precision())


def elementwise_op(name: str, fn_name: str | None = None) -> Op:
    return Op(name, ELEMENTWISE, _dense_elementwise(fn_name or name))


ADD = elementwise_op('add')
SUB = elementwise_op('sub')
MUL = elementwise_op('mul')
DIV = Op('div', ELEMENTWISE, _dense_elementwise('div', to_float=True))  # true division: ints give floats
FLOORDIV = elementwise_op('floordiv')
MOD = elementwise_op('mod')
POW = elementwise_op('pow')
EQUAL = elementwise_op('equal')
NOT_EQUAL = elementwise_op('not_equal')
GREATER = elementwise_op('greater_than')
GREATER_EQUAL = elementwise_op('greater_or_equal')
AND = elementwise_op('and_')
OR = elementwise_op('or_')
XOR = elementwise_op('xor')
INVERT = elementwise_op('invert')
NEGATIVE = Op('negative', ELEMENTWISE, lambda ts: Dense(-ts[0]._native, ts[0]._shape, ts[0]._backend))
ABS = elementwise_op('abs')

def _binary(a: Tensor, b, op: Op):
    """Operators on two dense tensors of one backend and dtype skip dispatch: the common case, kept cheap.

    Not where the library would choose the result's dtype: int with float, and true division of ints
    (floats of the current precision, the same on every backend). The operator ops are named after the
    backend functions that implement them. A Python number that keeps the tensor's dtype
    (`_scalar_keeps_dtype`) takes it on every path, so every kind (and the tracer) gives the dtype the
    fast path gives.
    """
    if type(a) is Dense:
        if type(b) is Dense:
            backend = a._backend
            dtype = backend.dtype(a._native)
            if b._backend is backend and dtype == backend.dtype(b._native) and (
                    op is not DIV or dtype.kind not in _INTEGRAL):
                if a._shape is b._shape or a._shape == b._shape:
                    return Dense(getattr(backend, op.name)(a._native, b._native), a._shape, backend)
                out = merge_shapes(a._shape, b._shape)
                return Dense(getattr(backend, op.name)(aligned_native(a, out), aligned_native(b, out)), out, backend)
        elif _scalar_keeps_dtype(a, b, op):
            return Dense(getattr(a._backend, op.name)(a._native, b), a._shape, a._backend)
    return dispatch(op, (a, _operand(b, a, op)))


def _binary_r(a: Tensor, b, op: Op):
    if type(a) is Dense and _scalar_keeps_dtype(a, b, op):
        return Dense(getattr(a._backend, op.name)(b, a._native), a._shape, a._backend)
    return dispatch(op, (_operand(b, a, op), a))


_INTEGRAL = (int, bool)


def _scalar_keeps_dtype(a: Tensor, b, op: Op) -> bool:
    """Whether `a op b` with a Python number `b` (not a NumPy scalar: those have a dtype) has `a`'s dtype.

    It has for floats and complex `a`; for integer `a` only with an int `b` and not for true division;
    never for bool `a` (the libraries make ints of bools and ints).
    """
    if type(b) not in (int, float):
        return False
    kind = a.dtype.kind
    return kind is not bool and not ((type(b) is float or op is DIV) and kind is int)


def _operand(b, a: Tensor, op: Op) -> Tensor:
    """`b` as the other operand of `a op b`: a Python number that keeps `a`'s dtype becomes a scalar of that dtype."""
    if _scalar_keeps_dtype(a, b, op):
        return Dense(np.asarray(b, dtype=to_numpy_dtype(a.dtype)), EMPTY_SHAPE, NUMPY)
    return as_tensor(b)


# --- selection -------------------------------------------------------------------------

def normalize_selection(shape: Shape, item) -> dict:
    """Turn any slicing expression into {dim: int | slice | tuple of ints}, resolving labels.

    Accepted: a dict {dim: selection}, a label string 'x' or 'y,x' (looked up among the dims'
    labels), or a tuple/list of those. Dims the tensor lacks are ignored (they may exist on
    other tensors sliced by the same dict).
    """
    if isinstance(item, dict):
        result = {}
        for dim, sel in item.items():
            if isinstance(dim, Shape):
                dim = dim.name
            if dim not in shape.names:
                continue
            result[dim] = _normalize_dim_selection(shape, dim, sel)
        return result
    if isinstance(item, str):
        return _selection_by_labels(shape, item)
    if isinstance(item, (tuple, list)) and all(isinstance(i, (str, dict)) for i in item):
        result = {}
        for i in item:
            result.update(normalize_selection(shape, i))
        return result
    raise TypeError(f'Cannot slice a tensor of shape {shape} with {item!r}. Accepted: a dict {{dim: index}}, '
                    f"t.dim[index], a label string like 'x' or 'y,x', or an index tensor.")


def _normalize_dim_selection(shape: Shape, dim: str, sel):
    size = shape.get_size(dim)
    if isinstance(sel, bool):
        raise TypeError(f'Cannot index dim {dim!r} with the bool {sel}; use an int, slice, label or index tensor.')
    if isinstance(sel, (int, np.integer)):
        if isinstance(size, int) and not -size <= sel < size:
            raise IndexError(f'Index {sel} is out of range for dim {dim!r} of size {size}')
        return int(sel) % size if isinstance(size, int) else int(sel)
    if isinstance(sel, slice):
        if isinstance(sel.start, str) or isinstance(sel.stop, str):
            sel = slice(_label_index(shape, dim, sel.start) if isinstance(sel.start, str) else sel.start,
                        _label_index(shape, dim, sel.stop) + 1 if isinstance(sel.stop, str) else sel.stop, sel.step)
        return sel
    if isinstance(sel, str):
        names = [s.strip() for s in sel.split(',') if s.strip()]
        if ',' in sel:
            return tuple(_label_index(shape, dim, n) for n in names)
        return _label_index(shape, dim, names[0])
    if isinstance(sel, (tuple, list)):
        return tuple(_label_index(shape, dim, s) if isinstance(s, str) else _normalize_dim_selection(shape, dim, s)
                     for s in sel)
    if isinstance(sel, Tensor) and sel.shape.rank == 0:
        return _normalize_dim_selection(shape, dim, int(sel))
    raise TypeError(f'Cannot select {sel!r} along dim {dim!r}; accepted: int, slice, label str, '
                    f'a list of ints or labels, or an index tensor.')


def _label_index(shape: Shape, dim: str, label: str) -> int:
    labels = shape.get_item_names(dim)
    if labels is None or label not in labels:
        raise LabelNotFound(f'Label {label!r} not found along dim {dim!r}; its labels are {labels}')
    return labels.index(label)


def _selection_by_labels(shape: Shape, item: str) -> dict:
    names = tuple(s.strip() for s in item.split(',') if s.strip())
    for dim, labels in zip(shape.names, shape.labels, strict=True):
        if labels is not None and all(n in labels for n in names):
            if len(names) == 1 and ',' not in item:
                return {dim: labels.index(names[0])}
            return {dim: tuple(labels.index(n) for n in names)}
    missing = ', '.join(repr(n) for n in names)
    raise LabelNotFound(f'Label {missing} not found: no dim of {shape} has the labels {names}. '
                   f'Select by index with a dict instead: t[{{"dim": 0}}]')


def _dense_gather(tensors: Sequence[Dense], selection: dict) -> Dense:
    t = tensors[0]
    shape = t._shape
    index = []
    lists = []
    for i, name in enumerate(shape.names):
        sel = selection.get(name, slice(None))
        if isinstance(sel, tuple):
            lists.append((i, sel))
            sel = slice(None)
        index.append(sel)
    native = t._native[tuple(index)] if any(s != slice(None) for s in index) else t._native
    for i, sel in lists:  # outer indexing: one gather per listed dim
        axis = i - sum(1 for j in range(i) if isinstance(index[j], int))
        native = t._backend.gather(native, np.asarray(sel, dtype=np.int64), axis)
    return Dense(native, shape.after_gather(selection), t._backend)


GATHER_OP = Op('gather', GATHER, _dense_gather)


def _boolean_mask(t: Tensor, mask: Tensor) -> Tensor:
    if mask.dtype.kind is not bool or mask.shape.rank != 1 or mask.shape.names[0] not in t.shape.names:
        raise ValueError(f'A tensor used as an index must be a bool mask with one dim that the sliced tensor has; '
                         f'got {mask.shape} {mask.dtype} for a tensor of shape {t.shape}. '
                         f'For integer indices use t[{{dim: index_tensor}}].')
    dim = mask.shape.names[0]
    positions = np.flatnonzero(mask.numpy())
    return t[{dim: tuple(int(i) for i in positions)}]


def _dense_gather_by_tensor(tensors: Sequence[Dense], dim: str) -> Dense:
    t, index = tensors
    backend = common_backend(tensors)
    out = merge_shapes(t._shape.without(dim), index._shape)
    size = t._shape.get_size(dim)
    # row r of the broadcast values holds the entries along `dim` for output element r
    values = backend.broadcast_to(aligned_native(t, _append_dim(out, t._shape[dim]), backend), (*out.sizes, size))
    indices = backend.reshape(backend.broadcast_to(aligned_native(index, out, backend), out.sizes), (-1,))
    flat = backend.range(0, out.volume * size, size, backend.dtype(indices)) + indices
    native = backend.gather(backend.reshape(values, (-1,)), flat, 0)
    return Dense(backend.reshape(native, out.sizes), out, backend)


def _append_dim(shape: Shape, dim: Shape) -> Shape:
    return Shape(shape.sizes + dim.sizes, shape.names + dim.names, shape.types + dim.types, shape.labels + dim.labels)


GATHER_BY_TENSOR = Op('gather_by_tensor', GATHER_TENSOR, _dense_gather_by_tensor)


def gather_by_tensor(t: Tensor, dim, index: Tensor) -> Tensor:
    """The entries of `t` along `dim` at the integers `index`: `dim` is replaced by the dims of `index`."""
    if isinstance(dim, Shape):
        dim = dim.name
    if dim not in t.shape.names:
        raise DimNotFound(f'Cannot index dim {dim!r}: the tensor has shape {t.shape}')
    if index.dtype.kind not in (int, bool) or index.dtype.kind is bool:
        raise TypeError(f'Index tensors for dim {dim!r} must hold integers, got {index.dtype}')
    if dim in index.shape.names:
        raise IncompatibleShapes(f'The index tensor {index.shape} must not have the indexed dim {dim!r} itself')
    return dispatch(GATHER_BY_TENSOR, (t, index), (dim,))


def _dense_rename(tensors: Sequence[Dense], old: tuple, new: Shape) -> Dense:
    t = tensors[0]
    return Dense(t._native, t._shape.replace(old, new), t._backend)


RENAME_OP = Op('rename', RENAME, _dense_rename)


def dims_in(shape: Shape, dims) -> tuple:
    """Names of `dims` (any dim filter) that `shape` has, in `shape`'s order."""
    names = resolve_dims(dims, shape)
    return tuple(n for n in shape.names if n in names)
