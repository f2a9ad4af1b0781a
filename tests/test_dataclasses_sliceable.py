"""@sliceable and getitem: slicing dataclasses like tensors, keeping what their cached properties computed."""

import collections
import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi._errors import LabelNotFound
from lazyphi.dataclasses import cached_property, cached_values
from lazyphi.dataclasses._sliceable import BoundDim, getitem, sliceable
from lazyphi.math import Tensor, batch, channel, dual, instance, spatial

CALLS = collections.Counter()


def points(b=4, n=3) -> Tensor:
    values = np.arange(b * n * 2, dtype=np.float64).reshape(b, n, 2)
    return math.tensor(values, batch(b=b), instance(points=n), channel(vector='x,y'))


@sliceable
@dataclasses.dataclass(frozen=True)
class Cloud:
    position: Tensor
    name: str = 'cloud'

    @cached_property
    def doubled(self) -> Tensor:  # element-wise: survives any slice
        CALLS['doubled'] += self.position.available  # real evaluations; tracing does not count
        return self.position * 2

    @functools.cached_property
    def center(self) -> Tensor:  # reduces along points: slicing points cannot reuse it
        CALLS['center'] += self.position.available  # real evaluations; tracing does not count
        return math.mean(self.position, 'points')


@sliceable
@dataclasses.dataclass
class MutableCloud:
    position: Tensor

    @functools.cached_property
    def doubled(self) -> Tensor:
        CALLS['mutable'] += self.position.available  # real evaluations; tracing does not count
        return self.position * 2


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


# --- slicing and caches ------------------------------------------------------------------------


@pytest.mark.parametrize('cls, prop', [(Cloud, 'doubled'), (MutableCloud, 'doubled')])
def test_slicing_keeps_cached_values_instead_of_recomputing(cls, prop):
    cloud = cls(points())
    full = getattr(cloud, prop)
    calls = sum(CALLS.values())
    part = cloud[{'b': 1, 'points': slice(0, 2)}]
    assert part.position.shape == points().shape.after_gather({'b': 1, 'points': slice(0, 2)})
    assert prop in vars(part)
    np.testing.assert_array_equal(getattr(part, prop).numpy('points,vector'),
                                  full[{'b': 1, 'points': slice(0, 2)}].numpy('points,vector'))
    assert sum(CALLS.values()) == calls  # nothing recomputed
    assert vars(cloud)[prop] is full  # the original keeps its cache


def test_cached_value_reduced_along_a_sliced_dim_is_recomputed():
    cloud = Cloud(points())
    assert cloud.center.shape.names == ('b', 'vector')
    sliced = cloud[{'points': slice(0, 2)}]
    assert 'center' not in vars(sliced)
    np.testing.assert_allclose(sliced.center.numpy('b,vector'), math.mean(points()[{'points': slice(0, 2)}],
                                                                           'points').numpy('b,vector'))
    assert CALLS['center'] == 2
    along_b = cloud[{'b': 0}]
    assert 'center' in vars(along_b) and CALLS['center'] == 2  # center has b: slicing b reuses it


def test_slicing_mutable_dataclass_leaves_the_original_alone():
    cloud = MutableCloud(points())
    part = cloud.b[0]
    assert cloud.position.shape.get_size('b') == 4
    assert 'b' not in part.position.shape


def test_empty_selection_returns_the_instance_itself():
    cloud = Cloud(points())
    assert cloud[{}] is cloud
    assert cloud[{'unknown_dim': 3}] is cloud  # dims the object lacks are ignored, as for tensors


def test_config_fields_are_kept_and_init_does_not_run():
    cloud = Cloud(points(), name='other')
    assert cloud[{'b': 0}].name == 'other'


def test_nested_sliceable_dataclasses_are_sliced_throughout():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Pair:
        first: Cloud
        second: Cloud

    pair = Pair(Cloud(points()), Cloud(points() + 1))
    assert pair.first.doubled is not None
    sliced = pair.b[2]
    assert sliced.first.position.shape.names == ('points', 'vector')
    assert 'doubled' in vars(sliced.first)


# --- items -------------------------------------------------------------------------------------


def test_label_lookup_selects_along_the_dim_holding_the_label():
    cloud = Cloud(points())
    y = cloud['y']
    assert 'vector' not in y.position.shape
    np.testing.assert_array_equal(y.position.numpy('b,points'), points().numpy('b,points,vector')[..., 1])
    both = cloud['y,x']
    assert both.position.shape.get_labels('vector') == ('y', 'x')


def test_label_not_found_names_the_label():
    with pytest.raises(LabelNotFound, match="'z'") as info:
        Cloud(points())['z']
    assert isinstance(info.value, KeyError)


def test_dict_with_labels_slices_and_index_lists():
    cloud = Cloud(points())
    assert cloud[{'vector': 'x'}].position.shape.names == ('b', 'points')
    picked = cloud[{'b': [0, 2]}]
    assert picked.position.shape.get_size('b') == 2
    np.testing.assert_array_equal(picked.position.numpy('b,points,vector'), points().numpy('b,points,vector')[[0, 2]])


