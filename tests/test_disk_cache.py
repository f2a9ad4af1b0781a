"""parallel_compute with cache_dir / memory_limit: outputs in Zarr, lazy disk-backed results, resumable runs."""

import hashlib
import json
import os
import pickle
from dataclasses import dataclass

import numpy as np
import pytest

from lazyphi import cache, math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, spatial
from lazyphi.parallel import PropertyFailed, parallel_compute, parallel_property, plan
from lazyphi.storage import DiskTensor, ReplacedOnDisk, get_cache_files, on_load_into_memory

DATA = math.random_normal(batch(example=32), spatial(x=8, y=8))
COMPUTED = []  # (property, block size) of every evaluation on real data


@dataclass(frozen=True)
class Pipeline:
    data: Tensor
    offset: float = 1.0
    fail_marker: str = ''

    @cached_property
    def shifted(self) -> Tensor:
        if self.data.available:
            COMPUTED.append(('shifted', self.data.shape.get_size('example')))
            if self.fail_marker and os.path.exists(self.fail_marker) and float(math.max(self.data, lambda s: s)) > 2.5:
                raise RuntimeError('interrupted')
        return self.data + self.offset

    @parallel_property(requires=batch)
    def centre(self) -> Tensor:
        return math.mean(self.shifted, batch)

    @cached_property
    def centred(self) -> Tensor:
        return self.shifted - self.centre


def run(instance, *props, **kwargs):
    return parallel_compute(instance, list(props), scheduler='sync', progress=False, **kwargs)


def test_cache_dir_writes_requested_outputs_and_keeps_those_within_the_memory_limit_in_memory(tmp_path):
    p = Pipeline(DATA)
    done = run(p, Pipeline.shifted, cache_dir=str(tmp_path))  # no memory_limit: everything fits
    assert 'to disk and kept in memory' in str(done)
    assert not isinstance(p.shifted, DiskTensor) and p.shifted.available
    math.assert_close(p.shifted, DATA + 1)
    (info,) = cache.list_results(str(tmp_path))
    assert info.complete and 'shifted' in info.properties
    resumed = Pipeline(DATA)
    COMPUTED.clear()
    run(resumed, Pipeline.shifted, cache_dir=str(tmp_path))
    assert COMPUTED == [] and resumed.shifted.available  # read from disk, into memory
    math.assert_close(resumed.shifted, DATA + 1)
    beyond = Pipeline(DATA)
    run(beyond, Pipeline.shifted, cache_dir=str(tmp_path), memory_limit=1)
    assert isinstance(beyond.shifted, DiskTensor) and not beyond.shifted.available
    math.assert_close(beyond.shifted, DATA + 1)


def test_a_second_run_resumes_from_the_cache_without_recomputing(tmp_path):
    run(Pipeline(DATA), Pipeline.shifted, cache_dir=str(tmp_path))
    COMPUTED.clear()
    again = Pipeline(DATA)
    run(again, Pipeline.shifted, cache_dir=str(tmp_path), max_workers=1)  # another worker count, same chunks
    assert COMPUTED == []
    math.assert_close(again.shifted, DATA + 1)


def test_an_interrupted_run_recomputes_only_the_missing_blocks(tmp_path):
    values = np.clip(DATA.numpy('example,x,y'), -2, 2)
    values[-1] += 5  # only the last block holds values above 2.5, and fails while the marker exists
    data = math.wrap(values, batch('example'), spatial('x,y'))
    marker = tmp_path / 'fail'
    marker.touch()
    p = Pipeline(data, fail_marker=str(marker))
    COMPUTED.clear()
    with pytest.raises(PropertyFailed, match='interrupted'):
        run(p, Pipeline.shifted, cache_dir=str(tmp_path / 'c'), block_size=4)
    finished_before_failure = len(COMPUTED) - 1
    assert 'shifted' not in p.__dict__  # nothing half-done lands on the instance
    marker.unlink()
    COMPUTED.clear()
    run(p, Pipeline.shifted, cache_dir=str(tmp_path / 'c'), block_size=4)
    assert len(COMPUTED) == 8 - finished_before_failure  # finished blocks are read from disk
    math.assert_close(p.shifted, data + 1)


