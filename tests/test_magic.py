"""The shape operations on objects of phiml's magic protocols, dim views, `Dict`, and the spec forms they accept.

Objects implement some of `__stack__`, `__concat__`, `__expand__`, `__getitem__`, `__unstack__`,
`__value_attrs__`; the operations use what an object has and fall back on the others, and an object with
none of them is a TypeError naming its type and the protocol, never returned unchanged.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from strategies import shapes

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import (
    Dict,
    Shape,
    Tensor,
    batch,
    channel,
    dual,
    instance,
    merge_shapes,
    shape,
    spatial,
)
from lazyphi.math.magic import BoundDim, PhiTreeNode, Shapable, Shaped, Sliceable, slicing_dict


class Stackable:
    """Holds only a shape: sliced by `__getitem__`, combined by `__stack__`."""

    def __init__(self, shape: Shape):
        self.shape = shape

    def __getitem__(self, item):
        return Stackable(self.shape.after_gather(slicing_dict(self, item)))

    @staticmethod
    def __stack__(values, dim, **kwargs):
        return Stackable(merge_shapes(dim, *[v.shape for v in values]))


class Joinable:
    """Combined by `__concat__` and `__expand__` only."""

    def __init__(self, shape: Shape):
        self.shape = shape

    def __getitem__(self, item):
        return Joinable(self.shape.after_gather(slicing_dict(self, item)))

    @staticmethod
    def __concat__(values, dim, **kwargs):
        labels = [v.shape.get_item_names(dim) for v in values]
        size = sum(labels, ()) if all(labels) else sum(v.shape.get_size(dim) for v in values)
        return Joinable(values[0].shape.with_dim_size(dim, size))

    def __expand__(self, dims, **kwargs):
        return Joinable(merge_shapes(dims, self.shape))


class Valued:
    """Lists the attribute holding its data."""

    def __init__(self, values: Tensor):
        self.values = values

    def __value_attrs__(self):
        return ('values',)


class Opaque:
    """Holds dims but implements no protocol."""

    shape = spatial(x=3)


MAKERS = {
    'stackable': Stackable,
    'joinable': Joinable,
    'valued': lambda s: Valued(math.zeros(s)),
    'tensor': math.zeros,
}


@pytest.mark.parametrize('make', MAKERS.values(), ids=MAKERS.keys())
def test_operations_on_protocol_objects(make):
    a = make(spatial(x=5) & batch(b=2))
    assert shape(math.stack([a, a], channel('c'))) == merge_shapes(a, channel(c=2))
    assert shape(math.stack({'u': a, 'v': a}, channel('c'))) == merge_shapes(a, channel(c='u,v'))
    assert shape(math.concat([a, a], 'b')) == spatial(x=5) & batch(b=4)
    assert shape(math.expand(a, instance(p=3))) == merge_shapes(a, instance(p=3))
    assert shape(math.rename_dims(a, 'x', instance('p'))) == instance(p=5) & batch(b=2)
    assert shape(math.pack_dims(a, 'x,b', instance('p'))) == instance(p=10)
    assert shape(math.unpack_dim(make(instance(p=6)), 'p', spatial(x=3) & batch(b=2))) == spatial(x=3) & batch(b=2)
    assert shape(math.flatten(a, instance('p'))) == batch(b=2) & instance(p=5)
    assert [shape(u) for u in math.unstack(a, 'b')] == [spatial(x=5)] * 2
    assert shape(math.stack([make(spatial(x=2))] * 6, batch(u=3, v=2))) == batch(u=3, v=2) & spatial(x=2)
    assert isinstance(a, Shapable) and isinstance(a, Sliceable) and isinstance(a, Shaped)


def test_an_object_without_protocols_is_a_type_error_never_returned_unchanged():
    for operation in (lambda o: math.stack([o, o], batch('b')), lambda o: math.concat([o, o], 'x'),
                      lambda o: math.expand(o, batch(b=2)), lambda o: math.rename_dims(o, 'x', 'y'),
                      lambda o: math.pack_dims(o, 'x', instance('p'))):
        with pytest.raises(TypeError, match=r"cannot handle a test_magic.Opaque: it is not a Tensor, number or tree"):
            operation(Opaque())
    assert not isinstance(Opaque(), Sliceable) and isinstance(Opaque(), Shaped)


def test_unstack_prefers_the_objects_own_unstack():
    class Counting(Stackable):
        calls = 0

        def __unstack__(self, dims):
            Counting.calls += 1
            return NotImplemented if Counting.calls > 1 else tuple(self[{dims[0]: i}] for i in range(2))
    assert len(math.unstack(Counting(batch(b=2)), 'b')) == 2 and Counting.calls == 1
    assert len(math.unstack(Counting(batch(b=2)), 'b')) == 2  # NotImplemented: sliced instead


def test_phi_tree_nodes():
    @dataclasses.dataclass
    class Point:
        x: Tensor
    for node in (math.zeros(spatial(x=2)), (math.zeros(), None), [math.zeros()], {'a': math.zeros()},
                 Point(math.zeros()),
                 Valued(math.zeros()), Dict(a=1)):
        assert isinstance(node, PhiTreeNode)
    assert not isinstance((1, 'a'), PhiTreeNode)
    assert issubclass(Dict, PhiTreeNode) and issubclass(tuple, PhiTreeNode) and not issubclass(str, PhiTreeNode)


@pytest.mark.usefixtures('backend')
def test_bound_dims_of_tensors():
    v = math.meshgrid(x=4, y=3)
    assert float(v.x.y.vector[1, 0, 0]) == 1
    assert v.x.y.as_instance().shape == instance(x=4, y=3) & channel(vector='x,y')
    assert v.x.y.pack(instance('points')).shape == instance(points=12) & channel(vector='x,y')
    assert v.x.y.volume == 12 and len(v.x.y.vector.unstack()) == 24 and len(tuple(v.x.y.vector)) == 24
    with pytest.raises(SyntaxError, match=r"use .volume"):
        _ = v.x.y.size
    assert v.x.index == 0 and v.x.size == 4 and v.vector.labels == ('x', 'y') and v.x.type == 'spatial'
    assert v.x.as_batch().shape.names == ('x', 'y', 'vector') and v.x.as_batch().shape.get_type('x') == 'batch'
    assert v.x.rename('u').shape.names == ('u', 'y', 'vector')
    assert v.x.replace(instance('p')).shape.get_type('p') == 'instance'
    assert v.x.unpack(spatial(a=2, b=2)).shape.names == ('a', 'b', 'y', 'vector')
    values = math.wrap(default_backend().as_tensor(np.asarray([[1., 2., 3.], [4., 5., 6.]])), 'b:b,x')
    np.testing.assert_allclose((values.x * (1, 0, 2)).numpy(), [7, 16])
    np.testing.assert_allclose((values.x * values.x).numpy(), [14, 77])
    assert not math.ones(spatial(x=2)).x.dual.exists


def test_bound_dim_of_any_object():
    x = BoundDim(Stackable(spatial(x=5) & batch(b=2)), 'x')
    assert shape(x.rename('y')) == spatial(y=5) & batch(b=2)
    assert shape(x.retype(instance)) == instance(x=5) & batch(b=2)
    assert shape(x.replace(instance('y'))) == instance(y=5) & batch(b=2)
    assert shape(x.unpack(instance('y'))) == instance(y=5) & batch(b=2)
    assert x.size == 5 and len(x.unstack()) == 5


def test_dict_arithmetic_and_attributes():
    d = Dict(a=math.wrap(np.asarray([1., 2.]), 'x'), b=3)
    total = d + Dict(a=1, b=1)
    assert isinstance(total, Dict) and total.b == 4
    np.testing.assert_array_equal((2 * d - 1).a.numpy(), [1, 3])
    np.testing.assert_array_equal((-d).a.numpy(), [-1, -2])
    d.c = 5
    assert d['c'] == 5 and d.__value_attrs__() == ('a', 'b', 'c')
    with pytest.raises(KeyError, match=r"same keys on both sides; only one side has \['c'\]"):
        d + Dict(a=1, b=2)
    with pytest.raises(AttributeError, match=r"Dict has no key 'z'"):
        _ = d.z


def test_spec_forms():
    t = math.zeros(spatial(x=4, y=3), channel(vector='x,y'))
    assert math.rename_dims(t, spatial, instance).shape == instance(x=4, y=3) & channel(vector='x,y')
    assert math.rename_dims(t, 'vector', '(z,w)').shape.get_item_names('vector') == ('z', 'w')
    a = math.wrap(np.asarray([0, 1]), 'a:i')
    b = math.wrap(np.asarray([2]), 'b:i')
    np.testing.assert_array_equal(math.concat([a, b], 'i->points:i').numpy(), [0, 1, 2])
    assert math.spack(math.meshgrid(x=4, y=3), 'points').shape.spatial == spatial(points=12)
    assert math.ipack(math.meshgrid(x=4, y=3), 'points').shape.instance == instance(points=1)  # none to pack: added
    assert math.pack_dims(t, 'x,y', 'p:i').shape.instance == instance(p=12)
    assert math.b2i(math.zeros(batch(b=2))).shape == instance(b=2)
    assert math.p2d(math.zeros(spatial(x=2))).shape == dual(x=2)
    assert math.icat([math.zeros(instance(a=2)), math.zeros(instance(b=1))]).shape == instance(a=3)


def test_vec_forms():
    assert math.vec('~vector', 1, 2).shape == dual(vector='1,2')
    assert math.vec('b:b', 0).shape == batch(b='0,')
    assert math.vec(x=0, y=[0, 1]).shape == instance(sequence=2) & channel(vector='x,y')
    assert math.vec(x=0, y=(0, 1)).shape == spatial(sequence=2) & channel(vector='x,y')
    with pytest.raises(TypeError, match=r"either in order or as keywords"):
        math.vec('v', 1, x=2)


@given(shapes(with_labels=True))
def test_shape_to_dict_and_back(s):
    assert math.from_dict(math.to_dict(s)) == s


def test_shape_of_number_lists_and_value_attrs():
    assert math.non_batch([0, 1]).size == 2 and shape([0, 1]) == channel(vector=2)
    assert shape(Valued(math.zeros(spatial(x=3)))) == spatial(x=3)

    class Dunder:
        def __shape__(self):
            return batch(b=2)
    assert shape(Dunder()) == batch(b=2) and math.ssize(math.zeros(spatial(x=2, y=3))) == 6


def test_number_sequences_stack_as_vectors_of_any_length():
    stacked = math.stack([(1, 0), (1, 0, 1), (0, 0)], batch('s'))
    assert stacked.shape.get_size('vector').sizes == (2, 3, 2) and stacked.shape.volume == 7
    np.testing.assert_array_equal(math.stack([(1, 2), (3, 4)], batch('s')).numpy('s,vector'), [[1, 2], [3, 4]])


def test_stacking_values_whose_labels_differ_drops_the_labels():
    stacked = math.stack([math.vec('x', 1, 2), math.vec('x', 3, 4)], batch('y'))
    assert stacked.shape.get_labels('x') is None and stacked.shape.get_size('x') == 2


def test_expand_gives_labels_to_a_dim_the_value_has():
    labelled = math.expand(math.zeros(channel(vector=2)), channel(vector='x,y'))
    assert labelled.vector.item_names == ('x', 'y')
    with pytest.raises(math.IncompatibleShapes):
        math.expand(labelled, channel(vector='a,b'))
    with pytest.raises(math.IncompatibleShapes):
        math.expand(labelled, channel(vector=3))


def test_dot_with_a_missing_dim_counts_it_constant():
    w = math.random_uniform(channel(neurons=4, input=1))
    x = math.random_uniform(batch(b=3))
    assert (x.neurons * w.input).shape == batch(b=3) & channel(neurons=4)
