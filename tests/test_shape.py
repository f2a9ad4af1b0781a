import copy
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import compatible_shapes, dims_of, shapes, sub_shapes

from lazyphi._errors import DimNotFound, IncompatibleShapes, LabelNotFound
from lazyphi.math._dims import (
    batch,
    channel,
    dual,
    instance,
    non_batch,
    non_channel,
    non_dual,
    non_instance,
    non_primal,
    non_spatial,
    parse_dim_spec,
    primal,
    spatial,
)
from lazyphi.math._selection import resolve_index
from lazyphi.math._shape import (
    BATCH,
    CHANNEL,
    DIM_TYPES,
    DUAL,
    EMPTY_SHAPE,
    INSTANCE,
    SPATIAL,
    NonUniform,
    Shape,
    ShapeDtype,
    concat_shapes,
    merge_shapes,
    resolve_dims,
    shape_of,
)

FULL = batch(b=4) & dual(x=3) & instance(points=10) & spatial(x=64) & channel(vector='x,y')


class Shaped:
    """Stand-in for a tensor: anything with a Shape-valued `.shape`."""

    def __init__(self, shape):
        self.shape = shape


class Opaque:
    """A type no shape getter knows (other modules register getters for trees, str and the like)."""


# --- constants and NonUniform ---


def test_dim_type_constants():
    assert (BATCH, DUAL, INSTANCE, SPATIAL, CHANNEL) == ('batch', 'dual', 'instance', 'spatial', 'channel')
    assert DIM_TYPES == (BATCH, DUAL, INSTANCE, SPATIAL, CHANNEL)


def test_non_uniform():
    size = NonUniform(((2, 3), (5, 1)), ('b', 't'))
    assert (size.max, size.min) == (5, 1)
    assert str(size) == '1..5 along b,t'
    assert size == NonUniform(((2, 3), (5, 1)), ('b', 't'))
    assert hash(size) == hash(NonUniform(((2, 3), (5, 1)), ('b', 't')))
    with pytest.raises(TypeError, match=r"varies along b, t.*\.max"):
        int(size)


@pytest.mark.parametrize('sizes, along, message', [
    ((1, 2), (), 'along must be a non-empty tuple'),
    ((1, 2), ['b'], 'along must be a non-empty tuple'),
    ([1, 2], ('b',), r'sizes must be nested tuples of ints >= 0 but got \[1, 2\]'),
    ((1, -2), ('b',), r'but got \(1, -2\)'),
    ((1, 2.5), ('b',), r'but got \(1, 2.5\)'),
])
def test_non_uniform_validation(sizes, along, message):
    with pytest.raises(ValueError, match=message):
        NonUniform(sizes, along)


# --- Shape basics ---


def test_raw_constructor_and_attributes():
    shape = Shape((4, None), ('b', 'x'), (BATCH, SPATIAL), (None, None))
    assert shape.sizes == (4, None) and shape.names == ('b', 'x')
    assert shape.types == shape.dim_types == (BATCH, SPATIAL)
    assert shape.labels == shape.item_names == (None, None)
    assert shape.rank == len(shape) == 2
    assert shape and not EMPTY_SHAPE
    assert not shape.is_empty and EMPTY_SHAPE.is_empty and EMPTY_SHAPE.rank == 0


def test_volume_and_uniformity():
    assert FULL.volume == 4 * 3 * 10 * 64 * 2
    assert EMPTY_SHAPE.volume == 1
    assert spatial('x').volume is None
    ragged = batch(b=2) & instance(points=NonUniform((3, 4), ('b',)))
    assert ragged.volume == 3 + 4 and not ragged.is_uniform and FULL.is_uniform
    assert ragged.only('points').volume is None  # without the dim the sizes vary along, no count


def test_single_dim_properties():
    vector = FULL['vector']
    assert (vector.name, vector.size, vector.type, vector.item_labels) == ('vector', 2, CHANNEL, ('x', 'y'))
    assert spatial('x').item_labels is None


@pytest.mark.parametrize('attribute', ['name', 'size', 'type', 'item_labels'])
def test_single_dim_properties_need_rank_1(attribute):
    with pytest.raises(ValueError, match=rf"Shape\.{attribute} needs a shape of rank 1 but \(xˢ=1, yˢ=2\) has rank 2"):
        getattr(spatial(x=1, y=2), attribute)
    with pytest.raises(ValueError, match=r"but \(\) has rank 0"):
        getattr(EMPTY_SHAPE, attribute)


def test_index_and_lookup():
    assert FULL.index('x') == 3 and FULL.index('~x') == 1
    assert FULL.index(spatial('x')) == 3
    assert FULL.indices('vector,b') == (4, 0)
    assert FULL.indices(spatial) == (3,)
    assert FULL.get_size('points') == 10 and FULL.get_size('nope', None) is None
    assert FULL.get_type('~x') == DUAL
    assert FULL.get_item_names('vector') == FULL.get_labels('vector') == ('x', 'y')
    assert FULL.get_item_names('x') is None


@pytest.mark.parametrize('call', [
    lambda s: s.index('nope'), lambda s: s.indices('x,nope'), lambda s: s.get_size('nope'),
    lambda s: s.get_type('nope'), lambda s: s.get_item_names('nope'), lambda s: s['nope'],
])
def test_missing_dim_raises_dim_not_found(call):
    with pytest.raises(DimNotFound, match=r"Dim 'nope' is not part of shape \(bᵇ=4, ~xᵈ=3"):
        call(FULL)
    with pytest.raises(KeyError):
        call(FULL)