def test_bool_mask_and_index_tensor_items():
    cloud = Cloud(points())
    mask = math.tensor(np.array([True, False, True, True]), batch('b'))
    assert cloud[mask].position.shape.get_size('b') == 3
    index = math.tensor(np.array([3, 0]), instance('picked'))
    gathered = cloud[{'b': index}]
    assert gathered.position.shape.get_size('picked') == 2
    np.testing.assert_array_equal(gathered.position[{'picked': 0}].numpy('points,vector'),
                                  points()[{'b': 3}].numpy('points,vector'))


def test_an_index_tensor_naming_its_dims_gathers_every_tensor_as_phiml_documents():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class S:
        v: Tensor
        label: str = 's'

        @cached_property
        def squared(self) -> Tensor:
            return self.v ** 2

        @cached_property
        def total(self) -> Tensor:
            return math.sum(self.v, 'i')

    s = S(math.random_normal(spatial(x=2), channel(c=3), instance(i=4)))
    s.squared, s.total  # noqa: B018
    index = math.wrap([[3], [1]], instance('k'), channel(index='i'))
    for picked in (s[index], getitem(s, index), math.slice(s, index)):
        assert picked.v.shape == instance(k=2) & spatial(x=2) & channel(c=3) and picked.label == 's'
        math.assert_close(picked.v, s.v[index])
        assert set(cached_values(picked)) == {'squared'}  # `total` summed over i: gathering i cannot give it
        math.assert_close(picked.squared, s.v[index] ** 2)
    pairs = math.wrap([[3, 0], [1, 1]], instance('k'), channel(index='i,x'))  # one item per (i, x) pair
    math.assert_close(s[pairs].v, s.v[pairs])
    assert s[pairs].v.shape == instance(k=2) & channel(c=3)
    other = math.wrap([[0]], instance('k'), channel(index='other'))  # indexes no dim of `s`: nothing changes
    assert s[other].v is s.v


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=6), st.integers(0, 2))
def test_gathering_a_dataclass_by_indices_equals_gathering_its_tensors(items, column):
    cloud = Cloud(points())
    index = math.wrap([[i, column] for i in items], instance('k'), channel(index='b,points'))
    gathered = cloud[index]
    math.assert_close(gathered.position, cloud.position[index])
    math.assert_close(gathered.doubled, cloud.position[index] * 2)


def test_invalid_items_raise_errors_naming_them():
    cloud = Cloud(points())
    with pytest.raises(TypeError, match=r"Cannot slice Cloud with 3\.5 of type float"):
        cloud[3.5]
    with pytest.raises(TypeError, match=r'index tensor .* one channel dim listing the dims it indexes'):
        cloud[math.tensor(np.array([1, 2]), batch('b'))]  # which dim it indexes is not said
    with pytest.raises(TypeError, match=r'bool mask .* or an int index tensor'):
        cloud[math.tensor(np.array([1.5]), instance('k'))]
    with pytest.raises(IndexError, match='Index 9 is out of range'):
        cloud[{'b': 9}]
    with pytest.raises(TypeError, match=r"getitem\(\) slices dataclass instances, but got 5"):
        getitem(5, {'b': 0})


def test_sliceable_needs_a_dataclass():
    with pytest.raises(TypeError, match='Put it above @dataclass'):
        @sliceable
        class Plain:
            pass


# --- keepdims ----------------------------------------------------------------------------------


def test_keepdims_keeps_single_items_as_size_one_dims_with_labels():
    cloud = Cloud(points())
    kept = getitem(cloud, {'b': -1, 'vector': 'y'}, keepdims='vector')
    assert kept.position.shape.get_size('vector') == 1
    assert kept.position.shape.get_labels('vector') == ('y',)
    assert 'b' not in kept.position.shape
    last = getitem(cloud, {'b': -1}, keepdims='b')
    np.testing.assert_array_equal(last.position.numpy('b,points,vector'), points().numpy('b,points,vector')[-1:])


def test_class_level_keepdims_applies_to_indexing_and_dim_attributes():
    @sliceable(keepdims='b')
    @dataclasses.dataclass(frozen=True)
    class Kept:
        values: Tensor

    kept = Kept(points())
    assert kept[{'b': 2}].values.shape.get_size('b') == 1
    assert kept.b[0].values.shape.get_size('b') == 1
    assert 'points' not in kept.points[0].values.shape
    assert kept.b[1:3].values.shape.get_size('b') == 2  # slices are unaffected


# --- dim attributes ----------------------------------------------------------------------------


def test_dim_attributes_slice_and_describe_dims():
    cloud = Cloud(points())
    b = cloud.b
    assert isinstance(b, BoundDim)
    assert (b.name, b.size, b.type, b.exists) == ('b', 4, 'batch', True)
    assert cloud.vector.labels == cloud.vector.item_names == ('x', 'y')
    assert cloud.b[1:3].position.shape.get_size('b') == 2
    assert cloud.vector['y'].position.shape.names == ('b', 'points')
    assert repr(b) == '(bᵇ=4) of a Cloud'
    parts = list(cloud.b)
    assert len(parts) == 4 and all(isinstance(p, Cloud) for p in parts)
    assert not hasattr(cloud.b[0], 'b')


