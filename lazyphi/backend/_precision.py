"""Target floating-point precision: a global setting plus a per-context override.

The override lives in a `contextvars.ContextVar`, so `with precision(64):` in one
thread or asyncio task never leaks into another. Threads start from the global
setting (a new thread does not inherit the creating thread's context).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_VALID_BITS = (16, 32, 64)
_global_bits = 32
_context_bits: ContextVar[int | None] = ContextVar('lazyphi_precision', default=None)


def _check_bits(bits: int) -> int:
    if isinstance(bits, bool) or bits not in _VALID_BITS:
        raise ValueError(f"Floating-point precision must be one of {_VALID_BITS} bits but got {bits!r}")
    return int(bits)


def get_precision() -> int:
    """Returns the current target floating-point precision in bits: 16, 32 (the default) or 64.

    The innermost enclosing `with precision(bits):` wins; outside of one, the value set by
    `set_global_precision()` applies. Backend operations that create or convert floating-point
    values use this precision.
    """
    bits = _context_bits.get()
    return _global_bits if bits is None else bits


@contextmanager
def precision(floating_point_bits: int) -> Iterator[None]:
    """Sets the floating-point precision inside a `with` block, for the current thread or task only.

    Args:
        floating_point_bits: 16 for half, 32 for single, 64 for double precision.

    Raises:
        ValueError: if `floating_point_bits` is not 16, 32 or 64.
    """
    token = _context_bits.set(_check_bits(floating_point_bits))
    try:
        yield
    finally:
        _context_bits.reset(token)


def set_global_precision(floating_point_bits: int | None) -> None:
    """Sets the floating-point precision used wherever no `with precision(...)` block is active.

    Args:
        floating_point_bits: 16 for half, 32 for single, 64 for double precision. None, as in phiml: new
            floating-point values are 32-bit and operations keep the precision of their inputs, which is what
            lazyphi's operations do at every setting; so None sets 32, and `get_precision()` answers 32 (where
            phiml answers None).

    Raises:
        ValueError: if `floating_point_bits` is not 16, 32, 64 or None.
    """
    global _global_bits
    _global_bits = 32 if floating_point_bits is None else _check_bits(floating_point_bits)