def test_getitem():
    assert FULL[0] == batch(b=4)
    assert FULL[-1] == channel(vector='x,y')
    assert FULL[1:3] == dual(x=3) & instance(points=10)
    assert FULL['x'] == spatial(x=64)
    assert FULL['vector, b'].names == ('vector', 'b')
    assert FULL[['vector', 0]].names == ('vector', 'b')
    assert FULL[(3, '~x')].names == ('x', '~x')
    assert FULL[spatial('x') & channel('vector')].names == ('x', 'vector')
    assert FULL[spatial].names == ('x',)
    assert FULL[[]] == EMPTY_SHAPE


def test_getitem_errors():
    with pytest.raises(IndexError, match=r"Index 5 is out of range for shape .* of rank 5"):
        FULL[5]
    with pytest.raises(IndexError):
        FULL[[7]]
    with pytest.raises(TypeError, match=r"Invalid dim filter 2\.5"):
        FULL[2.5]


def test_contains():
    assert 'x' in FULL and '~x' in FULL and 'y' not in FULL
    assert 'x,vector' in FULL and 'x,y' not in FULL
    assert spatial('x') in FULL and spatial('y') not in FULL
    assert ['b', 'points'] in FULL and ('b', 'q') not in FULL
    assert EMPTY_SHAPE in FULL


def test_iter():
    dims = list(FULL)
    assert [d.name for d in dims] == list(FULL.names)
    assert all(d.rank == 1 for d in dims) and dims[-1].item_labels == ('x', 'y')


def test_equality_and_hash():
    same = batch(b=4) & dual(x=3) & instance(points=10) & spatial(x=64) & channel(vector='x,y')
    assert same == FULL and hash(same) == hash(FULL) and (same != FULL) is False
    assert spatial(x=4) != spatial(x=5)
    assert spatial(x=4) != channel(x=4)
    assert channel(v='a,b') != channel(v=2)
    assert spatial(x=4, y=4) != spatial(y=4, x=4)
    assert spatial(x=4) != 'x' and spatial(x=4) != ('x',)
    assert len({spatial(x=4), spatial(x=4), spatial(x=5)}) == 2


def test_copy_and_pickle():
    assert copy.copy(FULL) == FULL and copy.deepcopy(FULL) == FULL
    ragged = batch(b=2) & instance(points=NonUniform((3, 4), ('b',)))
    for shape in (FULL, ragged, EMPTY_SHAPE):
        assert pickle.loads(pickle.dumps(shape)) == shape


def test_equal_shapes_unpickled_are_one_object_unless_non_uniform():
    """A client fetching many blocks' outputs of one shape keeps one shape, not one per block."""
    assert pickle.loads(pickle.dumps(FULL)) is pickle.loads(pickle.dumps(copy.copy(FULL)))
    ragged = batch(b=2) & instance(points=NonUniform((3, 4), ('b',)))
    first, second = pickle.loads(pickle.dumps(ragged)), pickle.loads(pickle.dumps(ragged))
    assert first == second == ragged and first is not second


def test_repr():
    assert repr(FULL) == '(bᵇ=4, ~xᵈ=3, pointsⁱ=10, xˢ=64, vectorᶜ=x,y)'
    assert repr(EMPTY_SHAPE) == '()'
    assert repr(spatial('x', 'y')) == '(xˢ, yˢ)'
    assert repr(instance(points=NonUniform((3, 5), ('b',)))) == '(pointsⁱ=3..5 along b)'
    assert str(channel(vector=1)) == '(vectorᶜ=1)'


def test_shape_dtype():
    placeholder = spatial(x=8) * complex
    assert placeholder == ShapeDtype(spatial(x=8), complex)
    assert float * spatial(x=8) == ShapeDtype(spatial(x=8), float)
    assert repr(placeholder) == '(xˢ=8) * complex'
    assert repr(spatial(x=8) * 'float32') == '(xˢ=8) * float32'


# --- sub-shapes ---


def test_only_and_without():
    assert FULL.only('vector,x').names == ('x', 'vector')
    assert FULL.only('vector,x', reorder=True).names == ('vector', 'x')
    assert FULL.only('x,nope') == spatial(x=64)
    assert FULL.only(None) == EMPTY_SHAPE
    assert FULL.only(FULL) is FULL
    assert FULL.only(spatial) == spatial(x=64)
    assert FULL.only(lambda s: s.non_batch.non_dual).names == ('points', 'x', 'vector')
    assert FULL.only(['b', channel('vector')]).names == ('b', 'vector')
    assert FULL.without('b,~x,nope').names == ('points', 'x', 'vector')
    assert FULL.without(None) is FULL
    assert FULL.without(non_batch) == batch(b=4)


def test_isdisjoint():
    assert FULL.isdisjoint('y,z') and FULL.isdisjoint(None)
    assert not FULL.isdisjoint('y,x') and not FULL.isdisjoint(spatial('x'))


def test_type_properties():
    assert FULL.batch == batch(b=4) and FULL.dual == dual(x=3) and FULL.instance == instance(points=10)
    assert FULL.spatial == spatial(x=64) and FULL.channel == channel(vector='x,y')
    assert FULL.non_batch.names == ('~x', 'points', 'x', 'vector')
    assert FULL.non_dual.names == ('b', 'points', 'x', 'vector')
    assert FULL.primal.names == ('points', 'x', 'vector') and FULL.non_primal.names == ('b', '~x')
    assert FULL.non_instance.names == ('b', '~x', 'x', 'vector')
    assert FULL.non_spatial.names == ('b', '~x', 'points', 'vector')
    assert FULL.non_channel.names == ('b', '~x', 'points', 'x')
    assert spatial(x=2).spatial.name == 'x' and spatial(x=2).batch is EMPTY_SHAPE
    assert spatial(x=2).non_batch == spatial(x=2)


