"""Bad arguments to the storage, cache, save and load API raise errors naming them; none is accepted silently.

Item 9 of issue #18: `cache_dir=''` wrote into the working directory, `memory_limit=-5` and `nan` were accepted
and '1GiB' gave an unhelpful TypeError, `Shape * 'nonsense'` was accepted. The other cases were found probing
the same API: flags given as strings, empty paths, negative ages for `delete_results`, and cache listing that
counted saves as results (and so deleted them).
"""

import os
from dataclasses import dataclass
from datetime import timedelta

import pytest

import lazyphi
from lazyphi import cache, math
from lazyphi.dataclasses import cached_property
from lazyphi.math import batch
from lazyphi.parallel import plan
from lazyphi.storage import set_cache_ttl
from lazyphi.storage._arguments import check_cache_dir, parse_bytes


@dataclass(frozen=True)
class Doubling:
    x: math.Tensor

    @cached_property
    def y(self) -> math.Tensor:
        return self.x * 2


@pytest.mark.parametrize(('text', 'size'), [
    ('1GiB', 2 ** 30), ('500MB', 500 * 10 ** 6), ('1.5 gb', 1_500_000_000), ('2e9', 2 * 10 ** 9), ('128kB', 128_000),
    ('64 KiB', 65536), ('100', 100), ('7 B', 7), ('MiB', 2 ** 20), (2 ** 20, 2 ** 20), (1.5e3, 1500), (0, 0)])
def test_byte_sizes_are_read_as_dask_writes_them(text, size):
    assert parse_bytes(text) == size


@pytest.mark.parametrize(('value', 'error'), [
    (-5, ValueError), (float('nan'), ValueError), (float('inf'), ValueError), ('-1GB', ValueError),
    ('1 parsec', ValueError), ('', ValueError), ('GiB GiB', ValueError), (True, TypeError), (None, TypeError),
    ([1], TypeError)])
def test_bad_byte_sizes_raise_naming_them(value, error):
    with pytest.raises(error, match='memory_limit'):
        parse_bytes(value)


def test_plan_takes_byte_strings_and_checks_memory_limit_and_cache_dir(tmp_path, monkeypatch):
    instance = Doubling(math.zeros(batch(b=4)))
    chosen = plan(instance, [Doubling.y], cache_dir=str(tmp_path), memory_limit='1GiB')
    assert chosen.memory_limit == 2 ** 30
    for bad in (-5, float('nan'), 'lots'):
        with pytest.raises(ValueError, match='memory_limit'):
            plan(instance, [Doubling.y], cache_dir=str(tmp_path), memory_limit=bad)
    (tmp_path / 'file').write_text('')
    monkeypatch.chdir(tmp_path)
    for bad, error in [('', ValueError), (' ', ValueError), (5, TypeError), (b'dir', TypeError),
                       (str(tmp_path / 'file'), ValueError)]:
        with pytest.raises(error, match='cache_dir'):
            plan(instance, [Doubling.y], cache_dir=bad)
    assert check_cache_dir('.') == str(tmp_path)


@pytest.mark.parametrize('dtype', ['nonsense', 3, None, [float]])
def test_a_shape_times_a_non_dtype_raises(dtype):
    with pytest.raises(TypeError, match='data type'):
        _ = batch(b=2) * dtype
    with pytest.raises(TypeError, match='data type'):
        _ = dtype * batch(b=2)


def test_a_shape_times_a_dtype_is_a_placeholder():
    assert (batch(b=2) * float).dtype is float and (batch(b=2) * 'int64').dtype == 'int64'


@pytest.mark.parametrize(('call', 'error'), [
    (lambda p: lazyphi.save({'a': 1}, ''), ValueError),
    (lambda p: lazyphi.save({'a': 1}, 5), TypeError),
    (lambda p: lazyphi.save({'a': 1}, p / 'new', overwrite='no'), TypeError),
    (lambda p: lazyphi.save({'a': 1}, p / 'new', include_cache=1), TypeError),
    (lambda p: lazyphi.load(''), ValueError),
    (lambda p: lazyphi.load(p / 'save', lazy='no'), TypeError),
    (lambda p: lazyphi.load(p / 'save', data=None), TypeError),
    (lambda p: lazyphi.load(p / 'save', item=''), TypeError),
    (lambda p: lazyphi.load(p / 'save', item=1.5), TypeError),
    (lambda p: set_cache_ttl(True), TypeError),
    (lambda p: set_cache_ttl('10'), TypeError),
    (lambda p: set_cache_ttl(-1), ValueError),
    (lambda p: cache.delete_results(str(p), older_than=-1), ValueError),
    (lambda p: cache.delete_results(str(p), older_than=float('nan')), ValueError),
    (lambda p: cache.delete_results(str(p), older_than='a week'), TypeError),
    (lambda p: cache.delete_results(str(p), keys=5), TypeError),
    (lambda p: cache.delete_results(str(p), keys=[None]), TypeError),
], ids=lambda c: getattr(c, '__name__', str(c)))
def test_bad_arguments_raise_and_change_nothing(tmp_path, call, error):
    lazyphi.save({'a': 1}, tmp_path / 'save')
    try:
        with pytest.raises(error):
            call(tmp_path)
    finally:
        set_cache_ttl(None)
    assert sorted(os.listdir(tmp_path)) == ['save'] and lazyphi.load(tmp_path / 'save') == {'a': 1}


def test_saves_in_a_cache_dir_are_no_results(tmp_path):
    lazyphi.save({'a': 1}, tmp_path / 'mine')
    assert cache.list_results(str(tmp_path)) == []
    assert cache.delete_results(str(tmp_path), older_than=timedelta(0)) == []
    assert lazyphi.load(tmp_path / 'mine') == {'a': 1}
