"""Tests of lazyphi.backend: the NumPy and object backends, the registry, devices, data types and precision."""
# ruff: noqa: B008  (the op cases draw their random inputs once, as default arguments, when the table is built)

import asyncio
import dataclasses
import importlib.util
import logging
import math
import os
import pickle
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from random_inputs import RNG, bools, f32, ints, pos, unit
from scipy import ndimage, signal

from lazyphi import math as lmath
from lazyphi.backend import (
    BACKENDS,
    ML_LOGGER,
    NUMPY,
    OBJECTS,
    Backend,
    ComputeDevice,
    DType,
    NoBackendFound,
    UnsupportedDType,
    choose_backend,
    combine_types,
    context_backend,
    convert,
    default_backend,
    get_precision,
    precision,
    register_backend,
    register_lazy_backend,
    set_global_default_backend,
    set_global_precision,
)
from lazyphi.backend import _registry as registry_module
from lazyphi.backend._dtype import from_numpy_dtype, to_numpy_dtype


def assert_same(actual, expected):
    """Equal values and, for arrays, equal dtypes."""
    if isinstance(expected, tuple | list):
        assert isinstance(actual, tuple | list) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for key in expected:
            assert_same(actual[key], expected[key])
    elif isinstance(expected, np.ndarray | np.generic):
        assert np.asarray(actual).dtype == expected.dtype, (np.asarray(actual).dtype, expected.dtype)
        if expected.dtype.kind in 'fc':
            np.testing.assert_allclose(actual, expected, rtol=2e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(actual, expected)
    else:
        assert actual == expected, (actual, expected)


def _scatter_loop(base, indices, values, combine):
    result = base.copy()
    for b in range(base.shape[0]):
        for u in range(indices.shape[1]):
            position = (b, *indices[min(b, len(indices) - 1), u])
            result[position] = combine(result[position], values[min(b, len(values) - 1), min(u, values.shape[1] - 1)])
    return result


def _gather_nd_loop(values, indices):
    return np.stack([np.stack([values[b][tuple(i)] for i in indices[b]]) for b in range(len(values))])


def _counting_loop(remaining, count):
    return remaining - 1, count + 1


_CPU = NUMPY.list_devices()[0]
_X, _Y, _M, _B, _I = f32(3, 4), f32(3, 4), f32(2, 3, 4), bools(3, 4), ints(3, 4)

# Each case returns (result of the backend, expected result computed with NumPy, SciPy or math directly).
# a 3 x 4 matrix in compressed rows (its middle row empty): column indices, row pointers, values
_CSR = (np.array([3, 0, 2]), np.array([0, 1, 1, 3]), np.array([1.5, -2., 4.]))


def _scipy_csr():
    from scipy.sparse import csr_matrix
    return csr_matrix((_CSR[2], _CSR[0], _CSR[1]), shape=(3, 4))


def _sparse_identity(n: int):
    from scipy.sparse import identity
    return identity(n, format='csr')


_SPD = (lambda m: m @ m.T + 4 * np.eye(4, dtype=np.float32))(f32(4, 4))


def _solved(solve) -> tuple:
    """The solution of a solve of two right-hand sides of `_SPD` in float32, and NumPy's direct one."""
    rhs = f32(2, 4)
    found = solve(_SPD, rhs, np.zeros((1, 4), np.float32), 1e-6, 1e-7, np.array([[30, 30]]), None)
    return found.x, np.linalg.solve(_SPD.astype(np.float64), rhs.T.astype(np.float64)).T.astype(np.float32)


CASES = {
    # --- tensors and types ---
    'is_tensor': lambda: ((NUMPY.is_tensor(_X, True), NUMPY.is_tensor([1, 2.5]), NUMPY.is_tensor('a'),
                           NUMPY.is_tensor([1], True)), (True, True, False, False)),
    'as_tensor': lambda x=RNG.standard_normal(3): (NUMPY.as_tensor(x), x.astype(np.float32)),
    'is_available': lambda: (NUMPY.is_available(_X), True),
    'numpy': lambda: (NUMPY.numpy([1.5, 2.5]), np.array([1.5, 2.5])),
    'content_hash': lambda h=NUMPY.content_hash: ((h(_X) == h(np.asfortranarray(_X)), h(_X) != h(_X.reshape(4, 3)),
                                                   len(h(_X))), (True, True, 32)),
    'copy': lambda: ((c := NUMPY.copy(_X), c is _X), (_X, False)),
    'for_pickling': lambda: ((NUMPY.for_pickling(_X[1:]) is not None, len(pickle.dumps(NUMPY.for_pickling(_X[:1])))
                              < len(pickle.dumps(_X))), (True, True)),  # a NumPy view pickles its own elements
    'to_dlpack': lambda: (np.from_dlpack(NUMPY.to_dlpack(_X)), _X),
    'from_dlpack': lambda: (NUMPY.from_dlpack(_X), _X),
    'dtype': lambda: ([NUMPY.dtype(v) for v in (_X, True, 3, 1.5, 1j, [1, 2])],
                      [DType(float, 32), DType(bool), DType(int, 32), DType(float, 64), DType(complex, 128),
                       DType(int, 64)]),
    'cast': lambda: ((NUMPY.cast(_X, DType(int, 64)), NUMPY.cast(2, DType(float, 32))), (_X.astype(np.int64),
                                                                                         np.float32(2))),
    'staticshape': lambda: ((NUMPY.staticshape(_M), NUMPY.staticshape(1.0)), ((2, 3, 4), ())),
    'shape': lambda: (NUMPY.shape(_M), (2, 3, 4)),
    'ndims': lambda: (NUMPY.ndims(_M), 3),
    'size': lambda: (NUMPY.size(_M), 24),
    'solve_triangular_dense': lambda m=f32(2, 3, 3) + 3 * np.eye(3, dtype=np.float32), r=f32(2, 3): (
        NUMPY.solve_triangular_dense(m, r, True, False), np.linalg.solve(np.tril(m), r[..., None])[..., 0]),
    'sizeof': lambda: ((NUMPY.sizeof(_M), NUMPY.sizeof(_B), NUMPY.sizeof(1.5)), (_M.nbytes, _B.nbytes, 8)),
    'is_module': lambda: (NUMPY.is_module(_X), False),
    'is_sparse': lambda: (NUMPY.is_sparse(_X), False),
    'prefers_channels_last': lambda: (NUMPY.prefers_channels_last(), True),
    'stop_gradient': lambda: (NUMPY.stop_gradient(_X), _X),
    'copy_leaves': lambda: (NUMPY.copy_leaves({'a': [_X, (_Y,)]}), {'a': [_X, (_Y,)]}),
    'stack_leaves': lambda: (NUMPY.stack_leaves([{'a': (_X,)}, {'a': (_Y,)}]), {'a': (np.stack([_X, _Y]),)}),
    'stop_gradient_tree': lambda: (NUMPY.stop_gradient_tree({'a': (_X, [_Y])}), {'a': (_X, [_Y])}),
    'numpy_call': lambda: (NUMPY.numpy_call(np.cumsum, (3, 4), DType(float, 32), _X, axis=1), np.cumsum(_X, 1)),
    'seed': lambda: ((NUMPY.seed(3), NUMPY.random_normal((4,), None))[1],
                     (NUMPY.seed(3), NUMPY.random_normal((4,)))[1]),
    'to_float': lambda: (NUMPY.to_float(_I), _I.astype(np.float32)),
    'to_int32': lambda: (NUMPY.to_int32(_X), _X.astype(np.int32)),
    'to_int64': lambda: (NUMPY.to_int64(_X), _X.astype(np.int64)),
    'to_complex': lambda: (NUMPY.to_complex(_X), _X.astype(np.complex64)),
    'auto_cast': lambda: (NUMPY.auto_cast(_I, _X, np.float64(1)), [_I.astype(np.float32), _X, np.float32(1)]),
    'combine_types': lambda: (NUMPY.combine_types(DType(int, 64), DType(float, 64)), DType(float, 32)),
    # --- devices and calls ---
    'list_devices': lambda: (NUMPY.list_devices('CPU'), [_CPU]),
    'get_default_device': lambda: (NUMPY.get_default_device(), _CPU),
    'set_default_device': lambda: (NUMPY.set_default_device(_CPU), True),
    'get_device': lambda: (NUMPY.get_device(_X), _CPU),
    'get_device_by_ref': lambda: (NUMPY.get_device_by_ref('CPU'), _CPU),
    'allocate_on_device': lambda: (NUMPY.allocate_on_device(_X, _CPU), _X),
    'call': lambda: (NUMPY.call(np.add, _X, _Y, name='plus'), _X + _Y),
    'block_until_ready': lambda: (NUMPY.block_until_ready(_X), None),
    'requires_fixed_shapes_when_tracing': lambda: (NUMPY.requires_fixed_shapes_when_tracing(), False),
    'determine_size': lambda: (NUMPY.determine_size([f32(1, 2), f32(5, 2)], 0), 5),
    'vectorized_call': lambda a=f32(3, 4), b=f32(1, 4): (NUMPY.vectorized_call(np.dot, a, b),
                                                         np.array([np.dot(a[i], b[0]) for i in range(3)])),
    'while_loop': lambda: (NUMPY.while_loop(_counting_loop, (np.int64(3), np.int64(0)), 10), (0, 3)),
    # --- creation ---
    'zeros': lambda: ((NUMPY.zeros((2, 3)), NUMPY.zeros((2,), DType(int, 64))), (np.zeros((2, 3), np.float32),
                                                                                np.zeros(2, np.int64))),
    'ones': lambda: (NUMPY.ones((2, 3), DType(bool)), np.ones((2, 3), bool)),
    'zeros_like': lambda: (NUMPY.zeros_like(_I), np.zeros_like(_I)),
    'ones_like': lambda: (NUMPY.ones_like(_X), np.ones_like(_X)),
    'range': lambda: ((NUMPY.range(5), NUMPY.range(2, 10, 3, DType(int, 64))), (np.arange(5, dtype=np.int32),
                                                                               np.arange(2, 10, 3))),
    'linspace': lambda: (NUMPY.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32)),
    'linspace_without_last': lambda: (NUMPY.linspace_without_last(0, 1, 4),
                                      np.linspace(0, 1, 5, dtype=np.float32)[:-1]),
    'meshgrid': lambda a=f32(2), b=f32(3): (NUMPY.meshgrid(a, b), np.meshgrid(a, b, indexing='ij')),
    'random_uniform': lambda: ((u := NUMPY.random_uniform((500,), 2, 3, None), bool(np.all((u >= 2) & (u < 3)))),
                               (np.asarray(u, np.float32), True)),
    'random_normal': lambda: ((r := NUMPY.random_normal((2000,), DType(float, 64)), abs(float(r.std()) - 1) < .1),
                              (np.asarray(r, np.float64), True)),
    # --- shape ---
    'reshape': lambda: (NUMPY.reshape(_M, (4, 6)), _M.reshape(4, 6)),
    'broadcast_to': lambda: (NUMPY.broadcast_to(_X, (2, 3, 4)), np.stack([_X, _X])),
    'transpose': lambda: (NUMPY.transpose(_M, (2, 0, 1)), _M.transpose(2, 0, 1)),
    'stack': lambda: (NUMPY.stack([_X, _Y], 1), np.stack([_X, _Y], 1)),
    'concat': lambda: (NUMPY.concat([_X, _Y], 1), np.concatenate([_X, _Y], 1)),
    'flip': lambda: (NUMPY.flip(_M, (0, 2)), _M[::-1, :, ::-1]),
    'flatten': lambda: (NUMPY.flatten(_M), _M.reshape(-1)),
    'tile': lambda: (NUMPY.tile(_X, (2, 1, 3)), np.tile(_X, (2, 1, 3))),
    'tile_to': lambda: (NUMPY.tile_to(_X, 0, 9), np.tile(_X, (3, 1))),
    'repeat': lambda: ((NUMPY.repeat(_X, [1, 0, 2], 0), NUMPY.repeat(_X, [1, 0, 2], 0, new_length=4)),
                       (np.repeat(_X, [1, 0, 2], 0), np.concatenate([np.repeat(_X, [1, 0, 2], 0), np.zeros((1, 4))
                                                                     .astype(np.float32)]))),
    'expand_dims': lambda: ((NUMPY.expand_dims(_X, -2, 2), NUMPY.expand_dims(_X)), (_X[:, None, None, :], _X[None])),
    'pad': lambda: ([NUMPY.pad(_X, [(1, 2), (0, 1)], mode, 7) for mode in ('constant', 'boundary', 'periodic')]
                    + [NUMPY.pad(_X, [(0, 0), (2, 2)], mode) for mode in ('symmetric', 'reflect', 'nonsense')],
                    [np.pad(_X, [(1, 2), (0, 1)], constant_values=7), np.pad(_X, [(1, 2), (0, 1)], 'edge'),
                     np.pad(_X, [(1, 2), (0, 1)], 'wrap'), np.pad(_X, [(0, 0), (2, 2)], 'symmetric'),
                     np.pad(_X, [(0, 0), (2, 2)], 'reflect'), NotImplemented]),
    'pad_to': lambda: ((NUMPY.pad_to(_X, 1, 6, -1), NUMPY.pad_to(_X, 0, 2, 0), NUMPY.pad_to(_X, 0, 3, 0)),
                       (np.pad(_X, [(0, 0), (0, 2)], constant_values=-1), _X[:2], _X)),
    'unstack': lambda: ((NUMPY.unstack(_M, -1), NUMPY.unstack(_M, 0, keepdims=True)),
                        (tuple(_M[..., i] for i in range(4)), (_M[:1], _M[1:]))),
    # --- reductions, sorting, counting ---
    'sum': lambda: ((NUMPY.sum(_M, 1, True), NUMPY.sum(_M)), (_M.sum(1, keepdims=True), _M.sum())),
    'prod': lambda: (NUMPY.prod(_X, 0), _X.prod(0)),
    'mean': lambda: (NUMPY.mean(_M, (0, 2), True), _M.mean((0, 2), keepdims=True)),
    'std': lambda: (NUMPY.std(_M, 1), _M.std(1)),
    'max': lambda: (NUMPY.max(_M, 2, True), _M.max(2, keepdims=True)),
    'min': lambda: (NUMPY.min(_M, None), _M.min()),
    'any': lambda: (NUMPY.any(_B, 0), _B.any(0)),
    'all': lambda: (NUMPY.all(_B, 1, True), _B.all(1, keepdims=True)),
    'argmax': lambda: (NUMPY.argmax(_M, 1, True), np.argmax(_M, 1, keepdims=True)),
    'argmin': lambda: (NUMPY.argmin(_M, 2), np.argmin(_M, 2)),
    'cumsum': lambda: (NUMPY.cumsum(_X, 1), np.cumsum(_X, 1)),
    'quantile': lambda: (NUMPY.quantile(_M, [0.1, 0.5]), np.quantile(_M, [0.1, 0.5], axis=-1)),
    'argsort': lambda: (NUMPY.argsort(_X, 0), np.argsort(_X, 0)),
    'sort': lambda: (NUMPY.sort(_X), np.sort(_X)),
    'searchsorted': lambda s=np.sort(f32(2, 5)), v=f32(2, 3): (
        (NUMPY.searchsorted(s[0], v[0], 'left'), NUMPY.searchsorted(s, v, 'right', DType(int, 64))),
        (np.searchsorted(s[0], v[0]).astype(np.int32),
         np.stack([np.searchsorted(s[i], v[i], 'right') for i in (0, 1)]))),
    'unique': lambda: (NUMPY.unique(_I, True, True, None), np.unique(_I, return_inverse=True, return_counts=True)),
    'bincount': lambda x=ints(20), w=f32(20): (
        (NUMPY.bincount(x, None, 12), NUMPY.bincount(x, w, 12)),
        (np.bincount(x, minlength=12), np.bincount(x, w, 12).astype(np.float32))),
    'batched_bincount': lambda x=ints(2, 20): (NUMPY.batched_bincount(x, None, 10),
                                               np.stack([np.bincount(x[i], minlength=10) for i in (0, 1)])),
    'histogram1d': lambda v=f32(2, 30), w=pos(2, 30), e=np.sort(f32(2, 6)): (
        NUMPY.histogram1d(v, w, e),
        np.stack([np.histogram(v[i], e[i], weights=w[i])[0] for i in (0, 1)]).astype(np.float32)),
    'indexed_segment_sum': lambda x=f32(2, 6, 3), i=np.array([[0, 2, 5], [0, 1, 3]]): (
        NUMPY.indexed_segment_sum(x, i, 1), np.stack([np.add.reduceat(x[b], i[b], 0) for b in (0, 1)])),
    # --- selection ---
    'where': lambda: ((NUMPY.where(_B, _X, _Y), NUMPY.where(_B)), (np.where(_B, _X, _Y), np.argwhere(_B))),
    'nonzero': lambda: ((NUMPY.nonzero(_B), NUMPY.nonzero(_B, 20, -1)[-1], NUMPY.nonzero(_B, 2)),
                        (np.argwhere(_B), np.array([-1, -1]), np.argwhere(_B)[:2])),
    'boolean_mask': lambda m=np.array([True, False, True, True]): (
        (NUMPY.boolean_mask(_X, m, 1), NUMPY.boolean_mask(_X, m, 1, new_length=4, fill_value=9)[:, 3]),
        (_X[:, m], np.full(3, 9, np.float32))),
    'gather': lambda i=ints(5, high=4): (NUMPY.gather(_X, i, 1), _X[:, i]),
    'gather_1d': lambda i=ints(5, high=3): (NUMPY.gather_1d(_X, i), _X[i]),
    'batched_gather_nd': lambda v=f32(2, 4, 5, 3), i=ints(2, 6, 2, high=4): (NUMPY.batched_gather_nd(v, i),
                                                                             _gather_nd_loop(v, i)),
    'gather_nd': lambda v=f32(4, 5, 3), i=ints(6, 2, high=4): (NUMPY.gather_nd(v, i),
                                                               np.stack([v[tuple(j)] for j in i])),
    'batched_gather_1d': lambda v=f32(2, 7), i=ints(2, 4, high=7): (NUMPY.batched_gather_1d(v, i),
                                                                    np.take_along_axis(v, i, 1)),
    'gather_by_component_indices': lambda: (NUMPY.gather_by_component_indices(_X, 1, 2), _X[1, 2]),
    'batch_gather': lambda: ((NUMPY.batch_gather(_M, 1), NUMPY.batch_gather(_M, [1, 0])), (_M[[1]], _M[[1, 0]])),
    'multi_slice': lambda: (NUMPY.multi_slice(_M, (0, slice(1, None))), _M[0, 1:]),
    'scatter': lambda g=f32(2, 4, 5, 3), i=ints(1, 6, 2, high=4), v=f32(2, 6, 3): (
        [NUMPY.scatter(g, i, v, mode) for mode in ('add', 'max', 'min')]
        + [NUMPY.scatter(g, i[:, :1], v[:, :1], 'update')],
        [_scatter_loop(g, i, v, f) for f in (np.add, np.maximum, np.minimum)]
        + [_scatter_loop(g, i[:, :1], v[:, :1], lambda old, new: new)]),
    'scatter_nd': lambda g=f32(4, 3), i=np.array([[1], [3], [1]]), v=f32(3, 3): (
        NUMPY.scatter_nd(g, i, v, 'add'), _scatter_loop(g[None], i[None], v[None], np.add)[0]),
    'scatter_1d_scalar': lambda g=f32(5), i=np.array([0, 4, 0]), v=f32(3): (
        NUMPY.scatter_1d_scalar(g, i, v, 'add'), g + np.bincount(i, v, 5).astype(np.float32)),
    'scatter_nd_scalar': lambda g=f32(3, 4), i=np.array([[0, 1], [2, 3]]), v=f32(2): (
        NUMPY.scatter_nd_scalar(g, i, v, 'update'), _scatter_loop(g[None, ..., None], i[None], v[None, :, None],
                                                                  lambda old, new: new)[0, ..., 0]),
    'get_diagonal': lambda m=f32(2, 3, 3, 2): (NUMPY.get_diagonal(m, 1),
                                               np.stack([m[:, 0, 1], m[:, 1, 2]], 1)),
    'grid_sample': lambda g=f32(1, 5, 4, 1), c=RNG.uniform(-3, 8, (1, 30, 2)).astype(np.float32): (
        NUMPY.grid_sample(g, c, 'periodic')[0, :, 0],
        ndimage.map_coordinates(g[0, ..., 0], c[0].T, order=1, mode='grid-wrap')),
    'unravel_index': lambda i=ints(6, high=12): (NUMPY.unravel_index(i, (3, 4)),
                                                 np.stack(np.unravel_index(i, (3, 4)), -1)),
    'ravel_multi_index': lambda i=ints(5, 2, high=3): (NUMPY.ravel_multi_index(i, (3, 4)),
                                                       np.ravel_multi_index(tuple(i.T), (3, 4))),
    # --- linear algebra and signals ---
    'tensordot': lambda: (NUMPY.tensordot(_M, (1, 2), _X, (0, 1)), np.tensordot(_M, _X, ((1, 2), (0, 1)))),
    'einsum': lambda: (NUMPY.einsum('bij,ij->b', _M, _X), np.einsum('bij,ij->b', _M, _X)),
    'mul_matrix_batched_vector': lambda v=f32(5, 4): (NUMPY.mul_matrix_batched_vector(_X, v), v @ _X.T),
    'linear': lambda v=f32(5, 4): ((NUMPY.linear(_X, v), NUMPY.linear(np.negative, v)), (v @ _X.T, -v)),
    'conv': lambda v=f32(2, 3, 9), k=f32(1, 2, 3, 4): (NUMPY.conv(v, k), np.array(
        [[sum(signal.correlate(v[b, i], k[0, o, i], 'same') for i in range(3)) for o in (0, 1)] for b in (0, 1)])),
    'fft': lambda: ((NUMPY.fft(_M, (1, 2)), NUMPY.fft(_I, [0])), (np.fft.fftn(_M, axes=(1, 2)),
                                                                  np.fft.fft(_I, axis=0).astype(np.complex64))),
    'ifft': lambda x=f32(4, 6).astype(np.complex128): (NUMPY.ifft(x, (1,)), np.fft.ifft(x, axis=1)),
    'svd': lambda: (NUMPY.svd(_M, full_matrices=False), np.linalg.svd(_M, full_matrices=False)),
    'matrix_solve_least_squares': lambda m=f32(6, 3), r=f32(6, 2): (
        NUMPY.matrix_solve_least_squares(m[None], r[None])[0][0], np.linalg.lstsq(m, r, rcond=None)[0]),
    'eigvals': lambda m=f32(2, 4, 4): ((NUMPY.eigvals(m), NUMPY.eigvals(np.diag([1., 2.]))),  # complex even where real
                                       (np.linalg.eigvals(m), np.array([1, 2], np.complex128))),
    # --- element-wise ---
    'clip': lambda: (NUMPY.clip(_X, -0.5, 0.5), np.clip(_X, -0.5, 0.5)),
    'divide_no_nan': lambda y=np.array([0, 2, 0, 4], np.float32): (NUMPY.divide_no_nan(_X, y),
                                                                  np.array([0, 1, 0, 1], np.float32) * _X / y.clip(1)),
    'sigmoid': lambda: (NUMPY.sigmoid(_X), 1 / (1 + np.exp(-_X))),
    # phiml's batched sparse matrices (one here; tests/test_backend_contract.py has batches and every backend)
    'csr_to_coo': lambda coo=_scipy_csr().tocoo(): (NUMPY.csr_to_coo(_CSR[0][None], _CSR[1][None])[0],
                                                    np.stack([coo.row, coo.col], -1).astype(_CSR[0].dtype)),
    'csr_to_dense': lambda: (
        NUMPY.csr_to_dense(_CSR[0][None], _CSR[1][None], _CSR[2][None, :, None], (3, 4))[0, ..., 0],
        _scipy_csr().toarray()),
    'coo_to_dense': lambda coo=_scipy_csr().tocoo(): (
        NUMPY.coo_to_dense(np.stack([coo.row, coo.col], -1)[None], coo.data[None, :, None], (3, 4), False)[0, ..., 0],
        coo.toarray()),
    'mul_coo_dense': lambda coo=_scipy_csr().tocoo(), d=np.arange(8.).reshape(4, 2): (
        NUMPY.mul_coo_dense(np.stack([coo.row, coo.col], -1)[None], coo.data[None, :, None], (3, 4),
                            d[None, :, None, :])[0, :, 0], coo @ d),
    'mul_csr_dense': lambda d=np.arange(8.).reshape(4, 2): (
        NUMPY.mul_csr_dense(_CSR[0][None], _CSR[1][None], _CSR[2][None, :, None], (3, 4), d[None, :, None, :])[0, :, 0],
        _scipy_csr() @ d),
    # SciPy's sparse matrices and the solvers (tests/test_backend_catalogue.py checks them further)
    'sparse_coo_tensor': lambda coo=_scipy_csr().tocoo(): (
        NUMPY.sparse_coo_tensor(np.stack([coo.row, coo.col], -1), coo.data, (3, 4)).toarray(), coo.toarray()),
    'csr_matrix': lambda: (NUMPY.csr_matrix(*_CSR, (3, 4)).toarray(), _scipy_csr().toarray()),
    'csc_matrix': lambda csc=_scipy_csr().tocsc(): (NUMPY.csc_matrix(csc.indptr, csc.indices, csc.data,
                                                                     (3, 4)).toarray(), csc.toarray()),
    'get_sparse_format': lambda: ([NUMPY.get_sparse_format(m) for m in (_scipy_csr(), _scipy_csr().tocsc(),
                                                                        _scipy_csr().tocoo(), _X)],
                                  ['csr', 'csc', 'coo', 'dense']),
    'disassemble': lambda: ((lambda assemble, parts: assemble(NUMPY, *parts).toarray())(
        *NUMPY.disassemble(_scipy_csr().tocoo())), _scipy_csr().toarray()),
    'solve_triangular': lambda r=f32(2, 3): (
        NUMPY.solve_triangular(_scipy_csr()[:, :3] + 2 * _sparse_identity(3), r, True, False),
        np.linalg.solve(np.tril(_scipy_csr().toarray()[:, :3] + 2 * np.eye(3)), r.T).T),
    'solve_triangular_sparse': lambda r=f32(2, 3): (
        NUMPY.solve_triangular_sparse(_scipy_csr()[:, :3], r, False, True),
        np.linalg.solve(np.triu(_scipy_csr().toarray()[:, :3], 1) + np.eye(3), r.T).T),
    'linear_solve': lambda: _solved(lambda *a: NUMPY.linear_solve('auto', *a)),
    'conjugate_gradient': lambda: _solved(NUMPY.conjugate_gradient),
    'conjugate_gradient_adaptive': lambda: _solved(NUMPY.conjugate_gradient_adaptive),
    'bi_conjugate_gradient': lambda: _solved(NUMPY.bi_conjugate_gradient),
    'softplus': lambda x=np.array([-100, -1, 0, 1, 100], np.float32): (NUMPY.softplus(x), np.logaddexp(0, x)),
    'factorial': lambda i=np.arange(13, dtype=np.int32): (
        (NUMPY.factorial(i), NUMPY.factorial(np.arange(21)), NUMPY.factorial(np.float32([3, 4.5]))),
        (np.array([math.factorial(n) for n in range(13)], np.int32), np.array([math.factorial(n) for n in range(21)]),
         np.array([6, math.gamma(5.5)], np.float32))),
    'erf': lambda: (NUMPY.erf(_X), np.vectorize(math.erf)(_X).astype(np.float32)),
    'log_gamma': lambda x=pos(9): (NUMPY.log_gamma(x), np.vectorize(math.lgamma)(x).astype(np.float32)),
    'gamma_inc_l': lambda x=pos(9).astype(np.float64): (NUMPY.gamma_inc_l(2.0, x), 1 - (1 + x) * np.exp(-x)),
    'gamma_inc_u': lambda x=pos(9).astype(np.float64): (NUMPY.gamma_inc_u(1.0, x), np.exp(-x)),
    'invert': lambda: ((NUMPY.invert(_B), NUMPY.invert(_I)), (~_B, ~_I)),
    'real': lambda z=f32(3) + 1j * f32(3): (NUMPY.real(z), z.real),
    'imag': lambda z=f32(3) + 1j * f32(3): (NUMPY.imag(z), z.imag),
    'conj': lambda z=f32(3) + 1j * f32(3): (NUMPY.conj(z), z.real - 1j * z.imag),
}
_UNARY = {'abs': (np.abs, f32), 'sign': (np.sign, f32), 'round': (np.round, f32), 'ceil': (np.ceil, f32),
          'floor': (np.floor, f32), 'sqrt': (np.sqrt, pos), 'exp': (np.exp, f32), 'log': (np.log, pos),
          'log2': (np.log2, pos), 'log10': (np.log10, pos), 'sin': (np.sin, f32), 'arcsin': (np.arcsin, unit),
          'cos': (np.cos, f32), 'arccos': (np.arccos, unit), 'tan': (np.tan, unit), 'arctan': (np.arctan, f32),
          'sinh': (np.sinh, f32), 'arcsinh': (np.arcsinh, f32), 'cosh': (np.cosh, f32),
          'arccosh': (np.arccosh, lambda *s: 1 + pos(*s)), 'tanh': (np.tanh, f32), 'arctanh': (np.arctanh, unit),
          'isfinite': (np.isfinite, lambda *s: np.array([1, np.nan, np.inf, -np.inf], np.float32)),
          'isnan': (np.isnan, lambda *s: np.array([1, np.nan, np.inf], np.float32)),
          'isinf': (np.isinf, lambda *s: np.array([1, np.nan, -np.inf], np.float32))}
