"""Moving tensors between backends and kinds: `convert`, `dense`, `choose_backend`, `is_scalar`."""

from __future__ import annotations

from .._errors import NoBackendFound
from ..backend import NUMPY, OBJECTS, Backend, DType, as_backend, choose_backend
from ..backend import convert as convert_native
from ._tensor import ELEMENTWISE, NUMBER_TYPES, Dense, Op, Tensor, dispatch
from ._tree import leaves, tree_map


def _dense_convert(tensors, backend: Backend, use_dlpack: bool) -> Dense:
    t = tensors[0]
    native = t._native if t._backend is backend else convert_native(t._native, backend, use_dlpack=use_dlpack)
    return Dense(native, t._shape, backend)


CONVERT = Op('convert', ELEMENTWISE, _dense_convert)


def to_backend(value: Tensor, backend: Backend, use_dlpack: bool = True) -> Tensor:
    """`value` with its values on `backend` (any tensor kind; layouts convert their tensor leaves)."""
    if value.backend is backend:
        return value
    return dispatch(CONVERT, (value,), (backend, use_dlpack))


def convert(x, backend: Backend | str | None = None, use_dlpack: bool = True):
    """`x` (a tensor, native or tree of them) with its values on `backend` (a Backend, a name like 'torch' or the
    library's module; the default backend if None).

    Conversion shares memory through DLPack where the libraries allow it (and `use_dlpack`), else copies.
    """
    return _converted(x, as_backend(backend), use_dlpack)


def _converted(x, target: Backend, use_dlpack: bool):
    if isinstance(x, Tensor):
        return to_backend(x, target, use_dlpack)
    if isinstance(x, (tuple, list, dict)) or hasattr(type(x), '__dataclass_fields__'):
        return tree_map(lambda t: _converted(t, target, use_dlpack), x)
    if isinstance(x, NUMBER_TYPES) or x is None:
        return x
    return convert_native(x, target, use_dlpack=use_dlpack)


def choose_backend_t(*values) -> Backend:
    """The backend an operation on `values` (tensors, natives, numbers or trees of them) runs on.

    Tensors count by their backend; numbers and NumPy data join any other library (see `common_backend`) and
    alone give NumPy.
    """
    backends = []

    def collect(value):
        if isinstance(value, Tensor):
            backends.append(value.backend)
        elif isinstance(value, (tuple, list)):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif not isinstance(value, NUMBER_TYPES):
            backends.append(choose_backend(value))
    for value in values:
        collect(value)
    others = [b for b in dict.fromkeys(backends) if b is not NUMPY]
    if len(others) > 1:
        raise NoBackendFound(f'Values of several backends {[b.name for b in others]}; convert them to one first')
    if others:
        return others[0]
    return NUMPY


def is_scalar(value) -> bool:
    """Whether `value` is a single number: a Python or NumPy number, a 0-d native or a tensor without dims."""
    if isinstance(value, Tensor):
        return value.shape.rank == 0
    if isinstance(value, NUMBER_TYPES):
        return True
    try:
        return choose_backend(value).ndims(value) == 0 and not isinstance(value, (str, tuple, list, dict))
    except NoBackendFound:
        return False


def dtype(x) -> DType:
    """The data type of `x`: a Tensor, or a native tensor or number of any backend.

    Raises:
        NoBackendFound: `x` is neither.
    """
    return x.dtype if isinstance(x, Tensor) else choose_backend(x).dtype(x)


def is_numeric(x) -> bool:
    """Whether `x` holds numbers: a Python number (not a bool), or a native or Tensor of ints, floats or complex
    values."""
    if x is None or isinstance(x, (bool, str)):
        return False
    try:
        kind = dtype(x).kind
    except NoBackendFound:
        return False
    return kind in (int, float, complex)


def all_available(*values) -> bool:
    """Whether every tensor in `values` (trees of them) has its values now: False while a function is traced or
    compiled (its tensors are placeholders) and for kinds whose data is absent."""
    return all(t.available for t in leaves(values))


def dense(x):
    """`x` (a tensor or a tree of tensors) with every tensor holding its values in one native array.

    Lazily expanded, stacked and joined tensors are materialised; dense tensors, layouts, non-uniform
    tensors (which no single array can hold) and tensors whose values are not at hand (tracers, data still on
    disk, which loads when first used) are returned as they are.
    """
    def materialised(t: Tensor) -> Tensor:
        if type(t) is Dense or not t.shape.is_uniform or t.backend is OBJECTS or not t.available:
            return t
        return t._dense()
    return tree_map(materialised, x)
