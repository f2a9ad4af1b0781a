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

import weakref
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from .. import math as _math  # the operations Tensor's methods build on; resolved when a method runs
from .._errors import DimNotFound
from ..backend import (
    NUMPY,
    Backend,
    DType,
    backend_by_name,
    choose_backend,
    get_precision,
    to_numpy_dtype,
)
from ._bound import BoundDim
from ._format import BROADCAST_FORMATTER, PrintOptions, format_tensor, parse_format_spec
from ._html import tensor_html
from ._items import is_index_tensor, normalize_dim_selection, selection_items
from ._natives import aligned_native, auto_cast, axes_layout, common_backend, relaid_native
from ._shape import DUAL, EMPTY_SHAPE, Shape, merge_shapes, resolve_dims

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


# What `==` and `!=` of tensors mean: None (element-wise), 'ref' (identity), or ('value', rel, abs, equal_nan)
# (same dims and values within tolerances); set by `equality_by_ref()` / `equality_by_shape_and_value()`.
EQUALITY_MODE: ContextVar = ContextVar('lazyphi_tensor_equality', default=None)


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

    @property
    def _names(self) -> tuple:
        """The dims whose values are held in memory; the values are the same all along the others (lazily expanded)."""
        return self.shape.names

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

        A list or tuple holding anything but dim names (a Shape, a dim type such as `batch`, a tuple of names,
        `...`, None) gives one axis per entry, its dims packed into it, as `reshaped_native` does: phiml's
        `t.native([batch, channel, *spatial(t)])` is an array of shape (batch volume, channel volume, x, y).
        """
        if isinstance(order, (list, tuple)) and not all(isinstance(o, str) for o in order):
            return _math.reshaped_native(self, order, force_expand)
        return self._dense()._native_in(order)

    def numpy(self, order=None, force_expand: bool = True):
        """The values as a read-only NumPy array with axes in `order`; a view wherever possible.

        Floating-point values stored with fewer bits than the current precision are raised to it
        (`precision(64)`: float64), as in phiml; values are never lowered (phiml would), so no bits are lost.
        `backend.numpy(t.native(order))` gives the values exactly as stored.
        """
        array = read_only_native(self.backend.numpy(self.native(order, force_expand)))
        if array.dtype.kind in 'fc':
            bits = get_precision() * (1 if array.dtype.kind == 'f' else 2)
            if array.dtype.itemsize * 8 < bits:
                array = read_only_native(array.astype(f'{array.dtype.kind}{bits // 8}'))
        return array

    @property
    def default_backend(self) -> Backend | None:
        """The backend of this tensor's values; `None` for tensors of Python objects (layouts)."""
        return self.backend

    @property
    def device(self):
        """The `ComputeDevice` the values are on (`None` for tensors of Python objects)."""
        dense = self._dense()
        return dense._backend.get_device(dense._native)

    @property
    def rank(self) -> int:
        """The number of dims."""
        return self.shape.rank

    def dimension(self, name) -> BoundDim:
        """The dim `name` (a str or a single-dim Shape) of this tensor, as `t.<name>` gives it."""
        return BoundDim(self, name.name if isinstance(name, Shape) else name)

    def item(self):
        """The single value of a tensor holding one value, as a Python number (or object)."""
        return self._single_value('item()').item()

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
        return self.backend.numpy(self.native(shape.names)).reshape(())

    def __len__(self) -> int:
        shape = self.shape
        if shape.rank != 1:
            raise TypeError(f'len() needs a tensor with exactly one dim, got {shape}. Use t.shape.get_size(dim).')
        return shape.sizes[0]

    def __iter__(self):
        """The values as Python numbers: a 0-d tensor gives its value, others all values in the shape's order.

        To iterate over the slices along one dim, use `t.dim` (`for row in t.y`) or `unstack(t, dim)`.
        """
        return iter(self.backend.numpy(self.native(self.shape.names)).reshape(-1).tolist())

    def __contains__(self, item) -> bool:
        """`'x' in t`: whether the tensor has the dim (a name or a Shape)."""
        if isinstance(item, Shape):
            return all(n in self.shape.names for n in item.names)
        if isinstance(item, str):
            return item in self.shape.names
        raise TypeError(f"'in' tests a tensor for a dim, given by name or Shape; got {type(item).__name__}")

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch's hook for its functions called with Tensors: `torch.nn.functional.interpolate` takes them, as in
        phiml (see `lazyphi.math._conversion.torch_function`)."""
        return _math._conversion.torch_function(func, args, kwargs or {})

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's binary ufuncs (`np.add(array, t)`, `array == t`, ...) as the tensor operators."""
        operator_name = _UFUNC_OPERATORS.get(ufunc.__name__)
        if method != '__call__' or kwargs or len(inputs) != 2 or operator_name is None:
            return NotImplemented
        first, second = inputs
        if first is self:
            return getattr(self, f'__{operator_name}__')(second)
        mirrored = _MIRRORED.get(operator_name)
        return getattr(self, f'__{mirrored}__' if mirrored else f'__r{operator_name}__')(first)

    # --- reductions over all dims, as properties (phiml) -----------------------------
    all = property(lambda self: _math.all_(self, self.shape), doc='Whether all values are true (a 0-d tensor).')
    any = property(lambda self: _math.any_(self, self.shape), doc='Whether any value is true (a 0-d tensor).')
    sum = property(lambda self: _math.sum_(self, self.shape), doc='The sum of all values.')
    mean = property(lambda self: _math.mean(self, self.shape), doc='The mean of all values.')
    std = property(lambda self: _math.std(self, self.shape), doc='The standard deviation of all values.')
    min = property(lambda self: _math.min_(self, self.shape), doc='The smallest value.')
    max = property(lambda self: _math.max_(self, self.shape), doc='The largest value.')
    finite_sum = property(lambda self: _math.finite_sum(self, self.shape), doc='The sum of the finite values.')
    finite_mean = property(lambda self: _math.finite_mean(self, self.shape), doc='The mean of the finite values.')
    finite_min = property(lambda self: _math.finite_min(self, self.shape), doc='The smallest finite value.')
    finite_max = property(lambda self: _math.finite_max(self, self.shape), doc='The largest finite value.')
    real = property(lambda self: _math.real(self), doc='The real part (the values themselves if not complex).')
    imag = property(lambda self: _math.imag(self), doc='The imaginary part (zeros if not complex).')

    def pack(self, dims, packed_dim) -> Tensor:
        """`pack_dims(self, dims, packed_dim)`."""
        return _math.pack_dims(self, dims, packed_dim)

    def unpack(self, dim, unpacked_dims) -> Tensor:
        """`unpack_dim(self, dim, unpacked_dims)`."""
        return _math.unpack_dim(self, dim, unpacked_dims)

    @property
    def Ti(self) -> Tensor:
        """This tensor with its instance dims and their duals swapped."""
        return self._transposed('instance')

    @property
    def Ts(self) -> Tensor:
        """This tensor with its spatial dims and their duals swapped."""
        return self._transposed('spatial')

    @property
    def Tc(self) -> Tensor:
        """This tensor with its channel dims and their duals swapped."""
        return self._transposed('channel')

    def _transposed(self, dim_type: str) -> Tensor:
        """Dims of `dim_type` become dual (`x` -> `~x`) and dual dims become `dim_type` (`~x` -> `x`)."""
        shape = self.shape
        old = tuple(n for n, t in zip(shape.names, shape.types, strict=True) if t in (dim_type, DUAL))
        if not old:
            return self
        part = shape[list(old)]
        new = Shape(part.sizes, tuple(n[1:] if t == DUAL else '~' + n for n, t in zip(part.names, part.types,
                                                                                    strict=True)),
                    tuple(dim_type if t == DUAL else DUAL for t in part.types), part.labels)
        return dispatch(RENAME_OP, (self,), (old, new))

    # --- dims and slicing ----------------------------------------------------------
    def __getattr__(self, name: str):
        """`t.x`: the dim `x` as a `BoundDim` (`t.x[0]`, `t.x.size`), also for a dim the tensor lacks, as in phiml."""
        if name.startswith('_'):
            raise AttributeError(name)
        return BoundDim(self, name)

    def __getitem__(self, item) -> Tensor:
        """Select along dims: `t[{'x': 0, 'y': slice(1, 3)}]`, labels `t['x,y']`, index tensors, bool masks.

        See `lazyphi.math._items.selection_items` for every accepted form. An int index tensor along a dim
        (`t[{'x': idx}]`) replaces the dim by the index tensor's dims; as `t[idx]` it is `gather(t, idx)`: its
        channel labels name the dims it indexes (`t[vec(y=1, x=2)]`), else it indexes the spatial (or instance)
        dims. A bool tensor keeps the entries where it is true, along its one non-batch dim (`boolean_mask`).
        """
        shape = self.shape
        items = item if type(item) is dict and all(type(d) is str for d in item) else selection_items(shape, item)
        selection = {}
        by_tensor = []
        names = shape.names
        for dim, sel in items.items():
            if type(dim) is str and dim not in names:  # other values sliced by the same dict may have it
                continue
            if is_index_tensor(sel):
                by_tensor.append((dim, sel))
            else:
                selection[dim] = normalize_dim_selection(shape, dim, sel)
        result = dispatch(GATHER_OP, (self,), (selection,)) if selection else self
        for dims, index in by_tensor:
            result = _math._gather_scatter.index_by_tensor(result, dims, index)
        return result

    def __setitem__(self, key, value):
        raise TypeError('Tensors are immutable; to change part of one, build a new tensor with where() or '
                        'scatter()')

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

    def __matmul__(self, other):
        """`self @ other`, the matrix product of named dims: see `lazyphi.math._vectors.matmul`."""
        return _math._vectors.matmul(self, other)

    def __eq__(self, other):  # element-wise, as for arrays (see `equality_by_ref` for other meanings)
        mode = EQUALITY_MODE.get()
        if mode is not None:
            return _equal_by_mode(self, other, mode, True)
        return _binary(self, other, EQUAL)

    def __ne__(self, other):
        mode = EQUALITY_MODE.get()
        if mode is not None:
            return _equal_by_mode(self, other, mode, False)
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

    def __lshift__(self, other):
        return _binary(self, other, SHIFT_LEFT)

    def __rlshift__(self, other):
        return _binary_r(self, other, SHIFT_LEFT)

    def __rshift__(self, other):
        return _binary(self, other, SHIFT_RIGHT)

    def __rrshift__(self, other):
        return _binary_r(self, other, SHIFT_RIGHT)

    def __invert__(self):
        return dispatch(INVERT, (self,))

    def __neg__(self):
        return dispatch(NEGATIVE, (self,))

    def __pos__(self):
        return self

    def __abs__(self):
        return dispatch(ABS, (self,))

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise TypeError('round(tensor, ndigits) is not supported; round(tensor) rounds to integers')
        return _math.round_(self)

    __hash__ = None  # == is element-wise, so tensors are not hashable

    # --- printing, pickling, tokenizing --------------------------------------------
    def __repr__(self) -> str:
        return format_tensor(self, PrintOptions())

    def __format__(self, format_spec: str) -> str:
        """`f'{t:.2f}'`, `f'{t:summary:no-color}'`: see `lazyphi.math._format` for the options."""
        formatter = BROADCAST_FORMATTER.get()
        if formatter is not None:
            return formatter.register(self, format_spec)
        return format_tensor(self, parse_format_spec(format_spec))

    def print(self, layout: str = 'full', float_format: str | None = None, threshold: int = 8,
              include_shape: bool | None = None, include_dtype: bool | None = None) -> None:
        """Print the values in the given layout ('full', 'row', 'numpy', 'summary' or 'auto')."""
        print(format_tensor(self, PrintOptions(layout, float_format, threshold, False, include_shape, include_dtype)))

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

    @property
    def available(self) -> bool:
        """False for the placeholders of a library's tracer (inside `jit_compile`)."""
        return self._backend.is_available(self._native)

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
        kept, perm, sources = axes_layout(shape.names, names)
        if len(kept) < shape.rank:
            dropped = [(n, s) for i, (n, s) in enumerate(zip(shape.names, shape.sizes, strict=True))
                       if i not in kept and s != 1]
            if dropped:
                raise DimNotFound(f'native(order={names}) must list every dim of {shape}; missing '
                                  f'{tuple(n for n, _ in dropped)}')
        return relaid_native(self, kept, perm, sources)

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


