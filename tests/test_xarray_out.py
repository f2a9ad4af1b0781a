"""Results and saves as xarray sees them: label coordinates, config attributes, no warnings; NumPy arrays saved.

The test suite turns warnings into errors, so every `xr.open_zarr` here also proves it warns about nothing
(lazyphi's `lazyphi.json` and `<array>.done/` records, or missing consolidated metadata).
"""

import dataclasses

import numpy as np
import pytest

import lazyphi
from lazyphi import math
from lazyphi.dataclasses import cached_property
from lazyphi.math import Tensor, batch, channel, spatial
from lazyphi.parallel import parallel_compute

xr = pytest.importorskip('xarray')

VALUES = np.arange(24, dtype=np.float32).reshape(4, 3, 2)


@dataclasses.dataclass(frozen=True)
class Waves:
    data: Tensor
    gain: float = 2.0
    name: str = 'waves'
    phase: complex = 1j  # no JSON value: shown by its repr

    @cached_property
    def scaled(self) -> Tensor:
        return self.data * self.gain


@dataclasses.dataclass(frozen=True)
class Experiment:
    waves: Waves
    trials: int = 3


def waves() -> Waves:
    return Waves(math.tensor(VALUES, batch('run'), spatial('x'), channel(vector='u,v')))


def test_open_zarr_on_a_cache_result_shows_label_coordinates_and_config(tmp_path):
    w = waves()
    parallel_compute(w, ['scaled'], scheduler='sync', cache_dir=str(tmp_path), memory_limit=1, progress=False)
    ds = xr.open_zarr(w.scaled.store)
    assert list(ds.data_vars) == ['scaled'] and ds.scaled.dims == ('run', 'x', 'vector')
    assert list(ds.vector.values) == ['u', 'v'] and 'vector' in ds.indexes
    assert ds.attrs == {'lazyphi_class': f'{__name__}:Waves', 'gain': 2.0, 'name': 'waves', 'phase': '1j'}
    np.testing.assert_array_equal(ds.scaled.sel(vector='v').values, 2 * VALUES[..., 1])
    # lazyphi still reads the result as before: the coordinates are not among its arrays
    again = waves()
    parallel_compute(again, ['scaled'], scheduler='sync', cache_dir=str(tmp_path), memory_limit=1,
                     progress=False)
    assert again.scaled.store == w.scaled.store
    np.testing.assert_array_equal(again.scaled.numpy('run,x,vector'), 2 * VALUES)


def test_open_zarr_on_a_save_shows_each_group_with_its_coordinates_and_config(tmp_path):
    w = waves()
    assert w.scaled.shape.rank == 3
    path = str(tmp_path / 'experiment')
    lazyphi.save(Experiment(w), path, include_cache=True)
    root = xr.open_zarr(path)
    assert root.attrs == {'lazyphi_class': f'{__name__}:Experiment', 'trials': 3} and not root.data_vars
    group = xr.open_zarr(path, group='waves')
    assert sorted(group.data_vars) == ['data', 'scaled'] and list(group.vector.values) == ['u', 'v']
    assert group.attrs['gain'] == 2.0 and group.attrs['lazyphi_class'] == f'{__name__}:Waves'
    np.testing.assert_array_equal(group.data.values, VALUES)
    loaded = lazyphi.load(path)
    assert loaded.trials == 3 and loaded.waves.gain == 2.0
    np.testing.assert_array_equal(loaded.waves.data.numpy('run,x,vector'), VALUES)


def test_a_saved_dict_of_tensors_opens_as_a_dataset(tmp_path):
    path = str(tmp_path / 'fields')
    lazyphi.save({'u': math.zeros(spatial(x=3), channel(c='a,b')), 'v': math.ones(spatial(x=3))}, path)
    ds = xr.open_zarr(path)
    assert sorted(ds.data_vars) == ['u', 'v'] and list(ds.c.values) == ['a', 'b'] and ds.attrs == {}


def test_to_xarray_keeps_the_label_of_a_selected_item_as_a_scalar_coordinate(tmp_path):
    w = waves()
    parallel_compute(w, ['scaled'], scheduler='sync', cache_dir=str(tmp_path), memory_limit=1, progress=False)
    picked = w.scaled.vector['v'].run[1:3].to_xarray()
    assert picked.dims == ('run', 'x') and picked.coords['vector'].item() == 'v'
    np.testing.assert_array_equal(picked.values, 2 * VALUES[1:3, :, 1])
    both = w.scaled.vector[('v', 'u')].to_xarray()
    assert list(both.vector.values) == ['v', 'u']


def test_save_takes_numpy_arrays_as_math_tensor_names_them(tmp_path):
    path = str(tmp_path / 'arrays')
    lazyphi.save({'line': np.arange(3.0), 'scalar': np.array(5)}, path)
    loaded = lazyphi.load(path, lazy=False)
    assert loaded['line'].shape == channel(vector=3)  # as math.tensor names a 1-D list
    np.testing.assert_array_equal(loaded['line'].numpy(), np.arange(3.0))
    assert loaded['scalar'].shape.rank == 0 and int(loaded['scalar']) == 5
    lazyphi.save({'grid': np.arange(6).reshape(2, 3)}, str(tmp_path / 'grid'))  # more axes: kept an array
    grid = lazyphi.load(str(tmp_path / 'grid'))['grid']
    assert isinstance(grid, np.ndarray) and grid.tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match='dtype <U1'):
        lazyphi.save(np.array(['a']), str(tmp_path / 'text'))
    assert not (tmp_path / 'text').exists()
