"""Sparse matrices of the JAX backend: `jax.experimental.sparse`'s BCOO and BCSR (batched ones included) and CSC.

Only `lazyphi.backend.jax` imports this module (through `_jax_ops`). `jax.experimental.sparse` takes half a second
to import (it loads `scipy.sparse.linalg`), so it is imported when a sparse matrix is first made; telling sparse
values apart needs no import, since such a value proves the module loaded.
"""

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp

_FORMATS = {'BCOO': 'coo', 'BCSR': 'csr', 'CSR': 'csr', 'CSC': 'csc'}


def _sparse_module() -> Any:
    return importlib.import_module('jax.experimental.sparse')


def is_sparse(x: Any) -> bool:
    return type(x).__module__.startswith('jax.experimental.sparse')


def get_sparse_format(x: Any) -> str:
    """'coo' (BCOO), 'csr' (BCSR) or 'csc' for sparse matrices, 'dense' otherwise."""
    return _FORMATS.get(type(x).__name__, 'dense') if is_sparse(x) else 'dense'


def sparse_coo_tensor(indices: Any, values: Any, shape: Sequence[int]) -> Any:
    """A BCOO matrix of `values (nnz, dense...)` at `indices (nnz, len(shape))`; repeated indices add up."""
    values = jnp.asarray(values)
    return _sparse_module().BCOO((values, jnp.asarray(indices)), shape=tuple(shape) + values.shape[1:])


def sparse_coo_tensor_batched(indices: Any, values: Any, shape: Sequence[int]) -> Any:
    """A BCOO batch `(batch, *shape)` of `values (batch, nnz)` at `indices (batch, len(shape), nnz)`."""
    values = jnp.asarray(values)
    indices = jnp.swapaxes(jnp.asarray(indices), 1, 2)
    return _sparse_module().BCOO((values, indices), shape=(values.shape[0], *shape, *values.shape[2:]))


def csr_matrix(column_indices: Any, row_pointers: Any, values: Any, shape: Sequence[int]) -> Any:
    """A BCSR matrix; with a leading batch axis on every part, a batch of them `(batch, rows, cols)`."""
    column_indices, row_pointers, values = (jnp.asarray(p) for p in (column_indices, row_pointers, values))
    batch = column_indices.shape[:-1]
    return _sparse_module().BCSR((values, column_indices, row_pointers),
                                 shape=batch + tuple(shape) + values.shape[len(batch) + 1:])


def csc_matrix(column_pointers: Any, row_indices: Any, values: Any, shape: Sequence[int]) -> Any:
    """A CSC matrix (JAX's compressed-column type has no batches)."""
    return _sparse_module().CSC((jnp.asarray(values), jnp.asarray(row_indices), jnp.asarray(column_pointers)),
                                shape=tuple(shape))


def disassemble(x: Any) -> tuple[Callable, tuple]:
    """`assemble(backend, *parts)` and the parts of `x`: (indices (nnz, 2), values) of BCOO, (values, column
    indices, row pointers) of BCSR, (values, row indices, column pointers) of CSC, `(x,)` of dense arrays."""
    form = get_sparse_format(x)
    shape = tuple(x.shape)
    if form == 'dense':
        return (lambda b, t: t), (x,)
    if form == 'coo':
        return (lambda b, i, v: b.sparse_coo_tensor(i, v, shape)), (x.indices, x.data)
    if form == 'csr':
        return (lambda b, v, i, p: b.csr_matrix(i, p, v, shape)), (x.data, x.indices, x.indptr)
    return (lambda b, v, i, p: b.csc_matrix(p, i, v, shape)), (x.data, x.indices, x.indptr)


def sparse_times_vector(matrix: Any, vector: Any) -> Any:
    """Sparse `matrix (rows, cols)` times `vector (batch, cols)`."""
    return (matrix @ jnp.asarray(vector).T).T