_BINARY = {'add': (np.add, f32), 'sub': (np.subtract, f32), 'mul': (np.multiply, f32), 'div': (np.divide, pos),
           'pow': (np.power, pos), 'mod': (np.mod, pos), 'floordiv': (np.floor_divide, pos),
           'maximum': (np.maximum, f32), 'minimum': (np.minimum, f32), 'arctan2': (np.arctan2, f32),
           'equal': (np.equal, lambda *s: ints(*s, high=2)), 'not_equal': (np.not_equal, lambda *s: ints(*s, high=2)),
           'greater_than': (np.greater, ints), 'greater_or_equal': (np.greater_equal, ints),
           'and_': (np.bitwise_and, ints), 'or_': (np.bitwise_or, ints), 'xor': (np.bitwise_xor, ints),
           'shift_bits_left': (np.left_shift, lambda *s: ints(*s, high=5)),
           'shift_bits_right': (np.right_shift, lambda *s: ints(*s, high=5))}
for _op, (_function, _make) in _UNARY.items():
    CASES[_op] = lambda op=_op, f=_function, x=_make(3, 4): (getattr(NUMPY, op)(x), f(x))
for _op, (_function, _make) in _BINARY.items():
    CASES[_op] = lambda op=_op, f=_function, a=_make(3, 4), b=_make(4): (getattr(NUMPY, op)(a, b), f(a, b))


