"""grid_sample and closest_grid_values against SciPy's linear interpolation, with every extrapolation, on
every backend; gradients on the backends that have them."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import Tensor, batch, channel, extrapolation, instance, spatial

pytestmark = pytest.mark.usefixtures('backend')
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# extrapolation -> scipy.ndimage mode giving the same values beyond the edges
MODES = {extrapolation.ZERO: 'grid-constant', extrapolation.ZERO_GRADIENT: 'nearest',
         extrapolation.PERIODIC: 'grid-wrap', extrapolation.SYMMETRIC: 'reflect', extrapolation.REFLECT: 'mirror'}


def wrap(data, *dims) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), *dims)


@given(points=st.lists(st.tuples(st.floats(-6, 9), st.floats(-6, 9)), min_size=1, max_size=5),
       mode=st.sampled_from(list(MODES)))
@SETTINGS
def test_linear_interpolation_matches_scipy(points, mode):
    values = np.arange(20.).reshape(4, 5) ** 1.5 % 7
    coordinates = np.asarray(points)
    result = math.grid_sample(wrap(values, spatial('x,y')), wrap(coordinates, instance('p'), channel(vector='x,y')),
                              mode)
    expected = ndimage.map_coordinates(values, coordinates.T, order=1, mode=MODES[mode], cval=0)
    np.testing.assert_allclose(result.numpy('p'), expected, rtol=1e-4, atol=1e-4)


def test_constant_extrapolation_components_and_shared_dims():
    grid = wrap([[1., 2.], [3., 4.]], spatial('y,x'))
    coordinates = wrap([[0., 0.], [1., 0.5], [5., 0.]], instance('p'), channel(vector='y,x'))
    assert math.grid_sample(grid, coordinates, 7).numpy('p').tolist() == [1, 3.5, 7]
    in_order = math.grid_sample(grid, wrap([[0.5, 1.]], instance('p'), channel('vector')), 0)  # (y, x) by order
    assert in_order.numpy('p').tolist() == [3]
    batched = wrap([[0., 1.], [10., 11.]], batch('b'), spatial('x'))
    sampled = math.grid_sample(batched, wrap([[0.5], [0.25]], batch('b'), channel(vector='x')), None)
    assert sampled.numpy('b').tolist() == [0.5, 10.25]
    same_name = math.grid_sample(wrap([0., 1., 2.], spatial('x')), wrap([[0.5], [2.]], spatial('x'), channel('vector')),
                                 0)
    assert same_name.shape == spatial(x=2) and same_name.numpy('x').tolist() == [0.5, 2]
    with pytest.raises(math.IncompatibleShapes, match='components'):
        math.grid_sample(grid, wrap([[0.]], instance('p'), channel('vector')), 0)


def test_closest_grid_values_lists_the_neighbours():
    grid = wrap([0, 1, 2, 3], spatial('x'))
    coordinates = wrap([[0.1], [1.9], [3.1]], spatial('x'), channel('vector'))
    closest = math.closest_grid_values(grid, coordinates, extrapolation.ZERO)
    assert closest.shape.names == ('x', 'closest_x')
    assert closest.numpy('x,closest_x').tolist() == [[0, 1], [1, 2], [3, 0]]


def test_gradients_flow_to_the_grid_and_the_coordinates():
    if not default_backend().supports('jacobian'):
        pytest.skip(f'{default_backend().name} lacks jacobian')

    def loss(grid, coordinates):
        return math.sum(math.grid_sample(grid, coordinates, extrapolation.ZERO))
    grid = wrap([0., 1., 2., 3.], spatial('x'))
    coordinates = wrap([0.5, 1.5], instance('points'))
    d_grid, d_coordinates = math.jacobian(loss, (0, 1), get_output=False)(grid, coordinates)
    np.testing.assert_allclose(d_grid.numpy('x'), [0.5, 1, 0.5, 0], atol=1e-6)
    np.testing.assert_allclose(d_coordinates.numpy('points'), [1, 1], atol=1e-6)
