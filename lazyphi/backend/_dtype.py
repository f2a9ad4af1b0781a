"""Backend-independent data types and the promotion rule between them."""

from dataclasses import dataclass, field

import numpy as np

from ._precision import get_precision

_VALID_BITS: dict[type, tuple] = {
    bool: (8,),
    int: (8, 16, 32, 64),
    float: (16, 32, 64),
    complex: (64, 128),
    object: (64,),
    str: (None,),
}
_KIND_NAMES = {bool: 'bool', int: 'int', float: 'float', complex: 'complex', object: 'object', str: 'str'}
_NUMPY_KINDS = {'b': bool, 'i': int, 'u': int, 'f': float, 'c': complex, 'O': object, 'U': str, 'S': str, 'T': str}


@dataclass(frozen=True, slots=True, init=False)
class DType:
    """The kind and size of the elements of a tensor, independent of any backend.

    Examples: `DType(float, 32)`, `DType(int, 64)`, `DType(int, 8, signed=False)`, `DType(bool)`,
    `DType(complex, precision=32)` (complex64).

    Args:
        kind: One of the Python types `bool`, `int`, `float`, `complex`, `object`, `str`.
        bits: Size of one element in bits. Defaults to 8 for `bool`, 64 for `object`, 32 for `int`,
            the current precision for `float` and twice that for `complex`. Strings have no fixed size (`None`).
        signed: Only for `int`: whether negative values can be represented.
        precision: Instead of `bits`, for `float` and `complex` only: the bits of one floating-point
            component (complex types have at least 32 bits per component).
    """

    kind: type
    bits: int | None
    signed: bool
    _numpy: np.dtype | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __init__(self, kind: type, bits: int | None = None, signed: bool = True, *, precision: int | None = None):
        if kind not in _VALID_BITS:
            raise ValueError(f"DType kind must be one of {list(_KIND_NAMES.values())} but got {kind!r}")
        if precision is not None:
            if kind not in (float, complex):
                raise ValueError(f"precision applies to float and complex DTypes only, not {_KIND_NAMES[kind]}; "
                                 f"give bits instead, e.g. DType({_KIND_NAMES[kind]}, 32)")
            if bits is not None:
                raise ValueError(f"Give bits or precision, not both (got bits={bits}, precision={precision})")
            bits = precision if kind is float else max(64, 2 * precision)
        if bits is None:
            default = {bool: 8, object: 64, int: 32, float: get_precision(), complex: max(64, 2 * get_precision())}
            bits = default.get(kind)
        if bits not in _VALID_BITS[kind]:
            raise ValueError(f"{_KIND_NAMES[kind]} DTypes support bits {_VALID_BITS[kind]}, not {bits!r}")
        if not signed and kind is not int:
            raise ValueError(f"Only int DTypes can be unsigned, not {_KIND_NAMES[kind]}")
        object.__setattr__(self, 'kind', kind)
        object.__setattr__(self, 'bits', bits)
        object.__setattr__(self, 'signed', signed)
        object.__setattr__(self, '_numpy', None)

    def __repr__(self) -> str:
        if self.kind in (bool, object, str):
            return _KIND_NAMES[self.kind]
        return f"{'' if self.signed else 'u'}{_KIND_NAMES[self.kind]}{self.bits}"

    @property
    def itemsize(self) -> int | None:
        """Bytes per element, `None` for strings."""
        return None if self.bits is None else self.bits // 8

    @property
    def precision(self) -> int | None:
        """Bits of one floating-point component: `bits` for `float`, `bits // 2` for `complex`, else `None`."""
        if self.kind is float:
            return self.bits
        if self.kind is complex:
            return self.bits // 2
        return None

    @staticmethod
    def as_dtype(value: 'DType | type | tuple | np.dtype | str | None') -> 'DType | None':
        """Converts a `DType`, a Python type, a `(kind, bits)` tuple, a NumPy dtype or type, or a name like
        `'float32'` to a `DType`; `None` stays `None`.

        The Python types `float` and `complex` resolve to the current precision (see `get_precision()`),
        `int` to 32 bits.

        Raises:
            TypeError: for values that do not describe a data type.
            ValueError: for names or NumPy dtypes that have no `DType` equivalent, and for the type `str`,
                which names no size (`DType(str)` is the type of strings of any length).
        """
        if isinstance(value, DType) or value is None:
            return value
        if value is str:
            raise ValueError("DType.as_dtype(str) is ambiguous: str names no size. Use DType(str) for strings of "
                             "any length, or a NumPy name such as 'U8'")
        if isinstance(value, type) and value in _VALID_BITS:
            return DType(value)
        if isinstance(value, tuple) and len(value) == 2 and value[0] in _VALID_BITS:
            return DType(*value)
        if isinstance(value, np.dtype | str) or (isinstance(value, type) and issubclass(value, np.generic)):
            try:
                np_dtype = np.dtype(value)
            except TypeError as err:
                raise ValueError(f"Not a data type name: {value!r}. Use names like 'float32' or 'int64'.") from err
            return from_numpy_dtype(np_dtype)
        raise TypeError(f"Cannot interpret {value!r} as a DType. Pass a DType, a Python type such as float, "
                        f"a NumPy dtype or a name like 'float32'.")