@pytest.mark.parametrize('op', NUMPY.implemented_ops())
def test_numpy_op_matches_direct_computation(op):
    assert op in CASES, f"NUMPY implements '{op}' but test_backend.py has no case for it"
    actual, expected = CASES[op]()
    assert_same(actual, expected)


def test_table_entries_are_the_library_functions_themselves():
    assert NUMPY.add is np.add and NUMPY.concat is np.concatenate and NUMPY.exp is np.exp
    assert vars(NUMPY)['stack'] is np.stack  # an instance attribute: no method binding, no wrapper


def test_while_loop_with_checkpoints_stacks_trajectory():
    result = NUMPY.while_loop(_counting_loop, (np.int64(2), np.int64(0)), [0, 1, 5])
    assert_same(result, (np.array([2, 1, 1]), np.array([0, 1, 1])))  # ended at 2: checkpoint 5 repeats checkpoint 1


def test_while_loop_copies_values_a_loop_changes_in_place():
    def fill(remaining, array):
        array[remaining - 1] = remaining
        return remaining - 1, array
    result = NUMPY.while_loop(fill, (np.int64(2), np.zeros(2, np.int64)), [0, 1, 2])
    assert_same(result, (np.array([2, 1, 0]), np.array([[0, 0], [0, 2], [1, 2]])))