def test_memory_limit_one_puts_a_three_stage_result_on_disk(tmp_path):
    p = Pipeline(DATA)
    done = run(p, Pipeline.centred, cache_dir=str(tmp_path), memory_limit=1, keep_intermediate=True)
    assert len(done.stages) == 3
    assert all(q.disk for s in done.stages for q in s.properties)
    assert isinstance(p.centred, DiskTensor) and isinstance(p.shifted, DiskTensor)
    expected = (DATA + 1) - math.mean(DATA + 1, batch)
    math.assert_close(p.centred, expected, abs_tolerance=1e-6)


def test_chunk_size_and_codec_can_be_chosen(tmp_path):
    chosen = plan(Pipeline(DATA), [Pipeline.shifted], cache_dir='unused', chunk_bytes=8 * 8 * 4, compressor='zstd')
    assert chosen.stages[0].chunk_size == 1 and '(zstd)' in str(chosen)
    p = Pipeline(DATA)
    run(p, Pipeline.shifted, cache_dir=str(tmp_path), chunk_bytes=8 * 8 * 4, compressor='zstd', memory_limit=1)
    assert p.shifted.chunks == (1, 8, 8)  # one example: 256 bytes
    with open(os.path.join(p.shifted.path, 'zarr.json')) as f:
        assert [c['name'] for c in json.load(f)['codecs']] == ['bytes', 'zstd', 'crc32c']
    math.assert_close(p.shifted, DATA + 1)
    COMPUTED.clear()
    again = Pipeline(DATA)
    run(again, Pipeline.shifted, cache_dir=str(tmp_path), chunk_bytes=8 * 8 * 4, memory_limit=1)  # codec: not in key
    assert COMPUTED == [] and again.shifted.path == p.shifted.path
    run(Pipeline(DATA), Pipeline.shifted, cache_dir=str(tmp_path))  # the chunk grid is: another result
    assert len(cache.list_results(str(tmp_path))) == 2


@pytest.mark.parametrize(('option', 'bad', 'accepted'), [
    ('chunk_bytes', 0, 'positive int'), ('chunk_bytes', 2.5e6, 'positive int'), ('chunk_bytes', True, 'positive int'),
    ('compressor', 'gzip', r"one of \(None, 'zstd'\)"), ('compressor', 'ZSTD', r"one of \(None, 'zstd'\)")])
def test_bad_chunk_size_or_codec_names_the_value_and_what_is_accepted(option, bad, accepted):
    with pytest.raises(ValueError, match=f'{option} must be .*{accepted}.*got {bad!r}'):
        plan(Pipeline(DATA), [Pipeline.shifted], cache_dir='unused', **{option: bad})


def test_memory_limit_sends_the_largest_outputs_to_disk_first_counting_the_blocks_being_computed():
    # 32 examples of 8x8 float32: blocks of one 2-example chunk hold 512 B; the host's centre 256 B
    fits = plan(Pipeline(DATA), [Pipeline.centred], max_workers=2, cache_dir='unused', memory_limit=256 + 2 * 512)
    assert {q.name for q in fits.properties.values() if not q.in_memory} == {'shifted', 'centred'}
    assert fits.memory_bound == 256 + 2 * 512  # the small centre fits beside two running blocks
    tight = plan(Pipeline(DATA), [Pipeline.centred], max_workers=2, cache_dir='unused', memory_limit=256 + 2 * 512 - 1)
    assert not any(q.in_memory for q in tight.properties.values())
    assert tight.memory_bound == 2 * 512 and not tight.notes


def test_different_computations_share_a_cache_dir_without_overwriting(tmp_path):
    a, b = Pipeline(DATA), Pipeline(DATA, offset=2.0)
    run(a, Pipeline.shifted, cache_dir=str(tmp_path))
    run(b, Pipeline.shifted, cache_dir=str(tmp_path))
    assert len(cache.list_results(str(tmp_path))) == 2
    math.assert_close(a.shifted, DATA + 1)
    math.assert_close(b.shifted, DATA + 2)


