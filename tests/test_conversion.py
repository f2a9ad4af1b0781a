"""Natives in chosen layouts, backends, devices and printing, on every backend."""

import threading

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import NUMPY, default_backend
from lazyphi.math import Tensor, batch, channel, spatial

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


def test_native_and_numpy_pass_natives_through():
    array = np.zeros(4)
    assert math.native(array) is array and math.numpy(array) is array
    t = wrap(np.arange(6).reshape(2, 3), spatial('y,x'))
    assert default_backend().staticshape(math.native(t)) == (2, 3)
    assert math.numpy(t).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert math.numpy({'t': t})['t'].shape == (2, 3)


def test_reshaped_native_packs_groups_and_expands_on_request():
    a = wrap(np.arange(24.).reshape(2, 4, 3), channel('vector'), spatial('x,y'))
    assert default_backend().staticshape(math.reshaped_native(a, ['batch', a.shape.spatial, 'vector'],
                                                              force_expand=False)) == (1, 12, 2)
    groups = [batch(batch=10), a.shape.spatial, channel(vector=2)]
    assert default_backend().staticshape(math.reshaped_native(a, groups, force_expand=False)) == (1, 12, 2)
    assert default_backend().staticshape(math.reshaped_native(a, groups)) == (10, 12, 2)
    assert default_backend().staticshape(math.reshaped_native(a, groups, force_expand=['batch'])) == (10, 12, 2)
    assert default_backend().staticshape(math.reshaped_native(a, [spatial, channel(vector=2, v2=2)],
                                                              force_expand=False)) == (12, 4)
    assert default_backend().staticshape(math.reshaped_native(a, [batch, ..., 'vector'])) == (1, 12, 2)
    values = math.reshaped_numpy(a, ['y', 'x', 'vector'])
    np.testing.assert_array_equal(values, np.arange(24.).reshape(2, 4, 3).transpose(2, 1, 0))
    with pytest.raises(ValueError, match='leave out'):
        math.reshaped_native(a, [channel(vector=2, v2=2)], force_expand=False)


def test_native_with_groups_packs_each_entry_into_one_axis_as_phiml_does():
    """phiml's `t.native([batch, channel, *spatial(t)])` (its torch hooks, networks): one axis per entry."""
    values = np.arange(48.).reshape(2, 2, 4, 3)
    t = wrap(values, batch('b'), channel('c'), spatial('x,y'))
    staticshape = default_backend().staticshape
    assert staticshape(t.native([batch, channel, *t.shape.spatial])) == (2, 2, 4, 3)
    assert staticshape(t.native(('b', ('x', 'y'), 'c'))) == (2, 12, 2)
    np.testing.assert_array_equal(t.numpy(['b', ('x', 'y'), 'c']), values.transpose(0, 2, 3, 1).reshape(2, 12, 2))
    assert staticshape(t.native([batch, 'c', spatial])) == (2, 2, 12)
    plain = wrap(values[0, 0], spatial('x,y'))
    assert staticshape(plain.native([batch, channel, 'x', 'y'])) == (1, 1, 4, 3)  # empty groups: axes of size 1
    assert staticshape(t.native(['c', 'b', 'y', 'x'])) == (2, 2, 3, 4)  # names only: one axis per dim, as before


def test_reshaped_tensor_unpacks_groups():
    native = default_backend().as_tensor(np.arange(12.).reshape(2, 6))
    t = math.reshaped_tensor(native, [batch('b'), spatial(x=2, y=3)])
    assert t.shape == batch(b=2) & spatial(x=2, y=3)
    assert float(t.b[1].x[1].y[2]) == 11


def test_swap_axes_of_tensors_and_natives():
    t = wrap([[0, 1, 2], [3, 4, 5]], spatial('y,x'))
    assert math.swap_axes(t, 'x,y').shape.names == ('x', 'y')
    assert math.swap_axes(t, [1, 0]).shape.names == ('x', 'y')
    swapped = math.swap_axes(t.native('y,x'), [1, 0])
    assert default_backend().numpy(swapped).tolist() == [[0, 3], [1, 4], [2, 5]]