# --- modified copies ---


def test_with_size():
    assert spatial('x').with_size(5) == spatial(x=5)
    assert spatial(x=5).with_size(None) == spatial('x')
    assert channel(vector=2).with_size('a,b') == channel(vector='a,b')
    assert channel(vector=2).with_size(['a', 'b', 'c']).item_labels == ('a', 'b', 'c')
    assert channel(vector='a,b').with_size(2).item_labels is None
    ragged = NonUniform((1, 2), ('b',))
    assert instance('p').with_size(ragged).size == ragged
    with pytest.raises(ValueError, match=r"Shape\.with_size needs a shape of rank 1"):
        FULL.with_size(3)
    with pytest.raises(ValueError, match=r"Invalid size -1 for dim 'x'"):
        spatial('x').with_size(-1)


def test_with_sizes():
    shape = spatial('x,y') & channel('vector')
    assert shape.with_sizes([2, 3, 'a,b']) == spatial(x=2, y=3) & channel(vector='a,b')
    assert shape.with_sizes(4).sizes == (4, 4, 4)
    assert shape.with_sizes(spatial(y=7) & batch(b=1)) == spatial(x=None, y=7) & channel('vector')
    assert shape.with_sizes(channel(vector='u,v')).get_labels('vector') == ('u', 'v')
    with pytest.raises(ValueError, match=r"one size per dim of \(xˢ, yˢ, vectorᶜ\) but got 2"):
        shape.with_sizes([1, 2])
    with pytest.raises(ValueError, match=r"Invalid size 2\.5 for dim 'y'"):
        shape.with_sizes([1, 2.5, 3])


def test_with_dim_size():
    assert FULL.with_dim_size('x', 32).get_size('x') == 32
    assert FULL.with_dim_size(spatial('x'), 'l,r').get_labels('x') == ('l', 'r')
    assert FULL.with_dim_size('vector', 3).get_labels('vector') is None
    assert FULL.with_dim_size('vector', 2, keep_labels=True).get_labels('vector') == ('x', 'y')
    with pytest.raises(ValueError, match=r"Cannot keep the 2 labels of dim 'vector' when resizing it to 3"):
        FULL.with_dim_size('vector', 3, keep_labels=True)
    with pytest.raises(DimNotFound, match="'nope'"):
        FULL.with_dim_size('nope', 3)


def test_replace_with_names():
    shape = spatial(x=4, y=5) & channel(vector='a,b')
    assert shape.replace('x', 'u') == spatial(u=4, y=5) & channel(vector='a,b')
    assert shape.replace('x,y', ['v', 'w']).names == ('v', 'w', 'vector')
    assert shape.replace(spatial, 'p,q').names == ('p', 'q', 'vector')
    assert FULL.replace('~x', 'y').names == ('b', '~y', 'points', 'x', 'vector')
    assert shape.rename('vector', 'c') == spatial(x=4, y=5) & channel(c='a,b')
    assert shape.rename('x', spatial('z')).names == ('z', 'y', 'vector')


def test_replace_with_shape():
    shape = spatial(x=4, y=5) & channel(vector='a,b')
    assert shape.replace('x', instance('points')) == Shape((4, 5, 2), ('points', 'y', 'vector'),
                                                           (INSTANCE, SPATIAL, CHANNEL), (None, None, ('a', 'b')))
    assert shape.replace('x', batch(b=7)).sizes == (7, 5, 2)
    assert shape.replace('vector', channel('c')).get_labels('c') == ('a', 'b')
    assert shape.replace('vector', channel(c=2)).get_labels('c') == ('a', 'b')
    assert shape.replace('vector', channel(c=3)).get_labels('c') is None
    assert shape.replace('vector', channel(c='u,v')).get_labels('c') == ('u', 'v')
    assert shape.replace('x', spatial(u=2, v=2)).names == ('u', 'v', 'y', 'vector')


def test_replace_errors():
    shape = spatial(x=4, y=5)
    with pytest.raises(DimNotFound, match="'z'"):
        shape.replace('z', 'u')
    with pytest.raises(ValueError, match=r"Cannot replace dims \('x', 'y'\) of .* by \('u',\): the counts differ"):
        shape.replace('x,y', 'u')
    with pytest.raises(IncompatibleShapes, match=r"in which dim 'y' appears more than once"):
        shape.replace('x', 'y')
    with pytest.raises(ValueError, match=r"Invalid dim name '1u'"):
        shape.replace('x', '1u')
    with pytest.raises(ValueError, match=r"Invalid dim name '~u'.*only dual dims may start with '~'"):
        shape.replace('x', '~u')
    with pytest.raises(TypeError, match=r"New dim names must be .* but got 3"):
        shape.replace('x', 3)


