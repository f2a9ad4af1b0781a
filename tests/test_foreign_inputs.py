"""xarray DataArrays and dask arrays as inputs: named by their dims, and lazy where they are dask-backed.

Dask-backed values are read through `Source`, an array-like that records every read, so the tests can say
exactly which chunks a slice, an operation or a block of `parallel_compute` computed.
"""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, channel, instance, spatial
from lazyphi.parallel import _graph as graph_builder
from lazyphi.parallel import parallel_compute, plan
from lazyphi.storage import clear_memory_cache

da = pytest.importorskip('dask.array')
xr = pytest.importorskip('xarray')

ROWS, COLS, CHUNK = 8, 6, 2  # 4 chunks along the rows


class Source:
    """An array-like over NumPy values that records the row range of every non-empty read.

    Dask reads a chunk through it, or only the part of a chunk a selection needs (it fuses the slicing).
    Unpickled in this process (a distributed cluster with processes=False) it is the same object again.
    """

    def __init__(self, values: np.ndarray):
        self.values = values
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim
        self.reads = []
        _SOURCES[id(self)] = self

    def __getitem__(self, index):
        part = self.values[index]
        if part.size:
            rows = range(ROWS)[index[0]]
            self.reads.append((rows, rows + 1) if isinstance(rows, int) else (rows.start, rows.stop))
        return part

    def __reduce__(self):
        return _source, (id(self),)


_SOURCES = {}


def _source(key: int) -> Source:
    return _SOURCES[key]


@pytest.fixture(autouse=True)
def empty_memory_cache():
    clear_memory_cache()
    yield
    clear_memory_cache()


@pytest.fixture
def source() -> Source:
    made = Source(np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS))
    yield made
    del _SOURCES[id(made)]


def _lazy(source: Source):
    return da.from_array(source, chunks=(CHUNK, COLS), asarray=False, meta=np.empty((0, 0), source.dtype))


# --- xarray ---------------------------------------------------------------------------------------------------

def test_a_data_array_keeps_its_dims_and_takes_types_by_name():
    values = np.arange(24.0).reshape(2, 3, 4)
    array = xr.DataArray(values, dims=('run', 'x', 'vector'), coords={'run': ['a', 'b'], 'x': [0.0, 0.5, 1.0]})
    default = math.tensor(array)
    assert default.shape == batch(run='a,b') & spatial(x=3) & channel(vector=4)  # the documented default rule
    assert np.shares_memory(default.numpy(), values)  # wrapped, not copied
    typed = math.tensor(array, spatial('run') & instance('vector'))
    assert typed.shape.names == ('run', 'x', 'vector')  # the DataArray's axis order
    assert typed.shape.types == ('spatial', 'spatial', 'instance')
    assert typed.shape.get_item_names('run') == ('a', 'b')  # string coordinates become labels
    assert typed.shape.get_item_names('x') is None  # numeric ones are not carried
    assert float(math.sum(default.run['b'], lambda s: s)) == float(values[1].sum())


def test_wrong_dims_for_a_data_array_are_clear_errors():
    array = xr.DataArray(np.zeros((2, 3)), dims=('run', 'x'))
    with pytest.raises(KeyError, match=r"has dims \('run', 'x'\), not \['time'\]"):
        math.tensor(array, batch('time'))
    with pytest.raises(ValueError, match="dim 'x' was given size 4"):
        math.tensor(array, spatial(x=4))


def test_sum_of_a_data_array_and_of_a_dask_array_is_a_number_not_an_object_tensor(source):
    values = source.values
    assert float(math.sum(math.tensor(xr.DataArray(values, dims=('b', 'x'))), lambda s: s)) == values.sum()
    lazy = math.tensor(_lazy(source), batch('b'), spatial('x'))
    assert lazy.backend.name == 'numpy' and str(lazy.dtype) == 'float32'
    np.testing.assert_array_equal(math.sum(lazy, 'x').numpy(), values.sum(1))


# --- dask: slicing reads nothing, operations read their part --------------------------------------------------

def test_a_dask_array_stays_lazy_until_an_operation_and_then_reads_only_its_part(source):
    t = math.tensor(_lazy(source), batch('b'), spatial('x'))
    assert source.reads == []
    part = t.b[2:4].x[1:3]  # slicing composes and reads nothing
    renamed = math.rename_dims(part, 'x', spatial('u'))
    assert type(renamed).__name__ == 'DaskTensor' and source.reads == []
    np.testing.assert_array_equal((renamed * 2).numpy('b,u'), source.values[2:4, 1:3] * 2)
    assert source.reads == [(2, 4)]  # the one chunk holding rows 2 and 3
    np.testing.assert_array_equal(renamed.numpy('b,u'), source.values[2:4, 1:3])
    assert source.reads == [(2, 4)]  # kept in the memory cache, like data loaded from disk


