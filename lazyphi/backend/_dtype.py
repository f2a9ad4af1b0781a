"""Backend-independent data types and the promotion rule between them."""

from dataclasses import dataclass, field

import numpy as np

from .._errors import UnsupportedDType
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
# (exponent bits, mantissa bits, finite only, unsigned zero) of the types the backends hold, by (kind, bits, unsigned)
_IEEE = {16: (5, 10), 32: (8, 23), 64: (11, 52)}
_LAYOUTS: dict[tuple, tuple] = {
    (bool, 8, True): (0, 1, True, True),
    (object, 64, True): (0, 64, False, False),
    (str, None, False): (0, 0, True, True),
    **{(int, bits, unsigned): (0, bits, True, True) for bits in (8, 16, 32, 64) for unsigned in (False, True)},
    **{(float, bits, False): (*_IEEE[bits], False, False) for bits in (16, 32, 64)},
    **{(complex, bits, False): (*_IEEE[bits // 2], False, False) for bits in (64, 128)},
}
_UNSIGNED_KINDS = (bool, object)  # their values have no sign: unsigned by default, as in the reference


@dataclass(frozen=True, slots=True, init=False)
class DType:
    """The kind and size of the elements of a tensor, independent of any backend.

    Examples: `DType(float, 32)`, `DType(int, 64)`, `DType(int, 8, unsigned=True)`, `DType(bool)`,
    `DType(complex, precision=32)` (complex64). A floating-point format no backend offers can be described by
    its bit layout, `DType(float, 8, False, 4, 3, True, False)` (float8_e4m3fn); operations refuse it with
    `UnsupportedDType`.

    Args:
        kind: One of the Python types `bool`, `int`, `float`, `complex`, `object`, `str`.
        bits: Size of one element in bits. Defaults to 8 for `bool`, 64 for `object`, 32 for `int`,
            the current precision for `float` and twice that for `complex`. Strings have no fixed size (`None`).
        unsigned: Whether the type lacks negative values: `int` types may be unsigned; `bool` and `object` are.
        exponent_bits: Bits of the exponent of a floating-point number (for complex types, of one part). The
            four layout fields are given all together or not at all; by default they describe the standard
            type (IEEE 754 for `float` and `complex`; integers have `mantissa_bits == bits`).
        mantissa_bits: Bits of the mantissa.
        finite_only: Whether the format has no infinities or NaN.
        unsigned_zero: Whether zero has no sign.
        precision: Instead of `bits`, for `float` and `complex` only: the bits of one floating-point
            component (complex types have at least 32 bits per component).
    """

    kind: type
    bits: int | None
    unsigned: bool
    # the bit layout is not passed on by dataclasses.replace: replace(d, bits=64) takes the layout of the new size
    exponent_bits: int = field(init=False)
    mantissa_bits: int = field(init=False)
    finite_only: bool = field(init=False)
    unsigned_zero: bool = field(init=False)
    _numpy: np.dtype | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __init__(self, kind: type, bits: int | None = None, unsigned: bool | None = None,
                 exponent_bits: int | None = None, mantissa_bits: int | None = None, finite_only: bool | None = None,
                 unsigned_zero: bool | None = None, *, precision: int | None = None):
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
        unsigned = kind in _UNSIGNED_KINDS if unsigned is None else unsigned
        layout = (exponent_bits, mantissa_bits, finite_only, unsigned_zero)
        if all(v is None for v in layout):
            layout = _standard_layout(kind, bits, unsigned)
        else:
            _check_layout(kind, bits, unsigned, layout)
        for name, value in zip(('kind', 'bits', 'unsigned', 'exponent_bits', 'mantissa_bits', 'finite_only',
                                'unsigned_zero', '_numpy'), (kind, bits, unsigned, *layout, None), strict=True):
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        if self.kind in (bool, object, str):
            return _KIND_NAMES[self.kind]
        name = f"{'u' if self.unsigned else ''}{_KIND_NAMES[self.kind]}{self.bits}"
        if self.is_standard:
            return name
        return (f"{name}_e{self.exponent_bits}m{self.mantissa_bits}{'fn' if self.finite_only else ''}"
                f"{'uz' if self.unsigned_zero else ''}")

    @property
    def is_standard(self) -> bool:
        """Whether the backends hold this type: the standard bit layout of a size they offer."""
        return _LAYOUTS.get((self.kind, self.bits, self.unsigned)) == (
            self.exponent_bits, self.mantissa_bits, self.finite_only, self.unsigned_zero)

    @property
    def itemsize(self) -> int | float | None:
        """Bytes per element (a fraction for sizes that are no multiple of 8 bits), `None` for strings."""
        if self.bits is None:
            return None
        return self.bits // 8 if self.bits % 8 == 0 else self.bits / 8

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
        """Converts a `DType`, a Python type, a `(kind, bits)` tuple (or one of more of `DType`'s arguments), a NumPy
        dtype or type, a PyTorch, JAX or TensorFlow dtype, or a name like `'float32'` to a `DType`; `None` stays `None`.

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
        if isinstance(value, tuple) and 2 <= len(value) <= 7 and value[0] in _VALID_BITS:
            return DType(*value)
        if isinstance(value, np.dtype | str) or (isinstance(value, type) and issubclass(value, np.generic)):
            try:
                np_dtype = np.dtype(value)
            except TypeError as err:
                raise ValueError(f"Not a data type name: {value!r}. Use names like 'float32' or 'int64'.") from err
            return from_numpy_dtype(np_dtype)
        np_dtype = _numpy_dtype_of_foreign(value)
        if np_dtype is not None:
            return from_numpy_dtype(np_dtype)
        raise TypeError(f"Cannot interpret {value!r} as a DType. Pass a DType, a Python type such as float, "
                        f"a NumPy, PyTorch, JAX or TensorFlow dtype or a name like 'float32'.")


def _numpy_dtype_of_foreign(value) -> np.dtype | None:
    """The NumPy dtype another array library's dtype stands for, found without importing that library; else None.

    Raises:
        ValueError: a dtype of such a library without a NumPy equivalent (PyTorch's bfloat16, say).
    """
    as_numpy = getattr(value, 'as_numpy_dtype', None)  # TensorFlow's DType
    if as_numpy is not None:
        return np.dtype(as_numpy)
    inner = getattr(value, 'dtype', None)  # JAX's scalar types (jnp.float32) carry their NumPy dtype
    if isinstance(inner, np.dtype):
        return inner
    if type(value).__module__ == 'torch':  # a torch.dtype prints as 'torch.<its NumPy name>'
        name = str(value).removeprefix('torch.')
        try:
            return np.dtype(name)
        except TypeError as err:
            raise ValueError(f"{value} has no DType equivalent; use a dtype such as torch.float32") from err
    return None


def _standard_layout(kind: type, bits: int | None, unsigned: bool) -> tuple:
    """The bit layout of the standard type of `kind`, `bits` and sign; a ValueError naming what is accepted if
    there is none."""
    layout = _LAYOUTS.get((kind, bits, unsigned))
    if layout is not None:
        return layout
    name = _KIND_NAMES[kind]
    if bits not in _VALID_BITS[kind]:
        raise ValueError(f"{name} DTypes support bits {_VALID_BITS[kind]}, not {bits!r}")
    if kind in _UNSIGNED_KINDS:
        raise ValueError(f"{name} DTypes are unsigned, got unsigned={unsigned!r}")
    raise ValueError(f"Only int DTypes can be unsigned, not {name}")


def _check_layout(kind: type, bits, unsigned: bool, layout: tuple) -> None:
    """Checks an explicitly given bit layout (exponent bits, mantissa bits, finite only, unsigned zero)."""
    exponent_bits, mantissa_bits, finite_only, unsigned_zero = layout
    given = f"DType({_KIND_NAMES[kind]}, {bits!r}, {unsigned!r}, {', '.join(map(repr, layout))})"
    if any(v is None for v in layout):
        raise TypeError(f"{given}: give all of exponent_bits, mantissa_bits, finite_only and unsigned_zero, or none")
    if kind not in (float, complex):
        if layout != _standard_layout(kind, bits, unsigned):
            raise ValueError(f"{given}: only float and complex DTypes take a bit layout of their own; "
                             f"{_KIND_NAMES[kind]} has {_standard_layout(kind, bits, unsigned)}")
        return
    if isinstance(bits, bool) or not isinstance(bits, int) or bits <= 0:
        raise ValueError(f"{given}: bits must be a positive int")
    for name, value in (('exponent_bits', exponent_bits), ('mantissa_bits', mantissa_bits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{given}: {name} must be an int >= 0, got {value!r}")
    for name, value in (('unsigned', unsigned), ('finite_only', finite_only), ('unsigned_zero', unsigned_zero)):
        if not isinstance(value, bool):
            raise TypeError(f"{given}: {name} must be a bool, got {value!r}")



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
            result = DType(kind, normalized.itemsize * 8, unsigned=True if normalized.kind == 'u' else None)
        _FROM_NUMPY[np_dtype] = result
    return result


_TO_NUMPY: dict[tuple, np.dtype] = {}


def to_numpy_dtype(dtype: DType) -> np.dtype:
    """Returns the NumPy dtype equivalent to `dtype`. The result is stored on `dtype`, so repeated calls are cheap.

    Raises:
        UnsupportedDType: for a bit layout NumPy has no type for (see `DType.is_standard`).
    """
    np_dtype = dtype._numpy
    if np_dtype is None:
        if not dtype.is_standard:
            raise UnsupportedDType(f"No backend has a data type {dtype!r}: they hold bool, int8-64, uint8-64, "
                                   f"float16-64, complex64-128, str and object with their standard bit layouts")
        key = (dtype.kind, dtype.bits, dtype.unsigned)
        np_dtype = _TO_NUMPY.get(key)
        if np_dtype is None:
            if dtype.kind is bool:
                np_dtype = np.dtype(np.bool_)
            elif dtype.kind is object:
                np_dtype = np.dtype(object)
            elif dtype.kind is str:
                np_dtype = np.dtype(str)
            else:
                np_dtype = np.dtype(f"{'u' if dtype.unsigned else ''}{_KIND_NAMES[dtype.kind]}{dtype.bits}")
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
        signed_bits = [d.bits for d in dtypes if d.kind is int and not d.unsigned]
        unsigned_bits = [d.bits for d in dtypes if d.kind is int and d.unsigned]
        if not signed_bits:
            return DType(int, max(unsigned_bits), unsigned=True)
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