def test_as_type():
    shape = spatial(x=2) & channel(vector='a,b')
    assert shape.as_dual() == Shape((2, 2), ('~x', '~vector'), (DUAL, DUAL), (None, ('a', 'b')))
    assert shape.as_dual().as_spatial() == spatial(x=2, vector='a,b')
    assert shape.as_batch().types == (BATCH, BATCH) and shape.as_instance().types == (INSTANCE, INSTANCE)
    assert shape.as_channel().types == (CHANNEL, CHANNEL)
    assert shape.as_type(batch) == shape.as_batch() and shape.as_type('instance') == shape.as_instance()
    assert spatial(x=1).as_spatial() == spatial(x=1)
    with pytest.raises(ValueError, match=r"Invalid dim type 'vertical': expected one of"):
        shape.as_type('vertical')
    with pytest.raises(IncompatibleShapes, match=r"Converting to spatial would give .* dim 'x' appears more than once"):
        (dual(x=2) & spatial(x=2)).as_spatial()


# --- after_gather ---


def test_after_gather_basics():
    assert FULL.after_gather({'x': 0}) == FULL.without('x')
    assert FULL.after_gather({'x': -1, 'b': 3}) == FULL.without('x,b')
    assert FULL.after_gather({'x': slice(1, 10, 2)}).get_size('x') == 5
    assert FULL.after_gather({'x': [1, 5, 3]}).get_size('x') == 3
    assert FULL.after_gather({'nope': 3, 'x': None}) is FULL
    assert FULL.after_gather({}) is FULL
    assert spatial('x').after_gather({'x': slice(1, 3)}) == spatial('x')
    assert spatial('x').after_gather({'x': slice(None)}) == spatial('x')
    assert spatial('x').after_gather({'x': [0, 2]}) == spatial(x=2)


def test_after_gather_labels():
    shape = channel(vector='x,y,z')
    assert shape.after_gather({'vector': 'y'}) == EMPTY_SHAPE
    assert shape.after_gather({'vector': 'z,x'}) == channel(vector='z,x')
    assert shape.after_gather({'vector': ['y', 2]}) == channel(vector='y,z')
    assert shape.after_gather({'vector': slice(1, None)}) == channel(vector='y,z')
    assert shape.after_gather({'vector': (0,)}) == channel(vector='x')


def test_after_gather_errors():
    with pytest.raises(LabelNotFound, match=r"Label 'w' is not among the labels \('x', 'y', 'z'\) of dim 'vector'"):
        channel(vector='x,y,z').after_gather({'vector': 'w'})
    with pytest.raises(KeyError, match=r"'w'.*'vector'"):
        channel(vector='x,y,z').after_gather({'vector': 'x,w'})
    with pytest.raises(LabelNotFound, match=r"Cannot select label 'a' along dim 'x' .*: the dim has no labels"):
        spatial(x=3).after_gather({'x': 'a'})
    with pytest.raises(IndexError, match=r"Index 3 is out of range for dim 'x' of size 3"):
        spatial(x=3).after_gather({'x': 3})
    with pytest.raises(IndexError, match=r"Index -4 is out of range for dim 'x'"):
        spatial(x=3).after_gather({'x': [0, -4]})
    with pytest.raises(TypeError, match=r"Cannot select 1\.5 along dim 'x'"):
        spatial(x=3).after_gather({'x': 1.5})
    with pytest.raises(TypeError, match=r"Cannot select True along dim 'x'"):
        spatial(x=3).after_gather({'x': True})


def test_after_gather_non_uniform():
    ragged = batch(b=3) & instance(points=NonUniform((3, 5, 5), ('b',)))
    assert ragged.after_gather({'b': 1}) == instance(points=5)
    assert ragged.after_gather({'b': slice(1, None)}) == batch(b=2) & instance(points=5)
    assert ragged.after_gather({'b': [1, 0]}).get_size('points') == NonUniform((5, 3), ('b',))
    assert ragged.after_gather({'points': slice(0, 4)}).get_size('points') == NonUniform((3, 4, 4), ('b',))
    assert ragged.after_gather({'points': slice(0, 3)}).get_size('points') == 3
    assert ragged.after_gather({'points': 0}) == batch(b=3)
    nested = batch(b=2) & spatial(t=2) & instance(p=NonUniform(((1, 2), (3, 4)), ('b', 't')))
    assert nested.after_gather({'t': 1}).get_size('p') == NonUniform((2, 4), ('b',))
    assert nested.after_gather({'b': 1, 't': 0}).get_size('p') == 3


# --- merge and concat ---


def test_merge_order_and_fast_paths():
    assert merge_shapes(channel(vector=2), spatial(x=4), batch(b=1)).names == ('b', 'x', 'vector')
    assert merge_shapes(spatial(y=1), spatial(x=2), batch(b=1), spatial(x=2)).names == ('b', 'y', 'x')
    assert merge_shapes(FULL, FULL) is FULL
    assert merge_shapes(FULL, EMPTY_SHAPE) is FULL and merge_shapes(EMPTY_SHAPE, FULL) is FULL
    assert merge_shapes(FULL, spatial(x=64)) is FULL and merge_shapes(spatial(x=64), FULL) is FULL
    assert merge_shapes(FULL, spatial('x')) is FULL
    assert merge_shapes() == EMPTY_SHAPE and merge_shapes(FULL) is FULL
    assert merge_shapes(EMPTY_SHAPE, EMPTY_SHAPE, EMPTY_SHAPE) == EMPTY_SHAPE
    assert spatial(x=4) & batch(b=2) == batch(b=2) & spatial(x=4)


def test_merge_fills_unknowns():
    assert merge_shapes(spatial('x') & batch(b=2), spatial(x=4)) == batch(b=2) & spatial(x=4)
    assert merge_shapes(channel('v') & batch(b=2), channel(v='p,q')) == batch(b=2) & channel(v='p,q')
    assert merge_shapes(channel(v=2) & batch(b=2), channel(v='p,q')) == batch(b=2) & channel(v='p,q')
    assert merge_shapes(spatial('x'), spatial(x=3), spatial('x')) == spatial(x=3)