def as_tensor(value, like: Tensor | None = None) -> Tensor:
    """`value` as a Tensor if it is one or a number (or 0-d native); else a TypeError naming it.

    With `like`, a tensor next to which `value` is used, Python sequences, natives and Shapes are named after
    its dims as the other operand of an operator would be (`t + [1, 2]`).
    """
    if isinstance(value, Tensor):
        return value
    if isinstance(value, NUMBER_TYPES):
        return scalar(value)
    if like is not None:
        result = _math._creation.compatible_tensor(value, like)
        if result is not NotImplemented:
            return result
    backend = choose_backend(value)
    if backend.ndims(value) == 0:
        return Dense(value, EMPTY_SHAPE, backend)
    raise TypeError(f'Cannot combine a Tensor with a {type(value).__name__} of shape {backend.staticshape(value)} '
                    f'without dim names; wrap it first: tensor(value, spatial("x"), ...)')


# --- element-wise ----------------------------------------------------------------------

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
SHIFT_LEFT = elementwise_op('shift_bits_left')
SHIFT_RIGHT = elementwise_op('shift_bits_right')


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
    other = _operand(b, a, op)
    return NotImplemented if other is NotImplemented else dispatch(op, (a, other))


def _binary_r(a: Tensor, b, op: Op):
    if type(a) is Dense and _scalar_keeps_dtype(a, b, op):
        return Dense(getattr(a._backend, op.name)(b, a._native), a._shape, a._backend)
    other = _operand(b, a, op)
    return NotImplemented if other is NotImplemented else dispatch(op, (other, a))


