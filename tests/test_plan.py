"""Planning parallel_compute: the stages, blocks, modes and fallbacks a plan holds — not only values."""

import functools
import os
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import NUMPY, DType
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, channel, instance, spatial
from lazyphi.parallel import INFER, MIXED, ParallelPropertyNotComputed, parallel_compute, parallel_property, plan
from lazyphi.parallel._plan import Block, Blocks

DATA = math.random_normal(batch(example=64), spatial(x=16, y=16))


def outside_function(value: float) -> float:
    return value * 2


@dataclass(frozen=True)
class Tutorial:
    data: Tensor

    @cached_property
    def scaled(self) -> float:  # an outside function on float(self.data): per element, never an error
        return outside_function(float(math.mean(self.data)))

    @cached_property
    def plus(self) -> Tensor:
        return self.data + 1

    @cached_property
    def plus_twice(self) -> Tensor:
        return self.plus * 2

    @parallel_property(requires=batch)
    def batch_mean(self) -> Tensor:
        return math.mean(self.plus, batch)

    @cached_property
    def normalized(self) -> Tensor:
        return self.plus - self.batch_mean

    @parallel_property(requires=spatial, out=(batch(example=64) & spatial(x=16, y=16)) * complex)
    def spectrum(self) -> Tensor:
        return math.fft(self.data)

    @cached_property
    def stacked(self) -> Tensor:
        return math.stack([self.data, -self.data], channel('sign'))

    @parallel_property(requires=MIXED)
    def total(self) -> Tensor:
        return math.sum(self.data * 2, 'example,x,y')


@dataclass(frozen=True)
class Julia:
    c: Tensor
    steps: int = 30

    @functools.cached_property
    def escape(self) -> Tensor:
        z0 = math.meshgrid(x=8, y=8) / 4 - 1
        z = math.vec(x=z0.vector['x'], y=z0.vector['y'])
        final = math.iterate(lambda z: math.vec(x=z.vector['x'] ** 2 - z.vector['y'] ** 2 + self.c,
                                                 y=2 * z.vector['x'] * z.vector['y']), self.steps, z)
        return math.sum(final ** 2, 'vector')


def stage_of(p, name):
    return next(s for s in p.stages if name in [q.name for q in s.properties])


def test_float_of_batched_data_plans_per_element_evaluation():
    p = plan(Tutorial(DATA), [Tutorial.scaled])
    (stage,) = p.stages
    assert stage.split_dims == batch(example=64)
    assert p.properties['scaled'].mode == 'element'
    assert 'float()' in p.properties['scaled'].per_element_reason


def test_two_dependent_cached_properties_share_one_parallel_stage():
    p = plan(Tutorial(DATA), [Tutorial.plus_twice])
    (stage,) = p.stages
    assert [q.name for q in stage.properties] == ['plus', 'plus_twice']
    assert {q.mode for q in stage.properties} == {'block'}
    assert stage.fields == {'data'}
    assert not p.fallbacks


def test_mean_with_requires_batch_is_a_host_stage_and_the_normalised_result_a_parallel_one_after_it():
    p = plan(Tutorial(DATA), [Tutorial.normalized])
    assert [([q.name for q in s.properties], s.host) for s in p.stages] == [
        (['plus'], False), (['batch_mean'], True), (['normalized'], False)]
    assert p.stages[2].cached_inputs == {'plus', 'batch_mean'}
    assert p.properties['batch_mean'].requires == {'example'}


def test_fft_with_requires_spatial_runs_once_per_block_without_fallbacks():
    p = plan(Tutorial(DATA), [Tutorial.spectrum])
    (stage,) = p.stages
    assert not stage.host and len(stage.blocks) >= 2
    assert p.properties['spectrum'].mode == 'block'
    assert p.properties['spectrum'].output.dtype is complex
    assert not p.fallbacks


def test_julia_set_on_iterate_with_a_lambda_is_traced_without_fallbacks():
    j = Julia(math.linspace(-1, 1, batch(c=32)))
    p = plan(j, [Julia.escape])
    (stage,) = p.stages
    assert stage.split_dims == batch(c=32)
    prop = p.properties['escape']
    assert prop.mode == 'block' and not prop.fallbacks
    assert prop.output.shape == batch(c=32) & spatial(x=8, y=8)


@pytest.mark.parametrize('name', ['stacked', 'plus'])
def test_stack_and_plus_one_are_parallel_block_stages(name):
    p = plan(Tutorial(DATA), [name])
    assert p.properties[name].mode == 'block'
    assert not p.stages[-1].host
    assert not p.fallbacks


def test_mixed_sum_is_one_parallel_stage_with_partials_and_a_combine():
    p = plan(Tutorial(DATA), [Tutorial.total])
    (stage,) = p.stages
    assert len(stage.blocks) >= 2 and stage.combine
    prop = p.properties['total']
    assert prop.mode == 'mixed'
    assert [combine for _, combine in prop.partials] == ['sum']