def test_merge_accepts_shaped_objects():
    assert merge_shapes(Shaped(spatial(x=2)), 1.5, channel(v=3)) == spatial(x=2) & channel(v=3)
    assert spatial(x=2) & Shaped(batch(b=2)) == batch(b=2) & spatial(x=2)
    with pytest.raises(TypeError, match=r'Cannot determine the Shape of a test_shape\.Opaque'):
        merge_shapes(spatial(x=2), Opaque())


@pytest.mark.parametrize('a, b, message', [
    (spatial(x=4), spatial(x=5), r"Cannot merge \(xˢ=4\) and \(xˢ=5\): dim 'x' has size 4 in one and 5 in the other"),
    (spatial(x=4), channel(x=4), r"Cannot merge \(xˢ=4\) and \(xᶜ=4\): dim 'x' is spatial in one and channel in"),
    (channel(v='a,b'), channel(v='a,c'), r"dim 'v' has labels \('a', 'b'\) in one and \('a', 'c'\) in the other"),
    (batch(b=1) & spatial(x=4), spatial(x=5) & channel(c=1), r"Cannot merge \(bᵇ=1, xˢ=4\) and \(xˢ=5, cᶜ=1\)"),
])
def test_merge_conflicts(a, b, message):
    with pytest.raises(IncompatibleShapes, match=message):
        merge_shapes(a, b)
    with pytest.raises(ValueError):
        a & b


def test_merge_conflict_names_the_shape_the_size_came_from():
    with pytest.raises(IncompatibleShapes, match=r"Cannot merge \(xˢ=3\) and \(xˢ=4\)"):
        merge_shapes(spatial('x'), spatial(x=3), spatial(x=4))


def test_merge_allow_varying_sizes():
    merged = merge_shapes(spatial(x=4), spatial(x=5) & batch(b=2), allow_varying_sizes=True)
    assert merged == batch(b=2) & spatial('x')
    assert merge_shapes(spatial(x=4), spatial(x=5), spatial(x=6), allow_varying_sizes=True) == spatial('x')
    assert merge_shapes(spatial(x=4), spatial(x=5), spatial('x'), allow_varying_sizes=True) == spatial('x')
    assert merge_shapes(channel(v='a,b'), channel(v='a,b,c'), allow_varying_sizes=True) == channel('v')
    with pytest.raises(IncompatibleShapes, match='is spatial in one and batch in the other'):
        merge_shapes(spatial(x=4), batch(x=4), allow_varying_sizes=True)
    with pytest.raises(IncompatibleShapes, match='has labels'):
        merge_shapes(channel(v='a,b'), channel(v='a,c'), allow_varying_sizes=True)


def test_concat_shapes():
    assert concat_shapes(channel(v=2), spatial(x=3)).names == ('v', 'x')
    assert concat_shapes(channel(v=2), EMPTY_SHAPE, Shaped(batch(b=1))).names == ('v', 'b')
    assert concat_shapes() == EMPTY_SHAPE and concat_shapes(FULL) is FULL
    with pytest.raises(IncompatibleShapes, match=r"Concatenating \(xˢ=3\), \(xˢ=3\) would give .* dim 'x' appears"):
        concat_shapes(spatial(x=3), spatial(x=3))


# --- constructors and filters ---


def test_constructors():
    assert batch('b') == Shape((None,), ('b',), (BATCH,), (None,))
    assert spatial('x,y', 'z').names == ('x', 'y', 'z')
    assert spatial(' x , y ').names == ('x', 'y')
    assert spatial('x', y=3, z=None).sizes == (None, 3, None)
    assert channel(vector='x,y') == Shape((2,), ('vector',), (CHANNEL,), (('x', 'y'),))
    assert channel(vector=('x', 'y')) == channel(vector=['x', 'y']) == channel(vector='x, y')
    assert instance(points=np.int64(3)) == instance(points=3)
    ragged = NonUniform((1, 2), ('b',))
    assert instance(points=ragged).size is ragged
    assert dual('x').names == ('~x',) and dual('~x').names == ('~x',) and dual(x=2).name == '~x'
    assert dual(**{'~x': 2}) == dual(x=2)
    assert batch() == EMPTY_SHAPE


def test_constructor_names_and_order():
    for constructor, dim_type in [(batch, BATCH), (dual, DUAL), (instance, INSTANCE), (spatial, SPATIAL),
                                  (channel, CHANNEL)]:
        assert constructor.__name__ == dim_type and dim_type in constructor.__doc__
        assert constructor('a', c=1, b=2).types == (dim_type,) * 3
    assert spatial('b', c=1, a=2).names == ('b', 'c', 'a')


def test_constructors_filter():
    assert batch(FULL) == batch(b=4) and dual(FULL) == dual(x=3) and instance(FULL) == instance(points=10)
    assert spatial(Shaped(FULL)) == spatial(x=64) and channel(FULL) == channel(vector='x,y')
    assert spatial(channel(v=2)) == EMPTY_SHAPE
    with pytest.raises(TypeError, match=r"spatial\(\) filters exactly one Shape"):
        spatial(FULL, x=3)
    with pytest.raises(TypeError, match=r"filters exactly one Shape"):
        spatial(FULL, FULL)
    with pytest.raises(TypeError, match=r"spatial\(\) takes dim names as str or one Shape to filter, but got 3"):
        spatial('x', 3)