def _operand(value, like: Tensor, op: Op):
    """The other operand of `like op value` as a tensor; NotImplemented if it cannot be one.

    A Python number that keeps `like`'s dtype becomes a scalar of that dtype, other numbers and 0-d natives
    0-d tensors; tuples, lists, natives with axes and Shapes are named after `like`'s dims (see
    `compatible_tensor`); anything else is NotImplemented, so that its own reflected operator may run.
    """
    if isinstance(value, Tensor):
        return value
    if _scalar_keeps_dtype(like, value, op):
        return Dense(np.asarray(value, dtype=to_numpy_dtype(like.dtype)), EMPTY_SHAPE, NUMPY)
    if isinstance(value, NUMBER_TYPES):
        return scalar(value)
    return _math._creation.compatible_tensor(value, like)


def _equal_by_mode(a: Tensor, b, mode, equal: bool) -> Tensor:
    if mode == 'ref':
        same = a is b
    elif not isinstance(b, Tensor) or set(a.shape.names) != set(b.shape.names):
        same = False
    else:
        _, rel, abs_, equal_nan = mode
        same = bool(_math.close(a, b, rel_tolerance=rel, abs_tolerance=abs_, equal_nan=equal_nan))
    return scalar(same == equal)


# NumPy's binary ufuncs that are tensor operators (`np.add(array, t)`, and `array + t` through it): ufunc name
# -> the operator's dunder name without underscores; comparisons swap sides by mirroring
_UFUNC_OPERATORS = {
    'add': 'add', 'subtract': 'sub', 'multiply': 'mul', 'divide': 'truediv', 'true_divide': 'truediv',
    'floor_divide': 'floordiv', 'remainder': 'mod', 'power': 'pow', 'equal': 'eq', 'not_equal': 'ne',
    'greater': 'gt', 'greater_equal': 'ge', 'less': 'lt', 'less_equal': 'le', 'left_shift': 'lshift',
    'right_shift': 'rshift', 'bitwise_and': 'and', 'bitwise_or': 'or', 'bitwise_xor': 'xor',
}
_MIRRORED = {'eq': 'eq', 'ne': 'ne', 'gt': 'lt', 'ge': 'le', 'lt': 'gt', 'le': 'ge'}


