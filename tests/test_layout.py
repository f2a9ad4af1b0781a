"""Layouts: tensors holding trees of Python objects (strings, None, any object, numbers, tensors)."""

import pickle

import numpy as np
import pytest

from lazyphi import math
from lazyphi._errors import IncompatibleShapes, NotConvertible
from lazyphi.backend import OBJECTS, DType, default_backend
from lazyphi.math import Layout, NonUniform, batch, channel, instance, spatial, wrap


def test_a_tree_is_the_native_and_dict_keys_label_their_dim():
    tree = {'a': 'text', 'b': [0, 1]}
    t = math.layout(tree, channel('dict,inner'))
    assert t.native() is tree
    assert t.shape.get_item_names('dict') == ('a', 'b')
    assert t.shape.get_size('inner') == NonUniform((4, 2), ('dict',))
    assert t.dict['a'].inner[1].native() == 'e'
    assert t.inner[1].native() == ('e', 1)
    assert t.dict['b'].shape == channel(inner=2)


def test_dict_keys_that_differ_between_branches_give_no_labels():
    t = math.layout([{'a': 1}, {'b': 2}], channel('outer,dict'))
    assert t.shape.get_item_names('dict') is None
    assert t.dict[0].native() == [1, 2]
    assert list(t) == [1, 2]


def test_given_labels_and_sizes_are_checked():
    t = math.layout(['a', 'b', 'c'], channel(letters='a,b,c'))
    assert t.letters['b, a'].letters['a'].native() == 'a'
    with pytest.raises(IncompatibleShapes, match='2 labels'):
        math.layout(['a', 'b', 'c'], channel(letters='a,b'))
    with pytest.raises(IncompatibleShapes, match='size 2'):
        math.layout(['a', 'b', 'c'], channel(letters=2))
    with pytest.raises(ValueError, match='fewer dims'):
        math.layout([1, 2], channel('a,b'))


def test_wrap_makes_layouts_of_non_numbers_and_tensor_refuses_them():
    for value in ['abc', ('a', 'b', 'c'), math.layout('a'), None, ['a', object()]]:
        assert isinstance(wrap(value), Layout)
    assert wrap(['a', object()]).shape == channel(vector=2)
    assert isinstance(math.tensor('abc'), Layout)
    with pytest.raises(NotConvertible, match='not numbers'):
        math.tensor(['a', object()])
    with pytest.raises(AssertionError):  # as phiml raises
        math.tensor(['a', object()])
    with pytest.raises(NotConvertible, match='object'):
        math.tensor(object())


def test_layouts_hold_python_objects_not_arrays():
    t = math.layout(None)
    assert t.native() is None and t.default_backend is None and t.device is None and t.backend is OBJECTS
    assert t.v[0].native() is None  # slicing a dim the layout lacks changes nothing
    assert repr(math.layout({'a': 1})) == "{'a': 1}"
    assert f'{math.layout(3.14159):.2f}' == '3.14'
    assert math.layout('Hi').dtype == DType(str) and math.layout([1, 2], channel('v')).dtype == DType(int, 64)
    assert math.layout([1, 'a'], channel('v')).dtype == DType(object)
    assert int(math.layout(1.5)) == 1 and float(math.layout(1.5)) == 1.5 and complex(math.layout(1.5)) == 1.5
    assert math.layout('a') and not math.layout(0) and not math.layout('')
    assert math.layout([7], channel('v')).item() == 7


def test_stacking_expanding_and_renaming_keep_the_tree():
    a, b = math.layout(['x', 'y'], spatial('letters')), math.layout(['u', 'v'], spatial('letters'))
    stacked = math.stack([a, b], batch('pair'))
    assert stacked.native() == [['x', 'y'], ['u', 'v']] and stacked.shape == batch(pair=2) & spatial(letters=2)
    expanded = math.expand(a, batch(b=3))
    assert expanded.shape == batch(b=3) & spatial(letters=2)
    assert expanded.native('b,letters') == [['x', 'y']] * 3
    assert expanded.native('letters,b') == [['x', 'x', 'x'], ['y', 'y', 'y']]
    renamed = math.rename_dims(a, 'letters', instance('chars'))
    assert renamed.shape == instance(chars=2) and renamed.native() == ['x', 'y']
    assert pickle.loads(pickle.dumps(a)).native() == ['x', 'y']


def test_element_wise_operations_apply_leaf_by_leaf(backend):
    numbers = math.layout({'a': [1, 2], 'b': (0, 1)}, channel('letter,index'))
    assert numbers.shape == channel(letter='a,b', index=2)
    doubled = numbers * 2
    assert isinstance(doubled, Layout) and doubled.native() == {'a': [2, 4], 'b': (0, 2)}
    math.assert_close(2 * numbers, numbers + numbers)
    math.assert_close(math.cast(numbers, bool), [[True, True], [False, True]])
    with_tensors = numbers * math.tensor([1, -1])  # leaves become tensors of the default backend
    assert with_tensors.shape == channel(letter='a,b', index=2, vector=2)
    math.assert_close(with_tensors.vector[0], numbers)
    math.assert_close(math.flatten(with_tensors.index[1]), [2, -2, 1, -1])
    assert math.flatten(with_tensors).backend is default_backend()
    equal = wrap(['a', 'b']) == wrap(['a', 'c'])
    assert isinstance(equal, Layout) and equal.native() == [True, False]
    assert (wrap(['a', 'b']) != 'a').native() == [False, True]
    assert (wrap(['a', 'b']) + '!').native() == ['a!', 'b!']


def test_operations_without_meaning_for_a_leaf_are_type_errors():
    with pytest.raises(TypeError, match="sin is not defined for layout values of type str"):
        math.sin(wrap(['a', 'b']))
    with pytest.raises(TypeError, match="sub is not defined for layout values of type str, int"):
        wrap(['a', 'b']) - 1
    with pytest.raises(TypeError, match='needs numbers'):
        _ = wrap(['a', 'b']).mean


def test_reductions():
    assert math.layout('Hi').all and math.layout('Hi').any
    v = math.layout([0, 1, 2], channel('vector'))
    assert not v.all and v.any
    math.assert_close(v.mean, 1)
    math.assert_close(v.std, np.sqrt(2 / 3))
    math.assert_close(v.min, 0)
    math.assert_close(v.max, 2)
    math.assert_close(math.sum(v, 'vector'), 3)


def test_save_and_load_layouts_with_tensor_leaves(tmp_path):
    files = math.layout(['A', 'test/filename.png', math.ones(spatial(x='a,b,c'))], 'example:b')
    math.save(str(tmp_path / 'files.npz'), files)
    loaded = math.load(str(tmp_path / 'files.npz'))
    assert loaded.example[0].native() == 'A'
    assert (loaded.example[2] == 1).all
    assert loaded.example[2].shape == spatial(x='a,b,c')


def test_broadcast_formatting_gives_a_layout_of_strings():
    t = math.range(spatial(x=3))
    scenes = -math.f - f'run_{t + 1}/sim_{t:.1f}'
    assert isinstance(scenes, Layout) and scenes.shape == spatial(x=3)
    assert scenes.native() == ['run_1/sim_0.0', 'run_2/sim_1.0', 'run_3/sim_2.0']
    assert scenes.x[1] == 'run_2/sim_1.0'
    grid = -math.f - f'{math.range(batch(b=2))}-{math.range(spatial(x=2))}'
    assert grid.native('b,x') == [['0-0', '0-1'], ['1-0', '1-1']]
    assert -math.f - 'plain' == 'plain'
    with pytest.raises(TypeError, match='-f-f'):
        math.f - 'no leading minus'