@pytest.mark.parametrize('call, message', [
    (lambda: spatial('1x'), r"Invalid dim name '1x': names must be Python identifiers"),
    (lambda: spatial('x-y'), r"Invalid dim name 'x-y'"),
    (lambda: spatial(''), r"Invalid dim name ''"),
    (lambda: spatial('x,'), r"Invalid dim name ''"),
    (lambda: spatial('~x'), r"Invalid dim name '~x'.*only dual dims may start with '~'"),
    (lambda: dual('~~x'), r"Invalid dim name '~~x'.*optionally prefixed by '~'"),
    (lambda: spatial(x=-1), r"Invalid size -1 for dim 'x': expected an int >= 0, None"),
    (lambda: spatial(x=2.0), r"Invalid size 2\.0 for dim 'x'"),
    (lambda: spatial(x=True), r"Invalid size True for dim 'x'"),
    (lambda: spatial(x=[1, 2]), r"Invalid size \[1, 2\] for dim 'x'"),
    (lambda: channel(v='a,a'), r"Invalid labels 'a,a' for dim 'v': labels must be non-empty and distinct"),
    (lambda: channel(v='a,,b'), r"Invalid labels 'a,,b' for dim 'v'"),
    (lambda: channel(v=()), r"Invalid labels \(\) for dim 'v'"),
    (lambda: spatial('x', x=2), r"Dim 'x' is given more than once"),
    (lambda: dual('x', **{'~x': 2}), r"Dim '~x' is given more than once"),
])
def test_constructor_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_non_type_functions():
    assert non_batch(FULL) == FULL.non_batch and non_dual(FULL) == FULL.non_dual
    assert primal(FULL) == FULL.primal and non_primal(FULL) == FULL.non_primal
    assert non_instance(Shaped(FULL)) == FULL.non_instance
    assert non_spatial(FULL) == FULL.non_spatial and non_channel(FULL) == FULL.non_channel
    assert non_batch.__name__ == 'non_batch' and 'batch' in non_batch.__doc__
    assert non_batch(2) == EMPTY_SHAPE


# --- resolve_dims, parse_dim_spec, shape_of ---


def test_resolve_dims():
    assert resolve_dims(None) == ()
    assert resolve_dims('x') == ('x',)
    assert resolve_dims(' x, y ,z') == ('x', 'y', 'z')
    assert resolve_dims('') == ()
    assert resolve_dims(('x', 'y,z')) == ('x', 'y', 'z')
    assert resolve_dims(['x', spatial('a,b'), None]) == ('x', 'a', 'b')
    assert resolve_dims(FULL) == FULL.names
    assert resolve_dims(spatial, FULL) == ('x',)
    assert resolve_dims(non_batch, FULL) == FULL.non_batch.names
    assert resolve_dims([batch, 'q'], FULL) == ('b', 'q')
    assert resolve_dims(lambda s: s[:2], FULL) == ('b', '~x')
    assert resolve_dims(('x', ['y', ('z',)])) == ('x', 'y', 'z')


def test_resolve_dims_caches_strings_and_tuples():
    assert resolve_dims('p,q,r') is resolve_dims('p,q,r')
    key = ('p', 'q')
    assert resolve_dims(key) is resolve_dims(('p', 'q'))
    assert resolve_dims(['p', 'q']) == key


def test_resolve_dims_str_subclass():
    class Name(str):
        pass

    assert resolve_dims(Name('x,y')) == ('x', 'y')


def test_a_set_of_dims_takes_the_order_of_the_shape_then_of_the_names():
    assert resolve_dims({'vector', 'points', 'b'}, FULL) == ('b', 'points', 'vector')
    assert resolve_dims({'vector', 'zz', 'b'}, FULL) == ('b', 'vector', 'zz')
    assert resolve_dims(frozenset({'v', 'u'})) == ('u', 'v')


@pytest.mark.parametrize('dims, shape, message', [
    (3, None, r"Invalid dim filter 3 of type int: expected None, a str like 'x,y', a Shape"),
    ({'x': 1}, None, r"Invalid dim filter \{'x': 1\} of type dict"),
    (['x', 2.5], None, r"Invalid dim filter 2\.5 of type float"),
    (spatial, None, r"The dim filter 'spatial' is a function, which needs a shape to act on"),
    (lambda s: 'x', FULL, r"The dim filter '<lambda>' returned str instead of a Shape"),
])
def test_resolve_dims_errors(dims, shape, message):
    with pytest.raises(TypeError, match=message):
        resolve_dims(dims, shape)


def test_parse_dim_spec():
    spec = parse_dim_spec('b:b, x:s,~y:d, d:d, points:i, vector:c')
    assert spec.names == ('b', 'x', '~y', '~d', 'points', 'vector')
    assert spec.types == (BATCH, SPATIAL, DUAL, DUAL, INSTANCE, CHANNEL)
    assert spec.sizes == (None,) * 6 and spec.labels == (None,) * 6
    assert parse_dim_spec('') == EMPTY_SHAPE


def test_parse_dim_spec_forms_of_phiml():
    assert parse_dim_spec('points:i,(x,y)') == instance('points') & channel(vector='x,y')
    assert parse_dim_spec('row:c,~col') == channel('row') + dual('col')  # in the order written
    assert parse_dim_spec('b:b,x') == batch('b') & spatial('x')
    assert parse_dim_spec('x:spatial, t:batch') == spatial('x') + batch('t')
    assert parse_dim_spec('~vector:d=(a,b)') == dual(vector='a,b')
    assert parse_dim_spec('rgb=(r,g,b)') == channel(rgb='r,g,b')
    assert parse_dim_spec('~(u,v)') == dual(vector='u,v')
    assert parse_dim_spec('name', default_type=INSTANCE) == instance('name')


