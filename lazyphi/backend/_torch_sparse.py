"""Sparse matrices of the PyTorch backend: torch's COO, CSR and CSC layouts, batched ones included.

Only `lazyphi.backend.torch` imports this module (through `_torch_ops`). Indices become int64 (COO) or the common
integer type of the index parts (CSR, CSC); values keep their data type. Matrices land on the device of `values`.
"""

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

_FORMATS = {torch.sparse_coo: 'coo', torch.sparse_csr: 'csr', torch.sparse_csc: 'csc', torch.sparse_bsr: 'bsr',
            torch.sparse_bsc: 'bsc'}


def _native(x: Any, device: torch.device | None = None) -> torch.Tensor:
    """`x` as a tensor of its own data type (no precision rule: index and value parts keep their types)."""
    tensor = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x))
    return tensor if device is None else tensor.to(device)


def _index_parts(*parts: Any, device: torch.device) -> list[torch.Tensor]:
    """The index parts of a compressed matrix as tensors of one integer type, as torch requires."""
    tensors = [_native(p, device) for p in parts]
    dtype = torch.int32 if all(t.dtype == torch.int32 for t in tensors) else torch.int64
    return [t.to(dtype) for t in tensors]


def get_sparse_format(x: Any) -> str:
    """'coo', 'csr', 'csc' (or torch's block formats 'bsr', 'bsc') for sparse tensors, 'dense' otherwise."""
    return _FORMATS.get(x.layout, 'dense') if isinstance(x, torch.Tensor) else 'dense'


def sparse_coo_tensor(indices: Any, values: Any, shape: Sequence[int]) -> torch.Tensor:
    """A COO tensor of `values (nnz, dense...)` at `indices (nnz, len(shape))`; repeated indices add up."""
    values = _native(values)
    indices = _native(indices, values.device).to(torch.int64)
    return torch.sparse_coo_tensor(indices.T, values, tuple(shape) + tuple(values.shape[1:]), check_invariants=True)


def sparse_coo_tensor_batched(indices: Any, values: Any, shape: Sequence[int]) -> torch.Tensor:
    """A COO tensor `(batch, *shape)` of `values (batch, nnz)` at `indices (batch, len(shape), nnz)`."""
    values = _native(values)
    indices = _native(indices, values.device).to(torch.int64)
    batch, dims, nnz = indices.shape
    entry = torch.arange(batch, device=values.device).repeat_interleave(nnz)[None]
    flat = torch.cat([entry, indices.permute(1, 0, 2).reshape(dims, batch * nnz)])
    return torch.sparse_coo_tensor(flat, values.reshape(batch * nnz, *values.shape[2:]),
                                   (batch, *shape, *values.shape[2:]), check_invariants=True)


def _compressed(make: Callable, pointers: Any, indices: Any, values: Any, shape: Sequence[int]) -> torch.Tensor:
    values = _native(values)
    pointers, indices = _index_parts(pointers, indices, device=values.device)
    batch = tuple(indices.shape[:-1])
    with warnings.catch_warnings():  # torch says once per process that compressed layouts are in beta
        warnings.filterwarnings('ignore', message='Sparse (CSR|CSC) tensor support is in beta', category=UserWarning)
        return make(pointers, indices, values, batch + tuple(shape) + tuple(values.shape[len(batch) + 1:]),
                    check_invariants=True)


def csr_matrix(column_indices: Any, row_pointers: Any, values: Any, shape: Sequence[int]) -> torch.Tensor:
    """A CSR matrix; with a leading batch axis on every part, a batch of them `(batch, rows, cols)`. Values may
    have trailing dense axes `(..., nnz, dense...)`."""
    return _compressed(torch.sparse_csr_tensor, row_pointers, column_indices, values, shape)


def csc_matrix(column_pointers: Any, row_indices: Any, values: Any, shape: Sequence[int]) -> torch.Tensor:
    """A CSC matrix; with a leading batch axis on every part, a batch of them `(batch, rows, cols)`."""
    return _compressed(torch.sparse_csc_tensor, column_pointers, row_indices, values, shape)


def compressed_rows(matrix: torch.Tensor) -> torch.Tensor:
    """A sparse `matrix` in the CSR layout."""
    if matrix.layout == torch.sparse_csr:
        return matrix
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='Sparse CSR tensor support is in beta', category=UserWarning)
        return matrix.to_sparse_csr()


def disassemble(x: Any) -> tuple[Callable, tuple]:
    """`assemble(backend, *parts)` and the parts of `x`: (indices (nnz, 2), values) of a COO tensor (coalesced,
    so repeats are summed), (values, column indices, row pointers) of CSR, (values, row indices, column pointers)
    of CSC, `(x,)` of dense tensors."""
    layout = get_sparse_format(x)
    shape = tuple(x.shape)
    if layout == 'dense':
        return (lambda b, t: t), (x,)
    if layout == 'coo':
        x = x.coalesce()
        return (lambda b, i, v: b.sparse_coo_tensor(i, v, shape)), (x.indices().T, x.values())
    if layout == 'csr':
        return (lambda b, v, i, p: b.csr_matrix(i, p, v, shape)), (x.values(), x.col_indices(), x.crow_indices())
    if layout == 'csc':
        return (lambda b, v, i, p: b.csc_matrix(p, i, v, shape)), (x.values(), x.row_indices(), x.ccol_indices())
    raise ValueError(f"disassemble takes COO, CSR and CSC tensors, got the layout {x.layout}")


def mul_matrix_batched_vector(matrix: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
    """`matrix (rows, cols)`, dense or sparse, or `(batch, rows, cols)` times `vector (batch, cols)`."""
    if matrix.layout != torch.strided:
        return torch.mm(matrix, vector.T).T
    return torch.matmul(matrix, vector[..., None])[..., 0]