def test_gathering_labels_and_indices_of_a_dask_array(source):
    t = math.tensor(_lazy(source), batch('b'), channel(c='a,b,c,d,e,f'))
    picked = t[{'c': ['f', 'a'], 'b': (7, 0)}]
    assert picked.shape == batch(b=2) & channel(c='f,a') and source.reads == []
    np.testing.assert_array_equal(picked.numpy('b,c'), source.values[[7, 0]][:, [5, 0]])
    assert sorted(source.reads) == [(0, 2), (6, 8)]
    assert float(t.b[3].c['b']) == source.values[3, 1]


def test_tokens_printing_and_html_compute_nothing(source):
    from dask.base import tokenize

    array = _lazy(source)
    t = math.tensor(array, batch('b'), spatial('x'))
    assert tokenize(t) == tokenize(math.tensor(array, batch('b'), spatial('x')))
    assert tokenize(t) != tokenize(math.tensor(array, batch('b'), spatial('y')))
    assert tokenize(t) != tokenize(t.b[1:])
    assert 'DaskTensor(bᵇ=8, xˢ=6) float32' in repr(t)
    assert '4 chunks of (2, 6)' in t._repr_html_() and 'not in memory' in t._repr_html_()
    assert source.reads == []


def test_a_dask_array_needs_a_name_per_axis_and_known_sizes(source):
    with pytest.raises(ValueError, match='has 2 axes of sizes'):
        math.tensor(_lazy(source), batch('b'))
    with pytest.raises(ValueError, match="dim 'x' was given 7 entries"):
        math.tensor(_lazy(source), batch('b'), spatial(x=7))
    unknown = da.from_array(np.arange(6.0), chunks=3)
    unknown = unknown[unknown > 1]
    with pytest.raises(ValueError, match='compute_chunk_sizes'):
        math.tensor(unknown, batch('b'))


# --- dask inputs of parallel_compute: every block computes its own rows only ----------------------------------

@dataclasses.dataclass(frozen=True)
class Rows:
    values: Tensor

    @cached_property
    def scaled(self) -> Tensor:
        return self.values * 2 + self.values  # the input used twice: computed once per block

    @cached_property
    def row_sum(self) -> Tensor:
        return math.sum(self.scaled, 'x')


@pytest.mark.parametrize('cut_on_host', [False, True], ids=['sliced-in-task', 'cut-on-host'])
@pytest.mark.parametrize('scheduler', ['sync', 'threads'])
def test_each_block_of_parallel_compute_reads_only_its_slice(source, scheduler, cut_on_host, monkeypatch):
    if cut_on_host:  # the engine hands large inputs to each block as its own (lazy) slice
        monkeypatch.setattr(graph_builder, 'PRESLICE_BYTES', 0)
    rows = Rows(math.tensor(_lazy(source), batch('b'), spatial('x')))
    p = plan(rows, ['row_sum'], block_size=CHUNK, scheduler=scheduler)
    assert len(p.stages[0].blocks) == ROWS // CHUNK and source.reads == []  # planning computes nothing
    parallel_compute(rows, ['row_sum'], block_size=CHUNK, scheduler=scheduler, progress=False)
    assert sorted(source.reads) == [(0, 2), (2, 4), (4, 6), (6, 8)]  # each chunk once, by the block holding it
    np.testing.assert_array_equal(rows.row_sum.numpy('b'), 3 * source.values.sum(1))


def test_a_dask_backed_data_array_is_lazy_in_parallel_compute(source):
    array = xr.DataArray(_lazy(source), dims=('b', 'x'))
    rows = Rows(math.tensor(array))
    assert type(rows.values).__name__ == 'DaskTensor' and source.reads == []
    parallel_compute(rows, ['row_sum'], block_size=4, scheduler='threads', progress=False)
    assert sorted(source.reads) == [(0, 2), (2, 4), (4, 6), (6, 8)]  # two blocks of two chunks each
    np.testing.assert_array_equal(rows.row_sum.numpy('b'), 3 * source.values.sum(1))


@pytest.mark.slow
def test_blocks_on_a_distributed_cluster_read_only_their_slices(source):
    distributed = pytest.importorskip('distributed')
    rows = Rows(math.tensor(_lazy(source), batch('b'), spatial('x')))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=':0') \
            as cluster, distributed.Client(cluster) as client:
        parallel_compute(rows, ['row_sum'], block_size=CHUNK, scheduler=client, progress=False)
    assert sorted(source.reads) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    np.testing.assert_array_equal(rows.row_sum.numpy('b'), 3 * source.values.sum(1))


def test_import_lazyphi_and_numpy_tensors_load_neither_xarray_nor_dask():
    code = ('import json, sys, numpy as np\nfrom lazyphi import math\n'
            'math.sum(math.tensor(np.ones((2, 3)), math.batch("b"), math.spatial("x")))\n'
            'print(json.dumps(sorted(sys.modules)))')
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    loaded = {m.split('.')[0] for m in json.loads(out.splitlines()[-1])}
    assert not loaded & {'xarray', 'dask', 'distributed'}
    assert 'lazyphi.parallel._dask_tensor' not in json.loads(out.splitlines()[-1])