@pytest.mark.parametrize('spec, error, message', [
    ('xy', ValueError, r"Invalid dim spec 'xy': the dim 'xy' needs a type, as in 'xy:s'"),
    ('b:b,x:q', ValueError, r"Invalid dim type 'q' in the dim spec 'b:b,x:q': expected one of b, d, i, s, c"),
    ('~x:s', ValueError, r"Invalid dim spec '~x:s': only dual dims are written with a '~'"),
    ('1x:s', ValueError, r"Invalid dim name '1x'"),
    ('x:s,x:c', ValueError, r"Dim 'x' appears more than once in 'x:s,x:c'"),
    ('x:s;y:s', ValueError, r"Invalid dim spec 'x:s;y:s' at 'x:s;y:s'"),
    (['x:s'], TypeError, r"A dim spec must be a str like 'b:b,x:s,vector:c' but got \['x:s'\]"),
])
def test_parse_dim_spec_errors(spec, error, message):
    with pytest.raises(error, match=message):
        parse_dim_spec(spec)


def test_shape_of():
    assert shape_of(FULL) is FULL
    assert shape_of(Shaped(FULL)) is FULL
    for number in (1, 2.5, 1j, True):
        assert shape_of(number) is EMPTY_SHAPE
    with pytest.raises(TypeError, match=r"Cannot determine the Shape of a test_shape\.Opaque: expected a Shape"):
        shape_of(Opaque())
    with pytest.raises(TypeError, match=r"Cannot determine the Shape of a test_shape\.Shaped"):
        shape_of(Shaped((3,)))


# --- properties ---

CANONICAL = {t: i for i, t in enumerate(DIM_TYPES)}


@given(compatible_shapes(2))
def test_merge_commutes_up_to_order_within_type(pair):
    a, b = pair
    ab, ba = merge_shapes(a, b), merge_shapes(b, a)
    assert dims_of(ab) == dims_of(ba)
    assert sorted(ab.types, key=CANONICAL.get) == sorted(ba.types, key=CANONICAL.get)


@given(compatible_shapes(2))
def test_merge_holds_all_dims_and_is_canonical(pair):
    a, b = pair
    merged = a & b
    assert a in merged and b in merged
    assert dims_of(merged) == {**dims_of(a), **dims_of(b)}
    if merged is not a and merged is not b:
        assert list(merged.types) == sorted(merged.types, key=CANONICAL.get)


@given(compatible_shapes(3, hide=True))
def test_merge_keeps_whatever_is_known(shapes_):
    merged = merge_shapes(*shapes_)
    for name, (size, dim_type, labels) in dims_of(merged).items():
        known = [dims_of(s)[name] for s in shapes_ if name in s]
        assert all(t == dim_type for _, t, _ in known)
        assert size == next((s for s, _, _ in known if s is not None), None)
        assert labels == next((lab for _, _, lab in known if lab is not None), None)
    assert dims_of(merged) == dims_of(merge_shapes(*reversed(shapes_)))


@given(compatible_shapes(3))
def test_merge_is_idempotent_and_associative_up_to_order(triple):
    a, b, c = triple
    assert merge_shapes(a, a) == a and merge_shapes(a, a, a) == a
    ab = merge_shapes(a, b)
    assert merge_shapes(ab, b) == ab and merge_shapes(ab, a) == ab
    assert dims_of(merge_shapes(ab, c)) == dims_of(merge_shapes(a, merge_shapes(b, c))) == dims_of(
        merge_shapes(a, b, c))


@given(shapes(), st.data())
def test_only_and_without_partition_the_shape(shape, data):
    selection = data.draw(sub_shapes(shape))
    kept, dropped = shape.only(selection), shape.without(selection)
    assert kept.isdisjoint(dropped)
    assert dims_of(concat_shapes(kept, dropped)) == dims_of(shape)
    assert dims_of(merge_shapes(kept, dropped)) == dims_of(shape)
    assert shape.only(selection, reorder=True).names == selection.names


@given(shapes(with_labels=False), st.data())
def test_after_gather_matches_numpy_slicing(shape, data):
    index = st.integers(-6, 6) | st.none()
    slices = st.builds(slice, index, index, st.sampled_from([None, 1, 2, 3, -1, -2]))
    selection = {n: data.draw(slices | st.integers(-s, s - 1)) for n, s in zip(shape.names, shape.sizes, strict=True)}
    expected = np.empty(shape.sizes)[tuple(selection.values())].shape
    assert shape.after_gather(selection).sizes == expected


@given(shapes(min_rank=1), st.data())
def test_after_gather_with_index_list_matches_numpy(shape, data):
    name = data.draw(st.sampled_from(shape.names))
    size = shape.get_size(name)
    picks = data.draw(st.lists(st.integers(-size, size - 1), max_size=6))
    result = shape.after_gather({name: picks})
    expected = np.empty(shape.sizes)[tuple(picks if n == name else slice(None) for n in shape.names)].shape
    assert result.sizes == expected and result.names == shape.names
    labels = shape.get_labels(name)
    assert result.get_labels(name) == (None if labels is None else tuple(labels[i] for i in picks))


@given(shapes())
def test_pickle_round_trip(shape):
    assert pickle.loads(pickle.dumps(shape)) == shape


@given(shapes())
def test_repr_never_raises(shape):
    text = repr(shape)
    assert all(n in text for n in shape.names)


