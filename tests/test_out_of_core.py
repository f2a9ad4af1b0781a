"""Reductions of disk-backed and dask-backed selections too large to load at once: piece by piece.

The limit is lowered for the tests, so that small stores take the path a large result takes. Every case checks
the values against the same reduction of the loaded values, and that no piece larger than the limit (or than
one chunk where a chunk is larger) was in memory at any time.
"""

import contextlib

import dask.array as da
import numpy as np
import pytest
from backends import BACKEND_NAMES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_storage_disk import _write_result

from lazyphi import math
from lazyphi.math import batch, channel, spatial
from lazyphi.parallel import _dask_tensor
from lazyphi.storage import _disk, _out_of_core, clear_memory_cache, disk_tensor, load_cache_as

DATA = np.random.default_rng(1).standard_normal((12, 10, 3)).astype(np.float32)
DATA[2, 3, 1] = np.nan  # for the finite_* reductions
SHAPE = batch(time=12) & spatial(x=10) & channel(c=3)
CHUNK = 3  # along time: the array's chunks are (3, 10, 3), 360 bytes each
LIMIT = 800  # bytes: two chunks per piece
REDUCTIONS = ['sum', 'prod', 'max', 'min', 'any', 'all', 'mean', 'std', 'finite_sum', 'finite_max', 'finite_min',
              'finite_mean', 'finite_std']


@contextlib.contextmanager
def limit(nbytes: int):
    """Selections over `nbytes` are reduced piece by piece; records the bytes of each piece read from disk."""
    original, read = _out_of_core.OUT_OF_CORE_BYTES, _disk.read_selection
    pieces = []

    def recording(info, selection):
        values = read(info, selection)
        pieces.append(values.nbytes)
        return values
    _out_of_core.OUT_OF_CORE_BYTES, _disk.read_selection = nbytes, recording
    try:
        yield pieces
    finally:
        _out_of_core.OUT_OF_CORE_BYTES, _disk.read_selection = original, read


@pytest.fixture(scope='module')
def group(tmp_path_factory):
    return _write_result(tmp_path_factory.mktemp('ooc'), 'k', {'values': (DATA, SHAPE, CHUNK)})


@pytest.fixture(autouse=True)
def fresh_memory():
    clear_memory_cache()
    yield
    clear_memory_cache()


def _reduce(name: str, value, dims):
    return getattr(math, name)(value, dims)


def _same(actual, expected, **tolerance) -> None:
    names = expected.shape.names
    np.testing.assert_allclose(np.asarray(actual.numpy(names), np.float64),
                               np.asarray(expected.numpy(names), np.float64), **tolerance)


SELECTIONS = st.fixed_dictionaries({
    'time': st.builds(slice, st.integers(0, 4), st.integers(8, 12), st.sampled_from([1, 2, 4])),
    'x': st.sampled_from([slice(None), slice(1, 9, 3), slice(None, None, -1), slice(8, 1, -2)]),
})


@pytest.mark.parametrize('backend', BACKEND_NAMES)
@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(REDUCTIONS), dims=st.sampled_from(['time', 'x', 'c', 'time,x', 'x,c', 'time,x,c']),
       selection=SELECTIONS)
def test_a_large_selection_is_reduced_piece_by_piece_to_the_values_of_reducing_it_loaded(
        group, backend, name, dims, selection):
    values = disk_tensor(group, 'values')[selection]
    with load_cache_as(backend):
        expected = _reduce(name, math.tensor(values.numpy(values.shape.names), values.shape), dims)
        clear_memory_cache()
        with limit(LIMIT) as pieces:
            result = _reduce(name, values, dims)
        assert result.backend.name == backend
        if values.shape.volume * DATA.itemsize > LIMIT:
            assert len(pieces) > 1 and max(pieces) <= LIMIT
            assert not values.available  # nothing was kept in the memory cache
        else:  # loaded at once, as any other operation loads it
            assert len(pieces) == 1 and values.available
    _same(result, expected, rtol=1e-5, atol=1e-5)


def test_a_reduction_along_a_kept_dim_joins_the_pieces_bit_for_bit(group):
    values = disk_tensor(group, 'values')
    expected = math.sum(math.tensor(DATA, SHAPE), 'x')
    with limit(LIMIT) as pieces:
        result = math.sum(values, 'x')
    assert len(pieces) == 2
    np.testing.assert_array_equal(result.numpy('time,c'), expected.numpy('time,c'))


def test_a_piece_is_one_chunk_where_a_chunk_is_larger_than_the_limit(group):
    with limit(100) as pieces:
        result = math.mean(disk_tensor(group, 'values'), 'time,x')
    assert pieces == [DATA[:CHUNK].nbytes] * 4
    _same(result, math.mean(math.tensor(DATA, SHAPE), 'time,x'), rtol=1e-6)


def test_a_selection_within_the_limit_or_in_memory_is_reduced_as_loaded_and_stays_in_memory(group):
    values = disk_tensor(group, 'values')
    with limit(DATA.nbytes) as pieces:
        first = math.sum(values, 'time')
        assert values.available and len(pieces) == 1
    with limit(LIMIT) as pieces:
        second = math.sum(values, 'time')  # in memory already: no piece is read
    assert pieces == []
    np.testing.assert_array_equal(first.numpy('x,c'), second.numpy('x,c'))


def test_a_selection_of_single_indices_per_chunk_is_cut_between_them(group):
    values = disk_tensor(group, 'values').time[(11, 0, 4, 5, 1)]
    with limit(150) as pieces:
        result = math.max(values, 'time,c')
    assert pieces == [120, 120, 240, 120]  # the runs (11), (0), (4, 5) and (1) each lie in one chunk
    _same(result, math.max(math.tensor(DATA[[11, 0, 4, 5, 1]], batch(time=5) & spatial(x=10) & channel(c=3)), 'time,c'))


def test_a_large_dask_backed_selection_is_computed_and_reduced_piece_by_piece(monkeypatch):
    array = da.from_array(DATA, chunks=((2, 4, 6), (5, 5), (3,)))
    computed = []
    original = _dask_tensor.DaskTensor._compute

    def recording(self):
        values = original(self)
        computed.append(values.nbytes)
        return values
    monkeypatch.setattr(_dask_tensor.DaskTensor, '_compute', recording)
    monkeypatch.setattr(_out_of_core, 'OUT_OF_CORE_BYTES', LIMIT)
    value = math.tensor(array, SHAPE)
    for name in REDUCTIONS:
        computed.clear()
        result = _reduce(name, value, 'time,c')
        # cut along x, which is kept: 5 of its 10 elements in each piece (one pass per reduction: finite_* but
        # finite_mean count the finite values in a second one)
        assert computed == [720, 720] * (2 if name.startswith('finite') and name != 'finite_mean' else 1), name
        _same(result, _reduce(name, math.tensor(DATA, SHAPE), 'time,c'), rtol=1e-5, atol=1e-6)
    assert not value.available