_INTEGRAL = (int, bool)
_COMPARISONS = (EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL)


def _scalar_keeps_dtype(a: Tensor, b, op: Op) -> bool:
    """Whether `a op b` with a Python number `b` (not a NumPy scalar: those have a dtype) has `a`'s dtype.

    It has for floats and complex `a`; for integer `a` only with an int `b` and not for true division;
    never for bool `a` (the libraries make ints of bools and ints), nor for strings and objects (layouts).
    """
    if type(b) not in (int, float):
        return False
    dtype = a.dtype
    kind = dtype.kind
    if kind is int and type(b) is int and op is not DIV:
        low, high = (0, 2 ** dtype.bits - 1) if dtype.unsigned else (-2 ** (dtype.bits - 1), 2 ** (dtype.bits - 1) - 1)
        if not low <= b <= high:
            if op in _COMPARISONS:  # compared as a wider integer: 300 is no uint8, so `t == 300` is false
                return False
            # NumPy raises so; torch, JAX and TensorFlow would wrap it around silently
            raise OverflowError(f'Python integer {b} is out of the range of {dtype} ({low} to {high}), the dtype of '
                                f'the tensor it is combined with; cast the tensor first (math.to_int64(t))')
        return True
    return kind in (int, float, complex) and not ((type(b) is float or op is DIV) and kind is int)


# --- selection -------------------------------------------------------------------------

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
    native = t._backend.multi_slice(t._native, tuple(index)) if any(s != slice(None) for s in index) else t._native
    for i, sel in lists:  # outer indexing: one gather per listed dim
        axis = i - sum(1 for j in range(i) if isinstance(index[j], int))
        native = t._backend.gather(native, np.asarray(sel, dtype=np.int64), axis)
    return Dense(native, shape.after_gather(selection), t._backend)


GATHER_OP = Op('gather', GATHER, _dense_gather)


def _dense_rename(tensors: Sequence[Dense], old: tuple, new: Shape) -> Dense:
    t = tensors[0]
    return Dense(t._native, t._shape.replace(old, new), t._backend)


RENAME_OP = Op('rename', RENAME, _dense_rename)


def dims_in(shape: Shape, dims) -> tuple:
    """Names of `dims` (any dim filter) that `shape` has, in `shape`'s order."""
    names = resolve_dims(dims, shape)
    return tuple(n for n in shape.names if n in names)