def _file_hashes(root) -> dict:
    hashes = {}
    for folder, _, files in os.walk(root):
        for f in files:
            path = os.path.join(folder, f)
            if f.endswith('.json'):
                continue
            with open(path, 'rb') as stream:
                hashes[os.path.relpath(path, root)] = hashlib.sha256(stream.read()).hexdigest()
    return hashes


def test_the_same_computation_writes_the_same_bytes(tmp_path):
    run(Pipeline(DATA), Pipeline.shifted, cache_dir=str(tmp_path / 'one'))
    run(Pipeline(DATA), Pipeline.shifted, cache_dir=str(tmp_path / 'two'))
    assert _file_hashes(tmp_path / 'one') == _file_hashes(tmp_path / 'two')


def test_results_pickle_small_and_print_without_loading(tmp_path):
    loads = []
    on_load_into_memory(loads.append)
    p = Pipeline(DATA)
    run(p, Pipeline.shifted, cache_dir=str(tmp_path), memory_limit=1)
    loads.clear()
    text = repr(p.shifted)
    blob = pickle.dumps(p.shifted)
    assert len(blob) < 1024 and 'shifted' in text
    assert loads == []
    back = pickle.loads(blob)
    math.assert_close(back.example[3], (DATA + 1).example[3])
    assert get_cache_files(p)


@dataclass(frozen=True)
class Julia:
    c: Tensor
    steps: int = 20

    @cached_property
    def escape(self) -> Tensor:
        x = math.linspace(-1.5, 1.5, spatial(x=96))
        y = math.linspace(-1.5, 1.5, spatial(y=96))
        zr, zi = math.iterate(lambda zr, zi: (math.clip(zr * zr - zi * zi + self.c, -4, 4),
                                              math.clip(2 * zr * zi + 0.3, -4, 4)), self.steps,
                              math.expand(x, spatial(y=96)), math.expand(y, spatial(x=96)))
        return math.minimum(zr * zr + zi * zi, 4.0)


def test_julia_set_with_a_memory_limit_reads_back_slice_by_slice(tmp_path):
    j = Julia(math.linspace(-0.8, -0.7, batch(c=8)))
    done = run(j, Julia.escape, cache_dir=str(tmp_path), memory_limit=1024)
    assert done.properties['escape'].disk and isinstance(j.escape, DiskTensor)
    direct = Julia(j.c).escape
    for i in range(8):
        np.testing.assert_allclose(j.escape.c[i].numpy('x,y'), direct.c[i].numpy('x,y'), rtol=1e-6)


@dataclass(frozen=True)
class Draws:
    seed_source: Tensor

    @cached_property
    def noise(self) -> Tensor:  # other values each time it is computed (lazyphi's random draws repeat)
        shape = self.seed_source.shape
        return self.seed_source + math.tensor(np.random.default_rng().standard_normal(shape.sizes), shape)


def test_a_result_computed_again_in_its_place_is_not_read_by_tensors_of_the_old_one(tmp_path):
    first = Draws(math.zeros(batch(example=8), spatial(x=4)))
    run(first, Draws.noise, cache_dir=str(tmp_path), memory_limit=1)
    assert isinstance(first.noise, DiskTensor)
    (info,) = cache.list_results(str(tmp_path))
    cache.delete_result(str(tmp_path), info.key)
    second = Draws(first.seed_source)
    run(second, Draws.noise, cache_dir=str(tmp_path), memory_limit=1)
    with pytest.raises(ReplacedOnDisk, match=r'was computed again \(at .*\) after this tensor was loaded from it'):
        first.noise.numpy()
    assert second.noise.numpy().std() > 0


def test_a_disk_backed_input_is_tokenized_without_reading_it(tmp_path):
    from dask.base import tokenize
    loads = []
    on_load_into_memory(loads.append)
    p = Pipeline(DATA)
    run(p, Pipeline.shifted, cache_dir=str(tmp_path), memory_limit=1)
    loads.clear()
    tokens = {tokenize(p.shifted), tokenize(p.shifted.example[:4]), tokenize(Pipeline(p.shifted))}
    assert len(tokens) == 3 and loads == []
    resumed = plan(Pipeline(p.shifted), [Pipeline.shifted])  # a disk-backed field: its key needs no read either
    assert tokenize(resumed) and loads == []