def test_blocks_cover_the_dim_and_are_whole_chunks_where_a_stage_writes_to_disk():
    p = plan(Tutorial(DATA), [Tutorial.plus], max_workers=2)
    (stage,) = p.stages
    assert stage.blocks[0].start == 0 and stage.blocks[-1].stop == 64
    assert len(stage.blocks) == 4  # 2 blocks per worker
    one = plan(Tutorial(DATA), [Tutorial.plus], block_size=1)
    assert len(one.stages[0].blocks) == 64
    small = Tutorial(math.random_normal(batch(example=10), spatial(x=4)))  # 10 elements: 10 chunks of one
    written = plan(small, [Tutorial.plus], max_workers=3, cache_dir='unused').stages[0]
    assert written.chunk_size == 1 and all(b.size % written.chunk_size == 0 for b in written.blocks)
    assert len(written.blocks) >= 3


@pytest.fixture(scope='module')
def cluster_client():
    distributed = pytest.importorskip('distributed')
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') as c, \
            distributed.Client(c) as client:
        yield client


@pytest.mark.parametrize('kind', ['sync', 'threads', 'processes', 'cluster'])
def test_a_stage_writing_to_disk_gets_a_block_per_chunk_on_every_scheduler(kind, request):
    scheduler = request.getfixturevalue('cluster_client') if kind == 'cluster' else kind
    workers = {'sync': 1, 'cluster': 2}.get(kind, os.cpu_count())
    (written,) = plan(Tutorial(DATA), [Tutorial.plus], scheduler=scheduler, cache_dir='unused').stages
    assert [b.size for b in written.blocks] == [written.chunk_size] * 16  # 64 elements: 16 chunks of 4, one a block
    (memory,) = plan(Tutorial(DATA), [Tutorial.plus], scheduler=scheduler).stages
    assert len(memory.blocks) == min(64, 2 * workers)  # nothing to resume from: two blocks per worker


def test_blocks_of_a_stage_writing_to_disk_do_not_depend_on_the_workers_and_block_size_overrides():
    for workers in (1, 2, 64):
        (stage,) = plan(Tutorial(DATA), [Tutorial.plus], max_workers=workers, cache_dir='unused').stages
        assert [b.size for b in stage.blocks] == [4] * 16
    (given,) = plan(Tutorial(DATA), [Tutorial.plus], block_size=10, cache_dir='unused').stages
    assert [b.size for b in given.blocks] == [8] * 8  # block_size, in whole chunks
    (given,) = plan(Tutorial(DATA), [Tutorial.plus], block_size=10).stages
    assert [b.size for b in given.blocks] == [10] * 6 + [4]  # any range when nothing is written


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 80), workers=st.integers(1, 16), disk=st.booleans())
def test_a_stage_with_at_least_as_many_elements_as_workers_gives_each_worker_a_block(n, workers, disk):
    p = plan(Tutorial(math.zeros(batch(example=n), spatial(x=3))), [Tutorial.plus], max_workers=workers,
             cache_dir='unused' if disk else None)
    (stage,) = p.stages
    assert len(stage.blocks) >= min(n, workers)
    assert [b.start for b in stage.blocks] == [0, *[b.stop for b in stage.blocks[:-1]]] and stage.blocks[-1].stop == n
    if disk:
        assert all(b.start % stage.chunk_size == 0 for b in stage.blocks)  # no two blocks write one chunk


@settings(max_examples=80, deadline=None)
@given(length=st.integers(0, 120), per_block=st.integers(1, 40), data=st.data())
def test_a_stages_blocks_made_when_asked_for_are_the_ranges_cut_one_after_another(length, per_block, data):
    blocks = Blocks(length, per_block)
    cut = [Block(i, start, min(start + per_block, length)) for i, start in enumerate(range(0, length, per_block))]
    assert len(blocks) == len(cut) and list(blocks) == cut and blocks == cut
    if cut:
        i = data.draw(st.integers(-len(cut), len(cut) - 1))
        assert blocks[i] == cut[i]
    start, stop, step = (data.draw(st.none() | st.integers(-8, 8)) for _ in range(3))
    if step != 0:
        assert blocks[start:stop:step] == cut[start:stop:step]
    with pytest.raises(IndexError, match=f'block {len(cut)} of a stage of {len(cut)} blocks'):
        blocks[len(cut)]
    assert blocks != Blocks(length + per_block, per_block)  # one block more
    other = Blocks(length, data.draw(st.integers(1, 40)))
    assert (blocks == other) == (cut == list(other))