def test_ravel_multi_index_modes():
    index = np.array([[0, 5], [-1, 1], [2, 3]])
    for dtype in (np.int32, np.int64):  # the flat indices have the dtype of the multi-indices
        for mode in ('undefined', 'periodic', 'clamp', -1):
            assert NUMPY.ravel_multi_index(index.astype(dtype), (3, 4), mode).dtype == dtype
    assert_same(NUMPY.ravel_multi_index(index, (3, 4), 'periodic'), np.array([1, 9, 11]))
    assert_same(NUMPY.ravel_multi_index(index, (3, 4), 'clamp'), np.array([3, 1, 11]))
    assert_same(NUMPY.ravel_multi_index(index, (3, 4), -1), np.array([-1, -1, 11]))
    with pytest.raises(ValueError, match=r"mode must be .* but got 'wrap'"):
        NUMPY.ravel_multi_index(index, (3, 4), 'wrap')


@pytest.mark.parametrize('extrapolation, scipy_mode', [('boundary', 'nearest'), ('symmetric', 'reflect'),
                                                       ('reflect', 'mirror'), ('zeros', 'grid-constant')])
def test_grid_sample_extrapolation_matches_scipy(extrapolation, scipy_mode):
    grid, coordinates = f32(1, 6, 5, 1), RNG.uniform(-4, 9, (1, 40, 2))
    expected = ndimage.map_coordinates(grid[0, ..., 0], coordinates[0].T, order=1, mode=scipy_mode)
    np.testing.assert_allclose(NUMPY.grid_sample(grid, coordinates, extrapolation)[0, :, 0], expected, rtol=1e-5)
    assert NUMPY.grid_sample(grid, coordinates, 'nonsense') is NotImplemented


