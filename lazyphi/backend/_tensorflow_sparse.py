"""Sparse matrices of the TensorFlow backend: `tf.SparseTensor`, TensorFlow's only public sparse type (coordinates).

TensorFlow has no public compressed-row or compressed-column type, so `csr_matrix` and `csc_matrix` are left out.
Only `_tensorflow_ops` imports this module.
"""

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from . import _tensorflow_types as types
from ._numpy import sparse_to_scipy
from ._tensorflow_types import common, to_native


def sparse_coo_tensor(indices: Any, values: Any, shape: Sequence[int]) -> tf.SparseTensor:
    """A `tf.SparseTensor` of `values (nnz,)` at `indices (nnz, len(shape))`, in the row-major order TensorFlow's
    operations expect; repeated indices add up in products."""
    indices = tf.cast(to_native(indices), tf.int64)
    return tf.sparse.reorder(tf.SparseTensor(indices, to_native(values), [int(s) for s in shape]))


def sparse_coo_tensor_batched(indices: Any, values: Any, shape: Sequence[int]) -> tf.SparseTensor:
    """A `tf.SparseTensor` `(batch, *shape)` of `values (batch, nnz)` at `indices (batch, len(shape), nnz)`."""
    indices, values = tf.cast(to_native(indices), tf.int64), to_native(values)
    batch, nnz = indices.shape[0], indices.shape[2]
    entry = tf.repeat(tf.range(batch, dtype=tf.int64), nnz)[:, None]
    flat = tf.concat([entry, tf.reshape(tf.transpose(indices, (0, 2, 1)), (batch * nnz, -1))], 1)
    return tf.sparse.reorder(tf.SparseTensor(flat, tf.reshape(values, (-1,)), [batch, *[int(s) for s in shape]]))


def disassemble(x: Any) -> tuple[Callable, tuple]:
    """`assemble(backend, *parts)` and the parts of `x`: (indices (nnz, 2), values) of a `tf.SparseTensor`,
    `(x,)` of dense tensors."""
    if isinstance(x, tf.SparseTensor):
        shape = tuple(int(s) for s in x.dense_shape)
        return (lambda b, i, v: b.sparse_coo_tensor(i, v, shape)), (x.indices, x.values)
    return (lambda b, t: t), (x,)


def is_tensor(x: Any, only_native: bool = False) -> bool:
    return isinstance(x, tf.SparseTensor) or types.is_tensor(x, only_native)


def staticshape(x: Any) -> tuple:
    return tuple(int(s) for s in x.dense_shape) if isinstance(x, tf.SparseTensor) else types.staticshape(x)


def numpy(x: Any) -> Any:
    """`x` as a NumPy array; a `tf.SparseTensor` as a SciPy matrix, as phiml gives it."""
    return sparse_to_scipy(x, disassemble, types.to_numpy) if isinstance(x, tf.SparseTensor) else types.to_numpy(x)


def mul_matrix_batched_vector(matrix: Any, vector: Any) -> Any:
    """Multiplies `matrix (rows, cols)`, dense or sparse, or `(batch, rows, cols)` with `vector (batch, cols)`."""
    if isinstance(matrix, tf.SparseTensor):
        return tf.transpose(tf.sparse.sparse_dense_matmul(matrix, to_native(vector), adjoint_b=True))
    matrix, vector = common([matrix, vector])
    return tf.linalg.matmul(matrix, vector[..., None])[..., 0]