def test_the_chunk_grid_comes_from_the_data_not_the_workers():
    grids = {plan(Tutorial(DATA), [Tutorial.plus], max_workers=w, cache_dir='unused').stages[0].chunk_size
             for w in (1, 2, 7, 32)}
    assert grids == {64 // 16}  # at least 16 chunks along the block dim


def test_blocks_follow_the_workers_the_scheduler_has():
    assert plan(Tutorial(DATA), [Tutorial.plus], scheduler='sync').max_workers == 1
    assert plan(Tutorial(DATA), [Tutorial.plus], scheduler='threads').max_workers == (os.cpu_count() or 1)
    assert plan(Tutorial(DATA), [Tutorial.plus], scheduler='sync', max_workers=3).max_workers == 3
    assert plan(Tutorial(DATA), [Tutorial.plus], max_workers=0).max_workers == 1  # no workers: one task at a time
    for bad in (-1, 2.5, True, '4'):
        with pytest.raises(ValueError, match=f'max_workers must be a non-negative int .* or None.*{bad!r}'):
            plan(Tutorial(DATA), [Tutorial.plus], max_workers=bad)


def test_a_distributed_client_is_planned_for_its_worker_threads():
    distributed = pytest.importorskip('distributed')
    with distributed.LocalCluster(n_workers=2, threads_per_worker=3, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        p = plan(Tutorial(DATA), [Tutorial.plus], scheduler=client)
        assert p.max_workers == 6 and not p.notes
        six = plan(Tutorial(DATA), [Tutorial.plus], scheduler='threads', max_workers=6)
        assert p.stages[0].blocks == six.stages[0].blocks  # cut for its worker threads, not the host's CPUs
        assert plan(Tutorial(DATA), [Tutorial.plus]).max_workers == 6  # the active client, by default
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=':0') as cl, \
            distributed.Client(cl) as client:
        p = plan(Tutorial(DATA), [Tutorial.plus], scheduler=client)
        assert p.max_workers == (os.cpu_count() or 1) and 'no workers yet' in p.notes[0]
        assert 'max_workers' in str(p)


def test_planning_never_runs_a_property_on_real_data():
    calls = []

    @dataclass(frozen=True)
    class Counting:
        data: Tensor

        @cached_property
        def value(self) -> Tensor:
            calls.append(self.data.available)
            return self.data * 2

    plan(Counting(DATA), [Counting.value])
    assert calls and not any(calls)  # traced on tracers only


def test_traces_are_cached_per_class_property_and_input_shapes():
    calls = []

    @dataclass(frozen=True)
    class Counting:
        data: Tensor

        @cached_property
        def value(self) -> Tensor:
            calls.append(1)
            return self.data * 2

    plan(Counting(DATA), [Counting.value])
    plan(Counting(DATA * 3), [Counting.value])
    assert len(calls) == 1
    plan(Counting(math.random_normal(batch(example=4))), [Counting.value])
    assert len(calls) == 2


def test_already_cached_properties_are_not_planned():
    t = Tutorial(DATA)
    _ = t.plus
    p = plan(t, [Tutorial.plus_twice])
    assert p.done == ('plus',)
    assert [q.name for s in p.stages for q in s.properties] == ['plus_twice']


def test_absent_parallel_dims_plan_everything_on_the_host_and_say_so():
    p = plan(Tutorial(math.random_normal(spatial(x=4))), [Tutorial.plus])
    assert all(s.host for s in p.stages)
    assert 'everything runs on the host' in p.notes[0]


def test_plan_renders_as_text_and_html():
    p = plan(Tutorial(DATA), [Tutorial.normalized, Tutorial.scaled])
    text = str(p)
    assert 'stage 1: host' in text and 'batch_mean' in text and 'per element' in text
    page = p._repr_html_()
    assert page.startswith('<div>') and '<table>' in page and 'normalized' in page


def test_errors_name_the_bad_value():
    with pytest.raises(TypeError, match=r"Tutorial.data is not a @cached_property"):
        plan(Tutorial(DATA), ['data'])
    with pytest.raises(TypeError, match=r'Cls\.prop'):
        plan(Tutorial(DATA), [42])
    with pytest.raises(ValueError, match='memory_limit=100 needs cache_dir'):
        plan(Tutorial(DATA), [Tutorial.plus], memory_limit=100)
    with pytest.raises(ValueError, match=r'block_size must be a positive int'):
        plan(Tutorial(DATA), [Tutorial.plus], block_size=0)

    @dataclass(frozen=True, slots=True)
    class Slotted:
        data: Tensor
    with pytest.raises(TypeError, match='__slots__'):
        plan(Slotted(DATA), [])


def test_parallel_property_on_direct_eval():
    t = Tutorial(DATA)
    with pytest.raises(ParallelPropertyNotComputed, match=r"Tutorial.batch_mean .* parallel_compute"):
        _ = t.batch_mean
    assert isinstance(t.plus, Tensor)  # cached_property computes in place

    @dataclass(frozen=True)
    class Host:
        data: Tensor

        @parallel_property(on_direct_eval='host-compute')
        def doubled(self) -> Tensor:
            return self.data * 2
    math.assert_close(Host(DATA).doubled, DATA * 2)
    with pytest.raises(ValueError, match="on_direct_eval must be one of"):
        parallel_property(on_direct_eval='later')
    with pytest.raises(TypeError, match='placeholders'):
        parallel_property(out=3)


def test_out_placeholders_and_infer():
    prop = parallel_property(lambda self: None, out=(spatial(x=2), {'a': batch(b=3) * int}))
    assert prop.out[0].dtype is float and prop.out[1]['a'].dtype is int
    assert parallel_property(lambda self: None).out is INFER


# --- every public operation is traced or listed as a fallback ---------------------------------

X = spatial('x')

def deprecated(f, *args):
    """`f(*args)` for a function that warns of its deprecation on every call (phiml's own warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        return f(*args)


OPERATIONS = {
    'abs': lambda t: math.abs(t), 'sign': math.sign, 'round': math.round, 'ceil': math.ceil, 'floor': math.floor,
    'sqrt': math.sqrt, 'exp': math.exp, 'log': math.log, 'log2': math.log2, 'log10': math.log10,
    'sin': math.sin, 'cos': math.cos, 'tan': math.tan, 'arcsin': math.arcsin, 'arccos': math.arccos,
    'arctan': math.arctan, 'sinh': math.sinh, 'cosh': math.cosh, 'tanh': math.tanh, 'arcsinh': math.arcsinh,
    'arccosh': math.arccosh, 'arctanh': math.arctanh, 'sigmoid': math.sigmoid, 'is_nan': math.is_nan,
    'is_finite': math.is_finite, 'is_inf': math.is_inf, 'real': math.real, 'imag': math.imag,
    'conjugate': math.conjugate, 'arctan2': lambda t: math.arctan2(t, 1), 'maximum': lambda t: math.maximum(t, 0),
    'minimum': lambda t: math.minimum(t, 0), 'clip': lambda t: math.clip(t, 0, 1),
    'where': lambda t: math.where(t > 0, t, 0), 'cast': lambda t: math.cast(t, int), 'to_float': math.to_float,
    'to_int32': math.to_int32, 'to_int64': math.to_int64, 'to_complex': math.to_complex,
    'sum': lambda t: math.sum(t, 'example'), 'prod': lambda t: math.prod(t, 'x'), 'mean': math.mean,
    'std': math.std, 'max': math.max, 'min': math.min, 'any': lambda t: math.any(t > 0),
    'all': lambda t: math.all(t > 0), 'finite_sum': math.finite_sum, 'finite_mean': math.finite_mean,
    'finite_max': math.finite_max, 'finite_min': math.finite_min, 'fft': math.fft, 'ifft': math.ifft,
    'stack': lambda t: math.stack([t, t], channel('c')), 'concat': lambda t: math.concat([t, t], 'x'),
    'unstack': lambda t: math.unstack(t, 'x')[0], 'expand': lambda t: math.expand(t, channel(c=3)),
    'rename_dims': lambda t: math.rename_dims(t, 'x', 'u'), 'slice': lambda t: math.slice(t, {'x': 0}),
    'replace_dims': lambda t: math.replace_dims(t, 'x', 'u'), 'tensor_like': lambda t: math.tensor_like(t, t.x[0].y[0]),
    'pack_dims': lambda t: math.pack_dims(t, 'x,y', math.instance('p')),
    'unpack_dim': lambda t: math.unpack_dim(t, 'x', spatial(a=4, b=4)), 'flatten': math.flatten,
    'transpose': lambda t: math.transpose(t, 'y,x,example'), 'iterate': lambda t: math.iterate(lambda v: v * 2, 3, t),
    'zeros_like': math.zeros_like, 'ones_like': math.ones_like, 'shape': lambda t: t + math.shape(t).get_size('x'),
    'linspace': lambda t: t + math.linspace(0, 1, spatial(x=16)), 'arange': lambda t: t + math.arange(spatial(x=16)),
    'index_tensor': lambda t: t[{'x': math.wrap(np.array([0, 3]), math.instance('i'))}],
    'slicing': lambda t: t.x[1:3], 'operators': lambda t: (t * 2 - 1) / 3 % 2 ** t // 1,
    'comparisons': lambda t: (t < 0) | (t >= 1) & ~(t == 0.5),
    'assert_close': lambda t: math.assert_close(t, t + 0),
    'b2i': math.b2i, 's2b': math.s2b, 'si2d': math.si2d, 'p2d': math.p2d,
    'c2b': lambda t: math.c2b(math.expand(t, channel(c=2))), 'c2d': lambda t: math.c2d(math.expand(t, channel(c=2))),
    'i2b': lambda t: math.i2b(math.expand(t, math.instance(i=2))),
    'd2i': lambda t: math.d2i(math.expand(t, math.dual(d=2))),
    'd2s': lambda t: math.d2s(math.expand(t, math.dual(d=2))),
    'ccat': lambda t: math.ccat([math.expand(t, channel(c=1))] * 2), 'scat': lambda t: math.scat([t.y[0], t.y[1]]),
    'icat': lambda t: math.icat([math.expand(t, math.instance(i=1))] * 2),
    'dcat': lambda t: math.dcat([math.expand(t, math.dual(d=1))] * 2),
    'tcat': lambda t: math.tcat([t.y[0], t.y[1]], spatial), 'ncat': lambda t: math.ncat([t, t], spatial('x')),
    'spack': lambda t: math.spack(t, 'p'), 'ipack': lambda t: math.ipack(math.expand(t, math.instance(i=2)), 'p:i'),
    'cpack': lambda t: math.cpack(math.expand(t, channel(c=2)), 'p'),
    'dpack': lambda t: math.dpack(math.expand(t, math.dual(d=2)), '~p'),
    'squeeze': lambda t: math.squeeze(math.expand(t, channel(c=1)), 'c'),
    # element-wise
    'abs_square': math.abs_square, 'angle': math.angle, 'degrees_to_radians': math.degrees_to_radians,
    'radians_to_degrees': math.radians_to_degrees, 'erf': math.erf, 'log_gamma': lambda t: math.log_gamma(abs(t) + 1),
    'factorial': lambda t: math.factorial(math.to_int32(abs(t))), 'identity': math.identity,
    'incomplete_gamma': lambda t: math.incomplete_gamma(2, abs(t)), 'nan_to_0': math.nan_to_0,
    'safe_div': lambda t: math.safe_div(1, t), 'safe_mul': lambda t: math.safe_mul(t, 2), 'soft_plus': math.soft_plus,
    'stop_gradient': math.stop_gradient, 'convert': lambda t: math.convert(t, NUMPY),
    'to_device': lambda t: math.to_device(t, 'CPU'), 'to_cpu': math.to_cpu,
    'swap_axes': lambda t: math.swap_axes(t, 'y,x,example'),
    # reductions
    'finite_std': math.finite_std,
    **{f'{prefix}{letter}{base}': getattr(math, f'{prefix}{letter}{base}') for letter in 'cdips'
       for prefix, base in [('', 'sum'), ('', 'prod'), ('', 'mean'), ('', 'std'), ('', 'max'), ('', 'min'),
                            ('finite_', 'sum'), ('finite_', 'mean'), ('finite_', 'std'), ('finite_', 'max'),
                            ('finite_', 'min')]},
    **{f'{letter}sort': (lambda f: lambda t: f(t.y[0]))(getattr(math, f'{letter}sort')) for letter in 'cdips'},
    # along dims
    'sort': lambda t: math.sort(t, 'x'), 'argmax': lambda t: math.argmax(t, 'x,y'),
    'argmin': lambda t: math.argmin(t, 'x'), 'at_max': lambda t: math.at_max(t, t, 'x'),
    'at_min': lambda t: math.at_min((t, range), -t, 'y')[0], 'median': math.median,
    'quantile': lambda t: math.quantile(t, [0.1, 0.9], 'x'), 'cumulative_sum': lambda t: math.cumulative_sum(t, 'x'),
    'dot': lambda t: math.dot(t, 'x', t, 'x'), 'gather': lambda t: math.gather(t, math.wrap([1, 3], 'i:i'), 'x'),
    'scatter': lambda t: math.scatter(t, math.vec(x=math.wrap([1, 3], 'i:i')), math.wrap([5., 6.], 'i:i'), mode='add',
                                      outside_handling='undefined'),
    'histogram': lambda t: math.histogram(t, instance(bins=8))[0],
    'boolean_mask': lambda t: math.boolean_mask(t, 'x', math.wrap(np.arange(16) % 3 == 0, 'x:s')),
    'count_occurrences': lambda t: math.count_occurrences(t, t.x[0]),
    'contains': lambda t: math.contains(t, t.y[0]),
    # sampling
    'grid_sample': lambda t: math.grid_sample(t, math.vec(x=t.y[0] % 5, y=t.x[0] % 5), math.extrapolation.PERIODIC),
    'closest_grid_values': lambda t: math.closest_grid_values(t, math.vec(x=t.y[0] % 5), 0),
    # padding
    'pad': lambda t: math.pad(t, {'x': (1, 2)}, math.extrapolation.PERIODIC),
    'shift': lambda t: math.shift(t, (-1, 1))[1], 'slice_off': lambda t: math.slice_off(t, {'x': 0}),
    'convolve': lambda t: math.convolve(t, math.wrap([1, 2, 1], 'x:s'), 'same', math.extrapolation.ZERO_GRADIENT),
    'convolve strided': lambda t: math.convolve(t, math.wrap([1, 2, 1], 'x:s'), 'full', strides=2),
    'convolve transposed': lambda t: math.convolve(t, math.wrap([1, 2, 1], 'x:s'), strides={'x': 2}, transpose=True),
    # finite differences
    'spatial_gradient': math.spatial_gradient, 'laplace': lambda t: math.laplace(t, dx=(1., 2.)),
    'neighbor_reduce': lambda t: math.neighbor_reduce(math.max, t, 'x', math.extrapolation.ZERO_GRADIENT),
    **{name: getattr(math, name) for name in ('neighbor_mean', 'neighbor_sum', 'neighbor_max', 'neighbor_min')},
    'fourier_laplace': lambda t: math.fourier_laplace(t, 0.5), 'fourier_poisson': lambda t: math.fourier_poisson(t, 2),
    'downsample2x': math.downsample2x, 'upsample2x': lambda t: math.upsample2x(t, dims='x'),
    'normalize_to': lambda t: math.normalize_to(abs(t), t.x[0]),
    'finite_fill': lambda t: math.finite_fill(math.log(t)), 'masked_fill': lambda t: math.masked_fill(t, t > 0)[0],
    'frequency_loss': lambda t: math.frequency_loss(t, 1, ignore_mean=True),
    # values from other cells
    'index_shift': lambda t: math.index_shift(t, (0, math.vec(x=1, y=-1)), math.extrapolation.PERIODIC)[1],
    'at_max_neighbor': lambda t: math.at_max_neighbor(t, -t, padding=math.extrapolation.ZERO),
    'at_min_neighbor': lambda t: math.at_min_neighbor((t, t * 2), t, 'x', offsets=(-1, 0, 1), diagonal=False)[1],
    'sample_subgrid': lambda t: math.sample_subgrid(t, math.vec(x=1.5, y=2), spatial(x=8, y=4)),
    # pairs of points
    **{name: (lambda f: lambda t: f(math.stack([t.y[0], t.y[1]], channel('vector')), 1.))(getattr(math, name))
       for name in ('pairwise_differences', 'pairwise_distances')},
    'find_closest': lambda t: math.find_closest(math.stack([t.y[0], t.y[1]], channel('vector')),
                                                math.rename_dims(math.stack([t.y[2], t.y[3]], channel('vector')), 'x',
                                                                 instance('q'))),
    'map_pairs': lambda t: math.map_pairs(lambda a, b: b - a, t.y[0], math.rename_dims(t, 'y', math.dual('x'))),
    'count_intersections': lambda t: math.count_intersections(math.round(t), 'x', 'y'),
    # vectors and losses
    'l1_loss': math.l1_loss, 'l2_loss': math.l2_loss,
    'norm': lambda t: math.norm(t, 'x'), 'vec_length': lambda t: math.vec_length(t, 'x'),
    'length': lambda t: math.length(t, 'x'),
    'squared_norm': lambda t: math.squared_norm(t, 'y'), 'vec_squared': lambda t: math.vec_squared(t, 'y'),
    'normalize': lambda t: math.normalize(t, 'x'), 'vec_normalize': lambda t: math.vec_normalize(t, 'x', 1e-3),
    'clip_length': lambda t: math.clip_length(t, 0, 1, 'x'), 'softmax': lambda t: math.softmax(t, 'x'),
    'cross_product': lambda t: math.cross_product(math.stack([t, t * 2], channel('vector')), math.vec(x=1, y=2)),
    'cross': lambda t: math.cross(math.stack([t, t * 2], channel('vector')), math.vec(x=1, y=2)),
    'rotation_matrix': lambda t: deprecated(math.rotation_matrix, t),
    'rotate_vector': lambda t: deprecated(math.rotate_vector, math.stack([t, t * 2], channel(vector='x,y')), t),
    # ranges
    **{f'{letter}range': (lambda f: lambda t: t + f(z=3))(getattr(math, f'{letter}range')) for letter in 'bcdis'},
    'range': lambda t: t + math.range(spatial(x=16)),
    # functional
    'map_types': lambda t: math.map_types(lambda v: v * 2, spatial, batch)(t),
    **{name: (lambda f: lambda t: f(lambda v: v + 1)(t))(getattr(math, name))
       for name in ('map_c2b', 'map_c2d', 'map_d2b', 'map_d2c', 'map_i2b', 'map_s2b')},
    'perf_counter': lambda t: t + math.perf_counter(t) * 0,
    # data-dependent results
    'nonzero': lambda t: math.nonzero(t > 0), 'native': math.native, 'numpy': math.numpy,
    'reshaped_native': lambda t: math.reshaped_native(t, ['example', 'x,y']),
    'svd': lambda t: math.svd(t, 'x', 'y')[1],
    'fit_hyperplane': lambda t: math.fit_hyperplane(math.stack([t, t * 2], channel('vector')), t * 3, 'y')[0],
    'matrix_from_function': lambda t: math.matrix_from_function(lambda x: math.sum(x, 'y'), t)[0],
    'eigenvalues': lambda t: math.eigenvalues(math.rename_dims(t, 'y', math.dual('x'))),
    'matrix_rank': lambda t: math.matrix_rank(math.rename_dims(t, 'y', math.dual('x'))),
    'factor_ilu': lambda t: math.factor_ilu(math.rename_dims(t, 'y', math.dual('x')), 2)[1],
    'with_diagonal': lambda t: math.with_diagonal(math.rename_dims(t, 'y', math.dual('x')), t.y[0]),
    'reshaped_numpy': lambda t: math.reshaped_numpy(t, ['example', 'x,y']),
    'close': lambda t: math.close(t, t), 'equal': lambda t: math.equal(t, t),
    'always_close': lambda t: t * math.always_close(t, t),
    'map': lambda t: math.map(lambda v: v * 2, t, dims='x'),
    'broadcast': lambda t: math.broadcast(lambda v: v * 2, dims='y')(t),
    # tensors
    'range_tensor': lambda t: t + math.range_tensor(spatial(x=16)),
    'f': lambda t: -math.f - f'{t:.2f}',
    'point_index': lambda t: t[math.vec(x=1, y=2)], 'mask': lambda t: t.x[math.wrap(np.arange(16) % 2 == 0, X)],
    'index_own_dim': lambda t: t.x[math.wrap(np.array([3, 1]), X)], 'dense': math.dense,
    'copy': math.copy, 'pad_to_uniform': lambda t: math.pad_to_uniform(t, spatial(x=20), pad_value=-1),
    'print_gradient': lambda t: math.print_gradient(t, 't'),
    'native_call': lambda t: math.native_call(lambda n: n * 2, t),
    'stored_values': math.stored_values,
}
FALLBACKS = {
    'assert_close': 'numpy()',  # compares values: data-dependent conversion, per element
    'nonzero': 'materialising the values',  # the number of positions depends on the values
    'native': 'native()', 'numpy': 'numpy()',  # leave lazyphi: the values are needed
    'reshaped_native': 'materialising the values', 'reshaped_numpy': 'materialising the values',
    'native_call': 'materialising the values',  # hands natives to a function: through reshaped_native
    'svd': 'materialising the values', 'fit_hyperplane': 'materialising the values',  # through reshaped_native
    'eigenvalues': 'materialising the values', 'matrix_rank': 'materialising the values',  # the same
    'close': 'bool()', 'equal': 'bool()',  # answer a Python bool about the values
    'f': 'f-string',  # formats each value: a conversion to Python data
    'matrix_from_function': 'matrix_from_function',  # which entries are zero shows in the values only
}
NOT_OPERATIONS = {  # names in lazyphi.math that construct values or describe shapes, not operations on tensors
    'BATCH', 'CHANNEL', 'DUAL', 'EMPTY_SHAPE', 'INSTANCE', 'PI', 'SPATIAL', 'BoundDim', 'BoundDims', 'Expanded',
    'NonUniform',
    'Shape', 'ShapeDtype', 'Stacked', 'Tensor', 'batch', 'channel', 'dual', 'instance', 'spatial', 'concat_shapes',
    'merge_shapes', 'non_batch', 'non_primal', 'to_dict', 'from_dict', 'IncompatibleShapes', 'DimNotFound',
    'Dict', 'csize', 'dsize', 'isize', 'ssize', 'non_channel', 'non_dual', 'non_instance', 'non_spatial', 'primal',
    'tensor', 'wrap',
    'vec', 'zeros', 'ones', 'meshgrid', 'random_normal', 'random_uniform', 'get_precision', 'precision',
    'set_global_precision', 'config_fields', 'data_fields', 'non_data_fields', 'special_fields', 'abs_', 'all_',
    'any_', 'max_', 'min_', 'round_', 'sum_', 'slice_', 'conj',
    'math', 'jit_compile', 'gradient',  # transforms of functions, run by the backend's compiler or autodiff, not traced
    'custom_gradient', 'jacobian', 'jit_compile_linear', 'trace_check', 'when_available',
    # the classes jit_compile and jit_compile_linear return; the matrices come from matrix_from_function
    'JitFunction', 'LinearFunction',
    'DType', 'INF', 'NAN', 'inf', 'nan', 'pi', 'extrapolation', 'reshaped_tensor', 'NUMPY', 'NotConvertible',
    'Layout', 'layout', 'rand', 'randn', 'is_scalar', 'choose_backend', 'equality_by_ref',
    'equality_by_shape_and_value',
    'use', 'print', 'print_', 'to_gpu',  # set the default backend, print, need a GPU
    'save', 'load',  # files and plain data: they read the values
    'dtype', 'is_numeric', 'is_none', 'all_available', 'object_dims',  # describe a value
    'const_vec', 'seed', 'replace', 'copy_with',  # make a vector, seed the generators, copy an object
    'is_tracing',  # tells user code whether it runs on tracers, reads no value
    'Extrapolation', 'as_extrapolation',  # boundary conditions, not operations
    'fftfreq', 'dim_mask',  # frequencies of a resolution, a mask of dims
    'ravel_index', 'unravel_index',  # integer index arithmetic on the backend: index tensors, not traced data
    'Solve', 'SolveInfo', 'ConvergenceException', 'NotConverged', 'Diverged',  # a solve's settings, report, errors
    'SolveTape',  # a context manager recording SolveInfos: holds results, takes no tensors
    'solve_linear',  # iterates until the values converge: it needs them, and runs on the backend's while_loop
    'find_differences', 'is_composite',  # answer about the structure of trees: lists and bools, not tensors
    'enable_debug_checks', 'DimFilter', 'magic',  # a global switch, a type alias, a module of protocols
    'perm',  # a module (random and listed permutations, SciPy's assignment on the host)
    'minimize', 'solve_nonlinear',  # take a function and a Solve; iterate on values (SciPy on the host, or a loop)
    'sparse_tensor', 'is_sparse', 'get_format', 'get_sparsity',  # build sparse tensors; answer bools, str, floats
    'SparseCoordinateTensor', 'CompressedSparseMatrix', 'CompactSparseTensor',  # phiml's sparse constructors
    'stored_indices',  # the coordinates of a dense tensor's values: no batch dims, so not the planner's blocks
    # make dense tensors sparse: the number of entries depends on the values (as for nonzero), no batch dims
    'to_format', 'sparse', 'to_coo', 'to_csr', 'to_csc', 'to_compact_rows', 'to_compact_cols',
}


def test_every_public_math_operation_is_covered_here():
    missing = set(math.__all__) - NOT_OPERATIONS - set(OPERATIONS)
    assert not missing, f'operations without a tracing case: {sorted(missing)}'


@pytest.mark.parametrize('name', sorted(OPERATIONS))
def test_operation_is_traced_or_a_listed_fallback(name):
    op = OPERATIONS[name]

    @dataclass(frozen=True)
    class Probe:
        data: Tensor

        @cached_property
        def value(self):
            return op(self.data)

    p = plan(Probe(DATA), [Probe.value])
    prop = p.properties['value']
    if name in FALLBACKS:
        assert FALLBACKS[name] in (prop.per_element_reason or '') + ' '.join(str(f) for f in prop.fallbacks)
    else:
        assert not prop.fallbacks and prop.mode == 'block', f'{name}: {prop}'
        assert prop.output is not None
        with np.errstate(all='ignore'):  # invalid values (log of negatives) only matter for the shape check
            expected = op(DATA)
        assert prop.output.shape == expected.shape and prop.output.dtype == expected.dtype
        reduces_example = name in ('sum', 'transpose', 'flatten', 'b2i') and \
            'example' not in expected.shape
        assert ('example' in prop.requires) == reduces_example


# --- the plan's output dtypes are the run's ---------------------------------------------------------

DTYPE_CASES = {
    'times a Python float': lambda a, b: a * 3.0, 'Python int plus': lambda a, b: 2 + a,
    'over a Python int': lambda a, b: a / 2, 'power': lambda a, b: a ** 2, 'mixed operands': lambda a, b: a + b,
    'concat': lambda a, b: math.concat([a, b], 'x'), 'stack': lambda a, b: math.stack([a, b], channel('s')),
    'expanded times a float': lambda a, b: math.expand(a, channel(c=2)) * 3.0, 'mean': lambda a, b: math.mean(a, 'x'),
    'NumPy scalar': lambda a, b: a * np.float64(3),
}


@pytest.mark.parametrize('bits', [32, 64])
@pytest.mark.parametrize('second', ['float32', 'float64', 'int32', 'bool'])
@pytest.mark.parametrize('first', ['float32', 'float64', 'int64', 'complex64'])
@pytest.mark.parametrize('case', sorted(DTYPE_CASES))
def test_the_planned_output_dtype_is_the_computed_one(case, first, second, bits):
    op = DTYPE_CASES[case]

    @dataclass(frozen=True)
    class Pair:
        a: Tensor
        b: Tensor

        @cached_property
        def value(self) -> Tensor:
            return op(self.a, self.b)

    def make(dtype):
        return math.tensor(np.arange(1, 9).astype(dtype).reshape(2, 4), batch('example'), spatial('x'))
    with math.precision(bits):
        pair = Pair(make(first), make(second))
        planned = plan(pair, [Pair.value]).properties['value'].output
        with np.errstate(all='ignore'):
            computed = op(pair.a, pair.b)
    assert planned.shape == computed.shape and DType.as_dtype(planned.dtype) == computed.dtype


# --- tracing through dependencies ----------------------------------------------------------------------

@dataclass(frozen=True)
class Chain:
    data: Tensor

    @parallel_property(out=batch(example=64) * float)
    def declared(self) -> Tensor:
        return math.sum(self.data, 'x,y')

    @parallel_property
    def per_element(self) -> float:
        return float(math.mean(self.data)) * 2

    @cached_property
    def centred(self) -> Tensor:
        return self.declared - math.mean(self.declared, batch)

    @cached_property
    def shifted(self) -> Tensor:
        return self.per_element + 1


def test_a_property_reading_a_parallel_property_is_traced_on_that_propertys_output():
    p = plan(Chain(DATA), [Chain.centred, Chain.shifted])
    assert not p.fallbacks
    assert p.properties['centred'].requires == {'example'}  # mixes what `declared` gives along example
    assert p.properties['centred'].output == batch(example=64) * DType(float, 32)
    assert p.properties['per_element'].mode == 'element' and p.properties['per_element'].output is None
    assert p.properties['shifted'].mode == 'block' and not p.properties['shifted'].requires
    assert p.properties['shifted'].output is None  # traced on what per_element might give: dims, not dtypes


def test_per_element_evaluation_slices_inputs_of_several_dims_in_any_order():
    @dataclass(frozen=True)
    class Grid:
        a: Tensor  # (example, run)
        b: Tensor  # (run, example): the other order
        c: Tensor  # run only

        @parallel_property
        def value(self) -> float:
            return float(self.a) * 100 + float(self.b) * 10 + float(self.c)

    a = math.random_normal(batch(example=3, run=4))
    b = math.transpose(math.random_normal(batch(example=3, run=4)), 'run,example')
    c = math.random_normal(batch(run=4))
    g = Grid(a, b, c)
    done = parallel_compute(g, [Grid.value], block_size=2, scheduler='sync', progress=False)
    assert done.properties['value'].mode == 'element'
    expected = a.numpy('example,run') * 100 + b.numpy('example,run') * 10 + c.numpy('run')[None, :]
    np.testing.assert_allclose(g.value.numpy('example,run'), expected, rtol=1e-5)


@dataclass(frozen=True)
class Spectra:
    data: Tensor

    @parallel_property(requires=spatial)
    def spectrum(self) -> Tensor:
        return math.fft(self.data)

    @parallel_property(requires='example,x')
    def whole(self) -> Tensor:
        return self.data * 2

    @cached_property
    def total(self) -> Tensor:  # one value: no dims to cut chunks along
        return math.sum(self.data, 'example,x')


def test_the_plan_shows_declared_requirements_also_of_dims_that_are_not_split():
    p = plan(Spectra(math.random_normal(batch(example=4), spatial(x=8))), [Spectra.spectrum, Spectra.whole],
             max_workers=1)
    text = str(p)
    assert 'spectrum: block, requires x (not parallel dims), out' in text
    assert "whole: block, requires ['example'] and x (not parallel dims), out" in text
    assert '(1 worker)' in text
    page = p._repr_html_()
    assert '<td>x (not parallel dims)</td>' in page and ', 1 worker<' in page


def test_an_output_of_no_dims_stays_in_memory_for_that_reason():
    p = plan(Spectra(math.random_normal(batch(example=4), spatial(x=8))), [Spectra.total], cache_dir='unused')
    assert p.notes == ['total stays in memory: its output has no dims (one value); the disk cache stores tensors in '
                       'chunks along a dim']


def test_the_html_of_a_plan_that_ran_says_how_long_and_what_it_reused(tmp_path):
    instance = Spectra(math.random_normal(batch(example=4), spatial(x=8)))
    parallel_compute(instance, [Spectra.spectrum], scheduler='sync', cache_dir=str(tmp_path), progress=False)
    again = Spectra(instance.data)
    done = parallel_compute(again, [Spectra.spectrum], scheduler='sync', cache_dir=str(tmp_path), memory_limit=1,
                            progress=False)
    page = done._repr_html_()
    assert f'<p>ran in {done.elapsed:.2f} s; reused 4 of 4 blocks from the cache; computed 0</p>' in page
    assert f'ran in {done.elapsed:.2f} s; reused 4 of 4 blocks from the cache; computed 0' in str(done)
    assert '<li>outputs in memory: at most' in page