@given(shapes())
def test_type_properties_partition_the_shape(shape):
    parts = [shape.batch, shape.dual, shape.instance, shape.spatial, shape.channel]
    assert sum(len(p) for p in parts) == len(shape)
    merged = merge_shapes(*parts)
    assert dims_of(merged) == dims_of(shape)
    assert list(merged.types) == sorted(shape.types, key=CANONICAL.get)
    for part, others in zip(parts, [shape.non_batch, shape.non_dual, shape.non_instance, shape.non_spatial,
                                    shape.non_channel], strict=True):
        assert dims_of(concat_shapes(part, others)) == dims_of(shape)


@given(shapes())
def test_type_conversion_round_trip(shape):
    assert all(n.startswith('~') for n in shape.as_dual().names)
    assert not any(n.startswith('~') for n in shape.as_channel().names)
    assert shape.as_spatial().as_dual().as_spatial() == shape.as_spatial()


# --- the Shape members phiml has ---


def test_shape_arithmetic_and_concatenation():
    s = spatial(x=3, y=2)
    assert s + 1 == spatial(x=4, y=3) and s - 1 == spatial(x=2, y=1)
    assert (s + channel(vector='a,b')).names == ('x', 'y', 'vector')
    assert (spatial(x=3) + batch(b=2)).names == ('x', 'b')  # `+` keeps the order written
    assert s - 'x' == spatial(y=2) and s - spatial == EMPTY_SHAPE and s - ['y'] == spatial(x=3)
    with pytest.raises(ValueError, match=r"batch dims do not allow"):
        batch(b=2) + 1
    with pytest.raises(ValueError, match=r"sizes that stay >= 0"):
        spatial(x=0) - 1


def test_and_dual_appends_dual_twins_of_primal_dims():
    s = batch(b=2) & spatial(x=10) & channel(vector='x,y')
    assert (s & dual) == s + dual(x=10, vector='x,y')
    assert (dual & s) == s & dual
    with pytest.raises(TypeError, match=r"only `dual` can be merged as a function"):
        s & spatial


def test_counts_and_sub_shapes():
    s = batch(b=2) & dual(x=2) & instance(p=1) & spatial(x=3, y=None) & channel(vector='u,v')
    assert (s.batch_rank, s.dual_rank, s.instance_rank, s.spatial_rank, s.channel_rank) == (1, 1, 1, 2, 1)
    assert s.singleton == instance(p=1) and s.non_singleton.names == ('b', '~x', 'x', 'y', 'vector')
    assert s.undefined == spatial('y') and s.defined.names == ('b', '~x', 'p', 'x', 'vector')
    assert not s.well_defined and s.defined.well_defined
    assert s.name_list == list(s.names) and s.reversed.names == s.names[::-1]
    assert s.untyped_dict == {'b': 2, '~x': 2, 'p': 1, 'x': 3, 'y': None, 'vector': ('u', 'v')}
    assert spatial(x=2, y=3).dim_type == SPATIAL and s.get_dim_type('~x') == DUAL
    with pytest.raises(ValueError, match=r"needs dims of one type"):
        _ = s.dim_type


def test_non_uniform_members():
    from lazyphi.math.kinds import stacked_shape
    s = stacked_shape([spatial(x=3, y=3), spatial(x=3, y=4)], batch(stack=2))
    assert s.is_non_uniform and s.non_uniform == s['y'] and s.non_uniform_shape == batch(stack=2)
    assert s.unstack('stack') == (spatial(x=3, y=3), spatial(x=3, y=4))
    assert not spatial(x=2).is_non_uniform and spatial(x=2).non_uniform_shape == EMPTY_SHAPE


def test_compatibility_sizes_masks_and_indices():
    s = spatial(x=2, y=3) & channel(vector='a,b')
    assert s.is_compatible(spatial(x=2)) and not s.is_compatible(spatial(x=3))
    assert s.without_sizes() == spatial('x,y') & channel('vector')
    assert s.mask('vector,x') == (1, 0, 1)
    assert s.flipped('vector').get_item_names('vector') == ('b', 'a') and s.flipped('x') == s
    assert s.first_index() == {'x': 0, 'y': 0, 'vector': 0}
    assert s.first_index(names=True) == {'x': 0, 'y': 0, 'vector': 'a'}
    assert list(spatial(x=2, y=2).meshgrid()) == [{'x': 0, 'y': 0}, {'x': 0, 'y': 1}, {'x': 1, 'y': 0},
                                                  {'x': 1, 'y': 1}]
    assert s.after_pad({'x': (1, 2), 'vector': (0, 1), 'z': (5, 5)}) == spatial(x=5, y=3) & channel(vector=3)
    assert s.prepare_gather('vector', 'b') == 1 and s.prepare_gather('x', slice(1)) == slice(1)
    # as phiml: several items as a list, none as an empty slice, a Shape by the labels its dims name
    assert s.prepare_gather('vector', 'b,a') == [1, 0] and s.prepare_gather('x', (0, -1)) == [0, -1]
    assert s.prepare_gather('vector', []) == slice(0, 0) and s.prepare_gather('vector', channel('b')) == 1
    assert s.prepare_gather('vector', channel('a,b')) == [0, 1]
    assert resolve_index(s, {'vector': 'a,b', 'x': 1, 'y': slice(2)}) == {'vector': [0, 1], 'x': 1, 'y': slice(2)}
    assert batch(b='0,') == batch(b=('0',))  # a trailing comma makes one label explicit