@pytest.mark.parametrize('kernel_shape', [(3,), (4,), (2, 3)])
@pytest.mark.parametrize('zero_padding', [True, False])
def test_conv_matches_scipy_correlate(kernel_shape, zero_padding):
    value = f32(2, 3, *[7] * len(kernel_shape))
    kernel = f32(2, 4, 3, *kernel_shape)
    mode = 'same' if zero_padding else 'valid'
    expected = [[sum(signal.correlate(value[b, i], kernel[b, o, i], mode) for i in range(3)) for o in range(4)]
                for b in (0, 1)]
    np.testing.assert_allclose(NUMPY.conv(value, kernel, zero_padding), np.array(expected), rtol=1e-4, atol=1e-5)


def test_random_values_honour_dtype_and_precision():
    assert NUMPY.random_uniform((3,), 0, 1, None).dtype == np.float32
    assert NUMPY.random_uniform((3,), 0, 5, DType(int, 64)).dtype == np.int64
    assert NUMPY.random_uniform((3,), 0, 1, DType(complex, 64)).dtype == np.complex64
    assert NUMPY.random_uniform((3,), 0, 1, DType(bool)).dtype == bool
    assert NUMPY.random_normal((3,), DType(float, 16)).dtype == np.float16
    with precision(64):
        assert NUMPY.random_normal((3,), None).dtype == np.float64
        assert NUMPY.zeros((2,)).dtype == np.float64 and NUMPY.linspace(0, 1, 3).dtype == np.float64
        assert NUMPY.as_tensor(np.float32(1)).dtype == np.float64
    with pytest.raises(ValueError, match="random_normal supports float and complex types, not int32"):
        NUMPY.random_normal((3,), DType(int, 32))
    with pytest.raises(ValueError, match=r"random_uniform supports .* not str"):
        NUMPY.random_uniform((3,), 0, 1, DType(str))


@pytest.mark.parametrize('bits', [64, 128])
def test_complex_random_values_lie_in_the_rectangle_of_the_bounds(backend, bits):
    """Real parts between the real parts of the bounds, imaginary parts between their imaginary parts."""
    real = backend.numpy(backend.random_uniform((200,), -1, 0, DType(complex, bits)))
    assert real.dtype == np.dtype(f'complex{bits}') and np.all(real.imag == 0)
    assert np.all((real.real >= -1) & (real.real < 0)) and np.ptp(real.real) > 0
    box = backend.numpy(backend.random_uniform((200,), 1j, 2 + 3j, DType(complex, bits)))
    assert np.all((box.real >= 0) & (box.real < 2)) and np.all((box.imag >= 1) & (box.imag < 3))
    assert np.ptp(box.real) > 0 and np.ptp(box.imag) > 0


def test_fft_keeps_precision():
    assert NUMPY.fft(f32(4, 4), (0, 1)).dtype == np.complex64
    assert NUMPY.fft(np.ones(4), (0,)).dtype == np.complex128
    assert NUMPY.ifft(np.ones(4, np.complex64), (0,)).dtype == np.complex64
    assert_same(NUMPY.fft(_X, ()), _X.astype(np.complex64))


def test_composite_errors_name_the_problem():
    with pytest.raises(ValueError, match="Cannot tile axis 0 of size 3 to size 7"):
        NUMPY.tile_to(_X, 0, 7)
    with pytest.raises(ValueError, match="axis 3 is out of range for a tensor with 2 dims"):
        NUMPY.unstack(_X, 3)
    with pytest.raises(ValueError, match=r"Sizes along axis 0 do not broadcast: \[2, 3\]"):
        NUMPY.determine_size([f32(2), f32(3)], 0)
    with pytest.raises(ValueError, match=r"scatter mode must be .* but got 'mul'"):
        NUMPY.scatter(f32(1, 3, 1), ints(1, 2, 1, high=3), f32(1, 2, 1), 'mul')
    with pytest.raises(ValueError, match=r"lin must be a matrix but has shape \(2, 3, 4\)"):
        NUMPY.linear(_M, f32(2, 4))


# --- supports() and missing operations ---

@pytest.mark.parametrize('feature', ['add', 'divide_no_nan', 'get_device', 'erf', 'grid_sample', 'conv', 'name',
                                     'solve_triangular_dense', 'csr_matrix', 'sparse_coo_tensor', 'linear_solve',
                                     'conjugate_gradient', 'bi_conjugate_gradient', 'solve_triangular_sparse',
                                     NUMPY.concat, NUMPY.tile_to, Backend.fft, np.absolute, NUMPY.csr_matrix])
def test_supports_implemented_operations(feature):
    assert NUMPY.supports(feature)


@pytest.mark.parametrize('feature', ['minimize', 'jacobian', 'hessian', 'jit_compile_hessian', 'jit_compile',
                                     'custom_gradient', 'variable', 'sparse_coo_tensor_batched', 'csr_matrix_batched',
                                     Backend.hessian, NUMPY.variable])
def test_supports_is_false_for_left_out_operations(feature):
    assert not NUMPY.supports(feature)


def test_missing_operation_raises_not_implemented_naming_backend_and_op():
    with pytest.raises(NotImplementedError, match="Backend 'numpy' does not implement 'csr_matrix_batched'"):
        NUMPY.csr_matrix_batched(None, None, None, (2, 2))
    with pytest.raises(NotImplementedError, match="Backend 'object' does not implement 'add'"):
        OBJECTS.add('a', 'b')
    assert not OBJECTS.supports('divide_no_nan')  # a composition of operations OBJECTS lacks


def test_fallbacks_run_but_are_not_supported():
    def f(x):
        return x
    assert NUMPY.jit_compile(f) is f and NUMPY.custom_gradient(f, f) is f


def test_supports_rejects_unknown_features():
    with pytest.raises(ValueError, match="Not a backend operation: 'nonsense'"):
        NUMPY.supports('nonsense')
    with pytest.raises(ValueError, match="Not a backend operation: 'print'"):
        NUMPY.supports(print)


def test_backend_tables_are_validated():
    class Broken(Backend):
        OPS = {'add': np.add, 'bogus': np.add}  # noqa: RUF012
    with pytest.raises(ValueError, match=r"Broken.OPS names operations that do not exist: \['bogus'\]"):
        Broken('broken', [])