_FROM_NUMPY: dict[np.dtype, DType] = {}


def from_numpy_dtype(np_dtype: np.dtype | type) -> DType:
    """Returns the `DType` equivalent to a NumPy dtype (or scalar type such as `np.float32`)."""
    result = _FROM_NUMPY.get(np_dtype)
    if result is None:
        normalized = np.dtype(np_dtype)
        kind = _NUMPY_KINDS.get(normalized.kind)
        if kind is None:
            raise ValueError(f"NumPy dtype {normalized} has no lazyphi equivalent")
        if kind is str or kind is object:
            result = DType(kind)
        else:
            result = DType(kind, normalized.itemsize * 8, signed=normalized.kind != 'u')
        _FROM_NUMPY[np_dtype] = result
    return result


_TO_NUMPY: dict[tuple, np.dtype] = {}


def to_numpy_dtype(dtype: DType) -> np.dtype:
    """Returns the NumPy dtype equivalent to `dtype`. The result is stored on `dtype`, so repeated calls are cheap."""
    np_dtype = dtype._numpy
    if np_dtype is None:
        key = (dtype.kind, dtype.bits, dtype.signed)
        np_dtype = _TO_NUMPY.get(key)
        if np_dtype is None:
            if dtype.kind is bool:
                np_dtype = np.dtype(np.bool_)
            elif dtype.kind is object:
                np_dtype = np.dtype(object)
            elif dtype.kind is str:
                np_dtype = np.dtype(str)
            else:
                np_dtype = np.dtype(f"{'' if dtype.signed else 'u'}{_KIND_NAMES[dtype.kind]}{dtype.bits}")
            _TO_NUMPY[key] = np_dtype
        object.__setattr__(dtype, '_numpy', np_dtype)
    return np_dtype


def combine_types(*dtypes: DType, fp_precision: int | None = None) -> DType:
    """Returns the data type that an operation on values of all `dtypes` produces.

    Kinds rank bool < int < float < complex; the result has the highest kind present and the largest
    size among the inputs of that kind. With `fp_precision`, floating-point results use that many bits
    (complex results twice as many). Strings mixed with anything else, and objects, give `object`.
    """
    if not dtypes:
        raise ValueError("combine_types() needs at least one DType")
    kinds = {d.kind for d in dtypes}
    if object in kinds or (str in kinds and len(kinds) > 1):
        return DType(object)
    if str in kinds:
        return DType(str)
    if complex in kinds:
        if fp_precision is not None:
            return DType(complex, max(64, 2 * fp_precision))
        widest = max(d.bits if d.kind is complex else 2 * d.bits for d in dtypes if d.kind in (float, complex))
        return DType(complex, max(64, widest))
    if float in kinds:
        return DType(float, fp_precision or max(d.bits for d in dtypes if d.kind is float))
    if int in kinds:
        signed_bits = [d.bits for d in dtypes if d.kind is int and d.signed]
        unsigned_bits = [d.bits for d in dtypes if d.kind is int and not d.signed]
        if not signed_bits:
            return DType(int, max(unsigned_bits), signed=False)
        # a signed type can only hold all unsigned values if it is twice as wide
        return DType(int, max(signed_bits + [min(64, 2 * b) for b in unsigned_bits]))
    return DType(bool)


def inexact_type(*dtypes: DType) -> DType:
    """The type a floating-point computation on values of `dtypes` runs in, such as a linear solve.

    The combined type of the floating-point and complex ones (`combine_types`); where all are integers or
    booleans, the float type of the current precision.
    """
    combined = combine_types(*dtypes)
    return DType(float, get_precision()) if combined.kind in (bool, int) else combined
