"""What a result costs in memory (issue #35 part 4): slicing a `Joined` result of more than 64 blocks touches only
the blocks it selects, and a run with `cache_dir` but no `memory_limit` keeps at most `KEPT_BYTES` of results.

Before, a `Joined` of over 64 parts materialised the whole concatenation on every slice (16 reads of one example
of a 128 MiB result: 1 s and 128 MiB each), and every result came back whole in memory.
"""

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.math.kinds import Dense, Joined
from lazyphi.parallel import _engine, _plan, parallel_compute
from lazyphi.storage import DiskTensor

PARTS = 100  # more than Joined.PART_LIMIT


@pytest.fixture
def never_materialised(monkeypatch):
    """Joined tensors of more than PART_LIMIT parts raise where they would build their whole concatenation (a
    selection of a few parts may be joined to read it)."""
    materialise = Joined._dense

    def refuse(self):
        if len(self.parts) > Joined.PART_LIMIT:
            raise AssertionError(f'a joined tensor of {len(self.parts)} parts was materialised')
        return materialise(self)
    monkeypatch.setattr(Joined, '_dense', refuse)


class Untouchable(Tensor):
    """A part that fails the test when any operation, or materialising, reaches it."""

    _kind_priority = 1

    def __init__(self, like: Tensor):
        self._like = like

    @property
    def shape(self):
        return self._like.shape

    @property
    def dtype(self):
        return self._like.dtype

    @property
    def backend(self):
        return self._like.backend

    def _dense(self):
        raise AssertionError(f'a part that was not selected was read: {self.shape}')

    @classmethod
    def __handle__(cls, op, tensors, params):
        raise AssertionError(f'{op.name} reached a part that was not selected')


def _joined(sizes=(3,) * PARTS, needed=None):
    """A Joined tensor of parts of `sizes` along 'e', and the same values whole; parts not in `needed` (a set of
    part numbers, None: all) fail when touched."""
    values = np.arange(sum(sizes) * 2, dtype=np.float32).reshape(-1, 2)
    whole = math.tensor(values, batch('e'), spatial('x'))
    bounds = np.cumsum((0, *sizes))
    parts = [math.tensor(values[a:b], batch('e'), spatial('x')) for a, b in itertools.pairwise(bounds)]
    parts = [p if needed is None or i in needed else Untouchable(p) for i, p in enumerate(parts)]
    return Joined(parts, 'e'), whole


@pytest.mark.parametrize('item,needed', [
    (5, {1}), (slice(7, 8), {2}), (slice(2, 10), {0, 1, 2, 3}), (slice(150, 152), {50}), ((7, 8, 299, 0), {2, 99, 0}),
    (slice(0, 12, 4), {0, 1, 2, 3}), (slice(None, None, -97), {99, 67, 35, 2})])
def test_slicing_a_joined_tensor_of_many_parts_touches_only_the_parts_it_selects(never_materialised, item, needed):
    joined, whole = _joined(needed=needed)
    for selection in ({'e': item}, {'e': item, 'x': 1}):
        result, expected = joined[selection], whole[selection]
        assert result.shape == expected.shape
        pieces = result.parts if isinstance(result, Joined) else (result,)
        np.testing.assert_array_equal(np.concatenate([np.reshape(p.numpy(expected.shape), (-1,)) for p in pieces]),
                                      np.reshape(expected.numpy(expected.shape), (-1,)))


def test_slicing_another_dim_or_renaming_keeps_the_many_parts_apart(never_materialised):
    joined, whole = _joined()
    sliced = joined.x[1]
    assert isinstance(sliced, Joined) and len(sliced.parts) == PARTS
    renamed = math.rename_dims(joined, 'e', 'f')
    assert isinstance(renamed, Joined) and len(renamed.parts) == PARTS
    math.assert_close(renamed.f[200], whole.e[200])


def test_parts_of_unequal_sizes_are_found_by_offset(never_materialised):
    joined, whole = _joined(sizes=(1, 5, 2, 7) * 20)
    for i in (0, 1, 5, 6, 7, 8, 14, 15, 299):
        math.assert_close(joined.e[i], whole.e[i])
    math.assert_close(joined.e[3:17], whole.e[3:17])


@dataclass(frozen=True)
class Rows:
    data: Tensor

    @cached_property
    def doubled(self) -> Tensor:
        return self.data * 2


def test_reading_examples_of_a_result_of_many_blocks_materialises_nothing(never_materialised, tmp_path, monkeypatch):
    monkeypatch.setattr(_engine, 'JOIN_COPY_BYTES', 0)  # as a result too large to be joined into one array
    rows = Rows(math.tensor(np.arange(PARTS * 4, dtype=np.float64).reshape(PARTS, 4), batch('example'), spatial('x')))
    parallel_compute(rows, [Rows.doubled], cache_dir=str(tmp_path), block_size=1, scheduler='sync')
    assert isinstance(rows.doubled, Joined) and len(rows.doubled.parts) == PARTS
    for i in range(0, PARTS, 7):
        np.testing.assert_array_equal(rows.doubled.example[i].numpy(), np.arange(4 * i, 4 * i + 4) * 2)


@pytest.mark.parametrize('cache', [False, True], ids=['in memory', 'written and kept in memory'])
def test_a_small_result_of_many_blocks_comes_back_as_one_array(tmp_path, cache, backend):
    """Parts of a few bytes each are joined when assembled (`JOIN_COPY_BYTES`): a `Joined` of more than PART_LIMIT
    parts would build its concatenation again for every operation."""
    values = np.arange(PARTS * 4, dtype=np.float64).reshape(PARTS, 4)
    rows = Rows(math.tensor(values, batch('example'), spatial('x'), convert=True))
    parallel_compute(rows, [Rows.doubled], block_size=1, scheduler='sync', cache_dir=str(tmp_path) if cache else None)
    assert type(rows.doubled) is Dense and rows.doubled.shape == rows.data.shape
    assert rows.doubled.backend.name == backend.name
    np.testing.assert_array_equal(rows.doubled.numpy('example,x'), values * 2)
    few = Rows(rows.data.example[:Joined.PART_LIMIT])  # parts that a Joined works on one by one stay apart
    parallel_compute(few, [Rows.doubled], block_size=1, scheduler='sync')
    assert isinstance(few.doubled, Joined) and len(few.doubled.parts) == Joined.PART_LIMIT


def test_without_memory_limit_results_beyond_the_kept_bytes_come_back_disk_backed(tmp_path, monkeypatch):
    monkeypatch.setattr(_plan, 'KEPT_BYTES', 3000)  # 2 KiB results: the larger goes to disk, the smaller stays

    @dataclass(frozen=True)
    class Two:
        data: Tensor

        @cached_property
        def small(self) -> Tensor:
            return self.data[{'x': slice(0, 2)}] + 1

        @cached_property
        def large(self) -> Tensor:
            return self.data * 2

    two = Two(math.tensor(np.ones((64, 4)), batch('example'), spatial('x')))  # large: 2 KiB, small: 1 KiB
    p = parallel_compute(two, [Two.small, Two.large], cache_dir=str(tmp_path), scheduler='sync')
    assert isinstance(two.large, DiskTensor) and not isinstance(two.small, DiskTensor)
    assert p.memory_bound is not None and p.memory_bound <= 3000 + 2048  # kept, plus the blocks running
    assert 'large comes back disk-backed' in str(p) and 'no memory_limit' in str(p)
    math.assert_close(two.large, 2)
    math.assert_close(two.small, 2)