def test_import_loads_no_heavy_library_and_scipy_only_on_first_use():
    code = textwrap.dedent("""
        import sys
        import lazyphi.backend as backend
        heavy = [m for m in ('scipy', 'torch', 'jax', 'tensorflow', 'dask', 'zarr') if m in sys.modules]
        assert not heavy, heavy
        backend.NUMPY.erf(0.5)
        import scipy.special
        assert backend.NUMPY.erf is scipy.special.erf
        assert 'scipy.sparse' not in sys.modules and not backend.NUMPY.is_sparse(backend.NUMPY.zeros((2, 2)))
        assert backend.NUMPY.get_sparse_format(backend.NUMPY.zeros((2, 2))) == 'dense'
        assert 'scipy.sparse' not in sys.modules
        assert backend.NUMPY.is_sparse(backend.NUMPY.csr_matrix([1], [0, 1], [2.0], (1, 1)))
    """)
    subprocess.run([sys.executable, '-c', code], check=True, cwd=os.path.dirname(os.path.dirname(__file__)))


def test_backends_pickle_by_name():
    assert pickle.loads(pickle.dumps(NUMPY)) is NUMPY
    assert pickle.loads(pickle.dumps(OBJECTS)) is OBJECTS


# --- choose_backend, lazy backends, defaults, convert ---

@pytest.mark.parametrize('values', [(1,), (1.5, True, 2j), ([1, 2.5],), ([[1], [2]],), (_X,), (np.float32(1), _X),
                                    (_X, 2.0, [1])])
def test_numbers_lists_and_arrays_choose_numpy(values):
    assert choose_backend(*values) is NUMPY


@pytest.mark.parametrize('values', [('a',), (None,), (np.array(['a', object()], object),), (_X, 'label'),
                                    (np.array(None), 2.0)])
def test_strings_none_and_object_arrays_choose_the_object_backend(values):
    assert choose_backend(*values) is OBJECTS


@pytest.mark.parametrize('value', [object(), Ellipsis, b'bytes', {1, 2}])
def test_unknown_objects_raise_no_backend_found(value):
    with pytest.raises(NoBackendFound, match=f'No registered backend accepts values of type .*{type(value).__name__}'):
        choose_backend(value)
    with pytest.raises(NoBackendFound, match=type(value).__name__):
        choose_backend(_X, value)
    assert choose_backend(_X) is NUMPY


def test_type_cache_does_not_confuse_array_dtypes():
    assert choose_backend(_X) is NUMPY
    assert choose_backend(np.array([None])) is OBJECTS
    assert choose_backend(_X) is NUMPY


def test_unknown_types_raise_no_backend_found_naming_them():
    with pytest.raises(NoBackendFound, match=r"No registered backend accepts values of type \['list'\]"):
        choose_backend([object()])
    with pytest.raises(TypeError, match="dict"):
        choose_backend({'a': 1}, 1.0)


@pytest.fixture
def restore_registry():
    backends, lazy = list(BACKENDS), dict(registry_module._lazy_backends)
    yield
    BACKENDS[:] = backends
    registry_module._lazy_backends.clear()
    registry_module._lazy_backends.update(lazy)
    registry_module._type_owners.clear()
    set_global_default_backend(NUMPY)


def _fake_native_type(module):
    return type('FakeArray', (), {'__module__': module})