def test_dim_attributes_never_shadow_real_attributes():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Named:
        x: Tensor  # a field named like a dim of its own data

        def points(self) -> str:
            return 'method'

    named = Named(math.zeros(spatial(x=3), instance(points=2)))
    assert isinstance(named.x, Tensor)
    assert named.points() == 'method'


def test_unknown_attribute_raises_attribute_error_naming_it_and_the_dims():
    cloud = Cloud(points())
    with pytest.raises(AttributeError, match=r"'Cloud' object has no attribute or dim 'bogus' \(dims: \('b', "):
        _ = cloud.bogus
    assert not hasattr(cloud, 'bogus')
    assert not hasattr(cloud, '_private')
    assert not hasattr(cloud, '__array_interface__')


def test_property_raising_attribute_error_is_reported_as_such():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Broken:
        values: Tensor

        @property
        def area(self):
            return self.values._no_such_attribute

    with pytest.raises(AttributeError, match=r'Broken\.area raised AttributeError'):
        _ = Broken(points()).area


def test_shape_property_that_uses_dims_does_not_recurse():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class OwnShape:
        values: Tensor

        @functools.cached_property
        def shape(self):
            return self.values.shape.without('points')

    obj = OwnShape(points())
    assert math.shape(obj).names == ('b', 'vector')
    assert obj.b.size == 4
    with pytest.raises(AttributeError):
        _ = obj.points  # not in the declared shape


def test_dim_attrs_false_adds_no_getattr():
    @sliceable(dim_attrs=False)
    @dataclasses.dataclass(frozen=True)
    class NoAttrs:
        values: Tensor

    obj = NoAttrs(points())
    assert not hasattr(obj, 'b')
    assert obj[{'b': 0}].values.shape.rank == 2


def test_lazy_dims_false_makes_dims_class_attributes_at_construction():
    @sliceable(lazy_dims=False)
    @dataclasses.dataclass(slots=True, frozen=True)
    class Eager:
        values: Tensor

    obj = Eager(points())
    assert {'b', 'points', 'vector'} <= set(dir(obj))
    assert obj.b[0].values.shape.names == ('points', 'vector')
    stacked = math.stack([obj, obj], batch('runs'))  # a dim added without __init__ is still found
    assert stacked.runs.size == 2
    small = Eager(math.zeros(spatial(x=2)))
    with pytest.raises(AttributeError, match="no attribute or dim 'b'"):
        _ = small.b


# --- t_props, repr, equality -------------------------------------------------------------------


def test_t_props_swap_the_dims_of_one_type_with_their_duals():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Matrix:
        m: Tensor

    values = np.arange(2 * 3 * 2, dtype=np.float64).reshape(2, 3, 2)
    matrix = Matrix(math.tensor(values, dual(x=2), spatial(x=3), channel(vector='a,b')))
    tc = matrix.Tc
    assert dict(zip(tc.m.shape.names, tc.m.shape.types, strict=True)) == {'~x': 'dual', 'x': 'spatial',
                                                                           '~vector': 'dual'}
    assert tc.m.shape.get_labels('~vector') == ('a', 'b')
    ts = matrix.Ts
    assert dict(zip(ts.m.shape.names, ts.m.shape.types, strict=True)) == {'x': 'spatial', '~x': 'dual',
                                                                           'vector': 'channel'}
    np.testing.assert_array_equal(ts.m.numpy('~x,x,vector'), values.transpose(1, 0, 2))
    assert matrix.Ti is matrix  # no instance or free dual dims


def test_class_defined_members_are_kept():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Custom:
        values: Tensor

        def __getitem__(self, item):
            return 'own getitem'

        def __repr__(self):
            return 'own repr'

        @property
        def Tc(self):
            return 'own Tc'

    obj = Custom(points())
    assert obj[{'b': 0}] == 'own getitem'
    assert repr(obj) == 'own repr'
    assert obj.Tc == 'own Tc'


def test_dim_repr_shows_the_shape_and_can_be_turned_off():
    assert repr(Cloud(points())) == 'Cloud(bᵇ=4, pointsⁱ=3, vectorᶜ=x,y)'

    @sliceable(dim_repr=False)
    @dataclasses.dataclass(frozen=True)
    class Plain:
        n: int

    assert repr(Plain(3)) == 'test_dim_repr_shows_the_shape_and_can_be_turned_off.<locals>.Plain(n=3)'


def test_equality_hashing_and_shape_stay_those_of_the_dataclass():
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Config:
        n: int
        values: Tensor | None = None

    assert Config(3) == Config(3) and hash(Config(3)) == hash(Config(3))
    assert Config(3) != Config(4)
    cloud = Cloud(points())
    assert cloud == dataclasses.replace(cloud)  # the same tensor object in both
    assert math.shape(cloud) == points().shape
    with pytest.raises(TypeError):
        len(cloud)
    with pytest.raises(TypeError, match='not iterable'):
        iter(cloud)
