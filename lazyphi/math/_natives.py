"""Backend natives laid out for an operation: transposed, with size-1 axes, on one backend, in one dtype.

These helpers read a dense tensor's `_native`, `_shape` and `_backend` and make no tensors, so they sit
below the tensor classes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..backend import NUMPY, Backend, DType, combine_types, convert, get_precision
from ._shape import Shape


def aligned_native(t, out: Shape, backend: Backend | None = None):
    """The native of the dense tensor `t`, transposed and reshaped with size-1 axes so that it broadcasts against `out`.

    With `backend`, a native of another backend is converted to it (see `common_backend` for the rule).
    """
    shape = t._shape
    if shape is out or shape.names == out.names:
        native = t._native
    else:
        native = relaid_native(t, *axes_layout(shape.names, out.names))
    if backend is not None and t._backend is not backend:
        native = convert(native, backend)
    return native


@functools.lru_cache(maxsize=4096)
def axes_layout(names: tuple, order: tuple) -> tuple:
    """How to lay out axes `names` as `order`: (axes kept, permutation or None, source axis per output axis).

    Axes not in `order` are dropped (they must have size 1); names of `order` missing from
    `names` become size-1 axes (source -1). Cached: layouts repeat across calls.
    """
    kept = tuple(i for i, n in enumerate(names) if n in order)
    kept_names = [names[i] for i in kept]
    perm = tuple(kept_names.index(n) for n in order if n in kept_names)
    sources = tuple(kept[kept_names.index(n)] if n in kept_names else -1 for n in order)
    return kept, (perm if perm != tuple(range(len(perm))) else None), (sources if -1 in sources else None)


def relaid_native(t, kept: tuple, perm: tuple | None, sources: tuple | None):
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


def common_backend(tensors: Sequence) -> Backend:
    backend = tensors[0]._backend
    for t in tensors[1:]:
        if t._backend is not backend:
            if backend is NUMPY:
                backend = t._backend
            elif t._backend is not NUMPY:
                raise TypeError(f'Cannot combine tensors of backends {backend.name} and {t._backend.name} in one '
                                f'operation; convert one first (convert(t, backend)).')
    return backend


def auto_cast(backend: Backend, natives: list) -> list:
    """Cast natives of different dtypes to their common type (`promoted_dtype`), floats in the current precision."""
    dtype = backend.dtype
    first = dtype(natives[0])
    if all(dtype(n) == first for n in natives[1:]):
        return natives
    dtypes = [dtype(n) for n in natives]
    # integers too: the libraries disagree (uint64 with int64 is float64 in NumPy and JAX, unsupported in torch;
    # TensorFlow promotes nothing), and the tracer predicts `promoted_dtype`
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