def test_lazy_backend_is_imported_when_its_values_appear(tmp_path, monkeypatch, restore_registry):
    (tmp_path / 'fake_lazy_backend.py').write_text(textwrap.dedent("""
        from lazyphi.backend import Backend, register_backend
        class FakeBackend(Backend):
            OPS = {'is_tensor': lambda x, only_native=False: type(x).__module__.startswith('fakelib')}
        FAKE = register_backend(FakeBackend('fakelib', []))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    register_lazy_backend('fakelib', 'fake_lazy_backend')
    assert 'fake_lazy_backend' not in sys.modules
    assert choose_backend(1.0) is NUMPY and 'fake_lazy_backend' not in sys.modules
    chosen = choose_backend(_fake_native_type('fakelib.core')())
    assert chosen.name == 'fakelib' and 'fake_lazy_backend' in sys.modules
    assert BACKENDS[-1] is OBJECTS  # catch-all stays last
    sys.modules.pop('fake_lazy_backend')


def test_lazy_backend_with_missing_module_raises_no_backend_found(restore_registry):
    register_lazy_backend('fakelib', 'lazyphi.backend._no_such_module')
    with pytest.raises(NoBackendFound, match=r"'FakeArray' .*'fakelib.core'.* 'lazyphi.backend._no_such_module'"):
        choose_backend(_fake_native_type('fakelib.core')())


def test_lazy_backends_are_registered_for_the_array_libraries():
    loaded = {b.name for b in BACKENDS}  # an imported backend leaves the lazy registry (other tests import them)
    for prefix, name, path in [('torch', 'torch', 'lazyphi.backend.torch'), ('jaxlib', 'jax', 'lazyphi.backend.jax'),
                               ('tensorflow', 'tensorflow', 'lazyphi.backend.tensorflow')]:
        assert name in loaded or registry_module._lazy_backends.get(prefix) == path


def test_set_global_default_backend(restore_registry):
    assert set_global_default_backend('object') is OBJECTS and default_backend() is OBJECTS
    assert choose_backend(1.0, prefer_default=True) is OBJECTS and choose_backend(1.0) is NUMPY
    assert set_global_default_backend(NUMPY) is NUMPY and default_backend() is NUMPY
    with pytest.raises(ValueError, match=r"Unknown backend 'mxnet'. Known backend names: \[.*'numpy'.*'torch'"):
        set_global_default_backend('mxnet')
    register_lazy_backend('fakelib', 'lazyphi.backend._no_such_module')
    with pytest.raises(ValueError, match=r"'fakelib' needs the module 'lazyphi.backend._no_such_module'"):
        set_global_default_backend('fakelib')
    with pytest.raises(TypeError, match="Expected a Backend or a backend name but got int"):
        set_global_default_backend(3)


def test_ml_logger_records_default_backend_changes(restore_registry, caplog):
    assert isinstance(ML_LOGGER, logging.Logger) and ML_LOGGER.name == 'lazyphi' and not ML_LOGGER.handlers
    with caplog.at_level(logging.INFO, logger='lazyphi'):
        set_global_default_backend(OBJECTS)
        set_global_default_backend(OBJECTS)
        set_global_default_backend(NUMPY)
    assert [r.getMessage() for r in caplog.records] == ["lazyphi's default backend is now object",
                                                        "lazyphi's default backend is now numpy"]


@pytest.mark.skipif(importlib.util.find_spec('lazyphi.backend.torch') is not None, reason="torch backend exists")
def test_unresolvable_library_name_raises_value_error():
    with pytest.raises(ValueError, match=r"'torch' needs the module 'lazyphi.backend.torch'.*Known backend names"):
        set_global_default_backend('torch')


def test_backend_context_is_nestable_and_restored():
    assert context_backend() is None and default_backend() is NUMPY
    with NUMPY as entered:
        assert entered is NUMPY and context_backend() is NUMPY
        with OBJECTS:
            assert default_backend() is OBJECTS and choose_backend(1.0, prefer_default=True) is OBJECTS
        assert default_backend() is NUMPY
    assert context_backend() is None


def test_backend_context_exited_out_of_order_raises():
    NUMPY.__enter__()
    OBJECTS.__enter__()
    with pytest.raises(RuntimeError, match="must be exited in the reverse order"):
        NUMPY.__exit__(None, None, None)
    OBJECTS.__exit__(None, None, None)
    NUMPY.__exit__(None, None, None)


def test_backend_context_is_per_thread():
    seen = []
    with OBJECTS:
        thread = threading.Thread(target=lambda: seen.append((default_backend(), context_backend())))
        thread.start()
        thread.join()
    assert seen == [(NUMPY, None)]


class _Wrapped:
    def __init__(self, data):
        self.data = data


class _WrappingBackend(Backend):
    OPS = {  # noqa: RUF012
        'is_tensor': lambda x, only_native=False: isinstance(x, _Wrapped),
        'as_tensor': lambda x, convert_external=True: _Wrapped(np.array(x)),
        'from_dlpack': lambda capsule: _Wrapped(np.from_dlpack(capsule)),
        'numpy': lambda x: x.data,
    }


def test_convert(restore_registry):
    wrapping = register_backend(_WrappingBackend('wrapping', []))
    assert convert(_X) is _X and convert(3.0, 'numpy') == 3.0
    shared = convert(_X, wrapping)
    assert isinstance(shared, _Wrapped) and np.shares_memory(shared.data, _X)
    copied = convert(_X, wrapping, use_dlpack=False)
    assert not np.shares_memory(copied.data, _X)
    assert_same(copied.data, _X)
    assert convert(shared, NUMPY) is shared.data
    assert_same(convert(np.array([1.5]), OBJECTS), np.array([1.5], object))


# --- devices ---

def test_numpy_has_one_cpu_device_with_real_properties():
    devices = NUMPY.list_devices()
    assert devices == [_CPU] and NUMPY.get_default_device() is _CPU and _CPU.backend is NUMPY
    assert _CPU.device_type == 'CPU' and _CPU.processor_count == os.cpu_count() and _CPU.memory > 2 ** 20
    description = _CPU.description if len(_CPU.description) <= 30 else _CPU.description[:28] + '...'
    assert repr(_CPU) == (f"numpy device 'CPU' (CPU 'CPU') | {_CPU.memory / 1024 ** 2:.0f} MB | "
                          f"{os.cpu_count()} processors | {description}")  # phiml's layout
    assert NUMPY.list_devices('GPU') == [] and NUMPY.devices == (_CPU,)
    assert NUMPY.list_devices('cpu') == [_CPU] and NUMPY.list_devices('gpu') == []  # as torch users write them
    assert hash(_CPU) == hash('CPU') and OBJECTS.list_devices()[0] == _CPU


def test_device_errors():
    with pytest.raises(ValueError, match=r"'CPU', 'GPU', 'TPU' \(in any case\) or None but got 'XPU'"):
        NUMPY.list_devices('XPU')
    with pytest.warns(RuntimeWarning, match="numpy has no 'GPU' device"):
        assert NUMPY.set_default_device('GPU') is False
    with pytest.raises(ValueError, match="Device 'CPU' belongs to backend object, not numpy"):
        NUMPY.set_default_device(OBJECTS.list_devices()[0])
    with pytest.raises(ValueError, match="Device 'CPU' belongs to backend object, not numpy"):
        NUMPY.allocate_on_device(_X, OBJECTS.list_devices()[0])
    with pytest.raises(KeyError, match="numpy has no device with ref 'GPU:0'"):
        NUMPY.get_device_by_ref('GPU:0')
    with pytest.raises(ValueError, match="device_type must be 'CPU', 'GPU' or 'TPU' but got 'FPGA'"):
        ComputeDevice(NUMPY, 'x', 'FPGA', -1, -1, '', 'x')


# --- the object backend ---

def test_solve_triangular_dense_reads_one_triangle():
    matrix = np.array([[[2., 9, 9], [1, 4, 9], [3, 1, 5]]])
    rhs = np.array([[2., 9, 11]])
    lower = NUMPY.solve_triangular_dense(matrix, rhs, True, False)
    assert_same(lower, np.linalg.solve(np.tril(matrix), rhs[..., None])[..., 0])
    unit = np.triu(matrix, 1) + np.eye(3)
    assert_same(NUMPY.solve_triangular_dense(matrix, rhs, False, True), np.linalg.solve(unit, rhs[..., None])[..., 0])
    assert NUMPY.solve_triangular_dense(matrix.astype(np.float16), rhs, True, False).dtype == np.float64
    assert NUMPY.solve_triangular_dense(matrix.astype(np.float16), rhs.astype(np.float16), True, False).dtype == \
        np.float16


def test_sizeof_counts_bytes_and_refuses_strings():
    assert NUMPY.sizeof(np.zeros((2, 3), np.int32)) == 24 and OBJECTS.sizeof(np.array([None, 'a'])) == 16
    with pytest.raises(ValueError, match="Elements of type str have no fixed size in bytes"):
        OBJECTS.sizeof('abc')


def test_object_backend_stores_and_compares_objects():
    assert OBJECTS.is_tensor('a', True) and OBJECTS.is_tensor(None, True) and not OBJECTS.is_tensor(1.0, True)
    assert not OBJECTS.is_tensor([1]) and OBJECTS.is_tensor(np.array([None]), True)
    stacked = OBJECTS.stack(['a', None, 3])
    assert stacked.dtype == object and stacked.shape == (3,) and list(stacked) == ['a', None, 3]
    assert OBJECTS.concat([stacked, OBJECTS.stack([(1, 2)])], 0).shape == (4,)
    assert OBJECTS.staticshape('abc') == () and OBJECTS.ndims(None) == 0 and OBJECTS.shape(stacked) == (3,)
    assert OBJECTS.dtype('abc') == DType(str) and OBJECTS.dtype(None) == DType(object)
    assert OBJECTS.equal('a', 'a') is True
    assert_same(OBJECTS.equal(stacked, 'a'), np.array([True, False, False]))
    assert OBJECTS.reshape(stacked, (1, 3)).shape == (1, 3)


# --- data types ---

def test_dtype_basics():
    assert repr(DType(float, 32)) == 'float32' and repr(DType(int, 8, unsigned=True)) == 'uint8'
    assert repr(DType(bool)) == 'bool' and repr(DType(str)) == 'str' and DType(object).bits == 64
    assert DType(complex, 128).itemsize == 16 and DType(complex, 128).precision == 64
    assert DType(float, 16).precision == 16 and DType(int, 64).precision is None and DType(str).itemsize is None
    assert DType(float, 32) == DType(float, 32) and len({DType(float, 32), DType(float, 32), DType(int, 32)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        DType(float, 32).bits = 64


def test_dtype_as_dtype():
    assert DType.as_dtype(float) == DType(float, 32) and DType.as_dtype(int) == DType(int, 32)
    with precision(64):
        assert DType.as_dtype(float) == DType(float, 64) and DType.as_dtype(complex) == DType(complex, 128)
    assert DType.as_dtype('float16') == DType(float, 16) and DType.as_dtype(np.uint16) == DType(int, 16, True)
    assert DType.as_dtype(np.dtype('int64')) == DType(int, 64) and DType.as_dtype(bool) == DType(bool)
    assert DType.as_dtype(DType(int, 8)) == DType(int, 8) and DType.as_dtype('U5') == DType(str)
    assert DType.as_dtype((int, 8)) == DType(int, 8) and DType.as_dtype((complex, 128)) == DType(complex, 128)
    assert DType.as_dtype(None) is None


def test_dtypes_of_every_array_library_are_accepted_where_dtypes_are(backend):
    """`DType.as_dtype` and `math.cast` take PyTorch, JAX and TensorFlow dtypes as well as NumPy's."""
    library = importlib.import_module({'numpy': 'numpy', 'torch': 'torch', 'jax': 'jax.numpy',
                                       'tensorflow': 'tensorflow'}[backend.name])
    expected = {'float16': DType(float, 16), 'float64': DType(float, 64), 'int16': DType(int, 16),
                'uint8': DType(int, 8, True), 'complex64': DType(complex, 64), 'bool_': DType(bool)}
    t = lmath.tensor(np.arange(3), lmath.spatial('x'))
    for name, dtype in expected.items():
        native_dtype = getattr(library, name if hasattr(library, name) else name.rstrip('_'))
        assert DType.as_dtype(native_dtype) == dtype, (backend, name)
        cast = lmath.cast(t, native_dtype)
        assert cast.dtype == dtype and cast.backend is backend
    if backend.name == 'torch':
        with pytest.raises(ValueError, match=r'bfloat16 has no (lazyphi|DType) equivalent'):
            DType.as_dtype(library.bfloat16)


def test_dtype_by_precision():
    assert DType(float, precision=16) == DType(float, 16) and DType(float, precision=64) == DType(float, 64)
    assert DType(complex, precision=32) == DType(complex, 64) and DType(complex, precision=64) == DType(complex, 128)
    assert DType(complex, precision=16) == DType(complex, 64)  # complex types have at least 32 bits per part
    assert dataclasses.replace(DType(float, precision=32), bits=64) == DType(float, 64)
    assert pickle.loads(pickle.dumps(DType(complex, precision=32))) == DType(complex, 64)


def test_dtype_errors_name_the_value():
    with pytest.raises(ValueError, match=r"float DTypes support bits .* not 8"):
        DType(float, 8)
    with pytest.raises(ValueError, match=r"DType kind must be one of .* but got <class 'list'>"):
        DType(list)
    with pytest.raises(ValueError, match="Only int DTypes can be unsigned, not float"):
        DType(float, 32, unsigned=True)
    with pytest.raises(ValueError, match="Not a data type name: 'float13'"):
        DType.as_dtype('float13')
    with pytest.raises(TypeError, match=r"Cannot interpret 3.5 as a DType"):
        DType.as_dtype(3.5)
    with pytest.raises(ValueError, match=r"DType.as_dtype\(str\) is ambiguous.*DType\(str\)"):
        DType.as_dtype(str)
    for kind in (bool, int, object, str):
        with pytest.raises(ValueError, match=f"to float and complex DTypes only, not {kind.__name__}"):
            DType(kind, precision=16)
    with pytest.raises(ValueError, match="Give bits or precision, not both"):
        DType(float, 32, precision=32)
    with pytest.raises(ValueError, match=r"float DTypes support bits .* not 8"):
        DType(float, precision=8)
    with pytest.raises(ValueError, match="NumPy dtype datetime64 has no lazyphi equivalent"):
        from_numpy_dtype(np.dtype('datetime64'))


def test_dtype_bit_layouts():
    """DType takes the reference's seven fields; the standard layouts are filled in and compare equal."""
    assert DType(float, 32, False, 8, 23, False, False) == DType(float, 32)
    assert DType(int, 16, True, 0, 16, True, True) == DType(int, 16, unsigned=True)
    assert DType(bool) == DType(bool, 8, True, 0, 1, True, True) and DType(bool).unsigned
    assert (DType(float, 64).exponent_bits, DType(float, 64).mantissa_bits) == (11, 52)
    assert (DType(complex, 64).exponent_bits, DType(complex, 64).mantissa_bits) == (8, 23)
    assert DType(int, 8).unsigned is False and DType(int, 8, True) == from_numpy_dtype(np.dtype('uint8'))
    e4m3 = DType(float, 8, False, 4, 3, True, False)
    assert repr(e4m3) == 'float8_e4m3fn' and not e4m3.is_standard and DType(float, 16).is_standard
    assert e4m3 != DType(float, 8, False, 5, 2, False, False) and len({e4m3, DType(float, 16)}) == 2
    assert DType(float, 3, False, 1, 2, True, True).itemsize == 3 / 8 and DType.as_dtype((float, 8, False, 4, 3, True,
                                                                                            False)) == e4m3
    assert dataclasses.replace(e4m3, bits=16) == DType(float, 16)  # replace takes the new size's layout
    assert pickle.loads(pickle.dumps(e4m3)) == e4m3


def test_dtype_layout_errors_name_the_value():
    with pytest.raises(TypeError, match=r"give all of exponent_bits.*or none"):
        DType(float, 8, False, 4)
    with pytest.raises(ValueError, match=r"only float and complex DTypes take a bit layout of their own"):
        DType(int, 8, False, 1, 7, True, True)
    with pytest.raises(ValueError, match=r"bits must be a positive int"):
        DType(float, 0, False, 0, 0, True, True)
    with pytest.raises(ValueError, match=r"mantissa_bits must be an int >= 0, got -1"):
        DType(float, 8, False, 4, -1, True, True)
    with pytest.raises(TypeError, match=r"finite_only must be a bool, got 'yes'"):
        DType(float, 8, False, 4, 3, 'yes', True)
    with pytest.raises(ValueError, match=r"bool DTypes are unsigned, got unsigned=False"):
        DType(bool, 8, False)
    with pytest.raises(UnsupportedDType, match=r"No backend has a data type float8_e4m3fn"):
        to_numpy_dtype(DType(float, 8, False, 4, 3, True, False))


def test_cast_to_a_dtype_no_backend_has(backend):
    """The reference raises a KeyError here; UnsupportedDType is that and a ValueError."""
    x = backend.as_tensor(np.ones(3, np.float32))
    for error in (KeyError, ValueError):
        with pytest.raises(error, match='float3_e1m2fnuz'):
            backend.cast(x, DType(float, 3, False, 1, 2, True, True))


@pytest.mark.parametrize('name', ['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint64', 'float16',
                                  'float32', 'float64', 'complex64', 'complex128', 'object'])
def test_numpy_dtype_round_trip(name):
    dtype = from_numpy_dtype(np.dtype(name))
    assert to_numpy_dtype(dtype) == np.dtype(name) and repr(dtype) == name


@pytest.mark.parametrize('dtypes, fp_precision, expected', [
    ((DType(bool), DType(bool)), None, DType(bool)),
    ((DType(bool), DType(int, 8)), None, DType(int, 8)),
    ((DType(int, 64), DType(float, 16)), None, DType(float, 16)),
    ((DType(float, 32), DType(float, 64)), None, DType(float, 64)),
    ((DType(float, 32), DType(int, 64)), 64, DType(float, 64)),
    ((DType(float, 64), DType(complex, 64)), None, DType(complex, 128)),
    ((DType(float, 64), DType(complex, 128)), 16, DType(complex, 64)),
    ((DType(int, 8), DType(int, 8, True)), None, DType(int, 16)),
    ((DType(int, 8, True), DType(int, 16, True)), None, DType(int, 16, True)),
    ((DType(str), DType(str)), None, DType(str)),
    ((DType(str), DType(int, 32)), None, DType(object)),
])
def test_combine_types(dtypes, fp_precision, expected):
    assert combine_types(*dtypes, fp_precision=fp_precision) == expected


def test_combine_types_needs_an_input():
    with pytest.raises(ValueError, match="needs at least one DType"):
        combine_types()


# --- precision ---

def test_precision_context_and_global_setting():
    assert get_precision() == 32 and NUMPY.float_type == DType(float, 32) and NUMPY.complex_type == DType(complex, 64)
    with precision(64):
        assert get_precision() == 64 and NUMPY.precision == 64 and NUMPY.complex_type == DType(complex, 128)
        with precision(16):
            assert get_precision() == 16 and NUMPY.complex_type == DType(complex, 64)
        assert get_precision() == 64
    set_global_precision(64)
    try:
        assert get_precision() == 64
        with precision(32):
            assert get_precision() == 32
    finally:
        set_global_precision(32)
    assert get_precision() == 32


@pytest.mark.parametrize('bits', [8, 128, None, True, '32'])
def test_invalid_precision_raises_value_error_naming_it(bits):
    if bits is not None:  # the global setting takes None (phiml's "keep the inputs' precision"); a block does not
        with pytest.raises(ValueError, match=f"must be one of \\(16, 32, 64\\) bits but got {bits!r}"):
            set_global_precision(bits)
    with pytest.raises(ValueError, match=f"but got {bits!r}"), precision(bits):
        pass


def test_global_precision_none_makes_new_floats_32_bit():
    set_global_precision(64)
    try:
        set_global_precision(None)
        assert get_precision() == 32 and NUMPY.float_type == DType(float, 32)
        assert NUMPY.dtype(NUMPY.random_normal((2,), NUMPY.float_type)) == DType(float, 32)
    finally:
        set_global_precision(32)


def test_precision_is_independent_per_thread_and_task():
    seen = {}

    def worker():
        seen['start'] = get_precision()
        with precision(16):
            seen['inside'] = get_precision()
    with precision(64):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert get_precision() == 64
    assert seen == {'start': 32, 'inside': 16}

    async def task(bits):
        with precision(bits):
            await asyncio.sleep(0.01)
            return get_precision()

    async def both():
        return await asyncio.gather(task(16), task(64))
    assert asyncio.run(both()) == [16, 64]