def test_convert_to_device_and_use():
    t = wrap([1., 2.], spatial('x'))
    on_numpy = math.convert(t, NUMPY)
    assert on_numpy.backend is NUMPY and on_numpy.numpy('x').tolist() == [1, 2]
    back = math.convert(on_numpy, default_backend())
    assert back.backend is default_backend()
    lazy = math.convert(math.zeros(batch(b=1000), spatial(x=1000)), default_backend())
    assert type(lazy) is math.Expanded
    cpu = default_backend().list_devices('CPU')[0]
    assert math.to_device(t, 'CPU').backend is default_backend()
    assert math.to_device(t, cpu).numpy('x').tolist() == [1, 2]
    assert math.to_device(1., 'CPU') == 1.
    assert math.to_cpu(t).numpy('x').tolist() == [1, 2]



def test_use_sets_the_global_default_backend():
    seen = []
    chosen = math.use(default_backend())  # seen outside any `with backend:`, in a new thread's context
    try:
        thread = threading.Thread(target=lambda: seen.append(math.zeros(spatial(x=2)).backend))
        thread.start()
        thread.join()
        assert seen == [default_backend()] and chosen is default_backend()
    finally:
        math.use(NUMPY)


def test_print_shows_every_value(capsys):
    math.print(wrap([[1, 2], [3, 4]], spatial('y,x')), 'grid')
    out = capsys.readouterr().out
    assert out.startswith('grid: (yˢ=2, xˢ=2)') and '[[1, 2],' in out
    math.print((wrap(5), None))
    assert capsys.readouterr().out.splitlines() == ['[0]: 5', '[1]: None']


@pytest.mark.parametrize('library', ['numpy', 'torch', 'jax', 'jax.numpy', 'tensorflow'])
def test_convert_takes_the_library_module_as_phimls_convert_notebook_passes_it(library):
    module = pytest.importorskip(library)
    converted = math.convert(math.tensor([0, 1]), module)
    assert converted.backend.name == library.partition('.')[0] and converted.numpy().tolist() == [0, 1]
    with pytest.raises(TypeError, match='Expected a Backend, a backend name like "torch" or a library module, got 3'):
        math.convert(math.tensor([0, 1]), 3)


def test_torch_interpolate_takes_tensors_of_every_backend_as_in_phimls_torch_hooks():
    """phiml's test_torch_hooks.py: `torch.nn.functional.interpolate(t, (12, 9), mode='linear')` on a Tensor."""
    torch = pytest.importorskip('torch')
    t = math.random_normal(spatial(x=4, y=3))
    interpolated = torch.nn.functional.interpolate(t, (12, 9), mode='linear')
    assert set(interpolated.shape.names) == {'x', 'y'} and interpolated.shape == spatial(x=12, y=9)
    assert interpolated.backend.name == 'torch'
    values = np.arange(16.).reshape(2, 2, 4)
    signals = math.wrap(default_backend().as_tensor(values), batch('b'), channel(c='r,g'), spatial('x'))
    doubled = torch.nn.functional.interpolate(signals, scale_factor=2, mode='linear', align_corners=True)
    assert doubled.shape.names == ('b', 'c', 'x') and doubled.shape.sizes == (2, 2, 8)  # torch's axis order
    assert doubled.shape.get_labels('c') == ('r', 'g') and doubled.shape.get_type('x') == 'spatial'
    expected = torch.nn.functional.interpolate(torch.as_tensor(values), scale_factor=2, mode='linear',
                                               align_corners=True).numpy()
    np.testing.assert_allclose(doubled.numpy('b,c,x'), expected, rtol=1e-6)
    with pytest.raises(TypeError):  # other torch functions refuse Tensors, as in phiml
        torch.sin(t)
