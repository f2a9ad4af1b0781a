"""state_dict / from_state_dict round trips, and moving every tensor of a tree to another backend or device."""

import collections
import dataclasses
import functools
from typing import Annotated, Any

import numpy as np
import pytest
from backends import BACKEND_NAMES, get_backend

from lazyphi import math
from lazyphi.backend import NUMPY
from lazyphi.dataclasses._checked import AnnotationMismatch, checked
from lazyphi.dataclasses._state import from_state_dict, state_dict, to_backend, to_device
from lazyphi.math import Expanded, Stacked, Tensor, batch, channel, spatial

CALLS = collections.Counter()


def values(*dims, seed=0) -> Tensor:
    sizes = [d.size for d in dims]
    return math.tensor(np.random.default_rng(seed).normal(size=sizes), *dims)


@dataclasses.dataclass(frozen=True)
class Leaf:
    v: Tensor
    label: str = 'leaf'

    def __post_init__(self):
        CALLS['leaf_post_init'] += 1


@dataclasses.dataclass(frozen=True)
class Tree:
    a: Tensor
    leaf: Leaf
    parts: list[Tensor]
    table: dict[str, Tensor]
    pair: tuple[Tensor, Leaf]
    maybe: Leaf | None = None
    anything: Any = None
    sizes: tuple[int, int] = (1, 2)
    name: str = 'tree'
    empty: list[Tensor] = dataclasses.field(default_factory=list)
    derived: float = dataclasses.field(init=False, default=0.0)

    def __post_init__(self):
        CALLS['tree_post_init'] += 1
        object.__setattr__(self, 'derived', 1.0)

    @functools.cached_property
    def total(self) -> Tensor:
        CALLS['total'] += 1
        return math.sum(self.a, 'b')


def make_tree() -> Tree:
    t = values(batch(b=2), spatial(x=3))
    tree = Tree(t, Leaf(t + 1, 'first'), [t, t * 2], {'k': t * 3}, (t * 4, Leaf(t * 5)), None, Leaf(t), (3, 4), 'x',
                [])
    object.__setattr__(tree, 'derived', 7.5)  # an init=False field the state must restore
    return tree


def test_state_dict_is_flat_with_dotted_keys_following_the_annotations():
    tree = make_tree()
    state = state_dict(tree)
    assert list(state) == ['a', 'leaf.v', 'leaf.label', 'parts.0', 'parts.1', 'table.k', 'pair.0', 'pair.1.v',
                           'pair.1.label', 'maybe', 'anything', 'sizes', 'name', 'empty', 'derived']
    assert state['a'] is tree.a and state['parts.1'] is tree.parts[1]
    assert state['sizes'] == (3, 4) and state['name'] == 'x' and state['derived'] == 7.5
    assert state['maybe'] is None and state['empty'] == []
    assert state['anything'] is tree.anything  # annotated Any: kept whole, so that it can be rebuilt exactly


def test_round_trip_rebuilds_an_equal_tree_through_the_constructors():
    tree = make_tree()
    CALLS.clear()
    rebuilt = from_state_dict(Tree, state_dict(tree))
    assert type(rebuilt.pair) is tuple and type(rebuilt.parts) is list and type(rebuilt.pair[1]) is Leaf
    assert rebuilt.sizes == (3, 4) and rebuilt.name == 'x' and rebuilt.derived == 7.5
    assert rebuilt.leaf.label == 'first' and rebuilt.maybe is None and rebuilt.empty == []
    assert rebuilt.table['k'] is tree.table['k']
    assert state_dict(rebuilt).keys() == state_dict(tree).keys()
    for key, value in state_dict(tree).items():
        other = state_dict(rebuilt)[key]
        assert other is value or other == value or isinstance(value, Leaf)
    # each constructor ran once: the outer Tree and the two nested Leafs that were flattened
    assert CALLS == {'tree_post_init': 1, 'leaf_post_init': 2}
    assert 'total' not in vars(rebuilt)  # caches are not part of the state


def test_state_survives_a_numpy_file(tmp_path):
    tree = make_tree()
    state = state_dict(tree)
    arrays = {k: v.numpy(v.shape.names) for k, v in state.items() if isinstance(v, Tensor)}
    np.savez(tmp_path / 'state.npz', **arrays)
    with np.load(tmp_path / 'state.npz') as loaded:
        restored = {k: math.tensor(loaded[k], state[k].shape) if k in arrays else v for k, v in state.items()}
    rebuilt = from_state_dict(Tree, restored)
    np.testing.assert_array_equal(rebuilt.pair[1].v.numpy('b,x'), tree.pair[1].v.numpy('b,x'))


def test_from_state_dict_runs_validation():
    @checked
    @dataclasses.dataclass(frozen=True)
    class Checked:
        values: Annotated[Tensor, 'x:s']

    state = state_dict(Checked(values(spatial(x=3))))
    assert from_state_dict(Checked, state).values is state['values']
    with pytest.raises(AnnotationMismatch, match="dim 'x' is missing"):
        from_state_dict(Checked, {'values': values(spatial(y=3))})


def test_strict_and_lenient_loading():
    state = state_dict(make_tree())
    missing = {k: v for k, v in state.items() if k != 'leaf.label'}
    with pytest.raises(KeyError, match=r"no entry for leaf\.label \(Leaf\.label\)"):
        from_state_dict(Tree, missing)
    assert from_state_dict(Tree, missing, strict=False).leaf.label == 'leaf'  # the default
    with pytest.raises(KeyError, match=r"keys \['leaf\.extra'\] that name no field of Leaf"):
        from_state_dict(Tree, {**state, 'leaf.extra': 1})
    assert from_state_dict(Tree, {**state, 'leaf.extra': 1}, strict=False).leaf.label == 'first'


def test_nested_dicts_rebuild_the_dataclasses_their_annotations_declare():
    tree = make_tree()
    state = state_dict(tree)
    nested = {k: v for k, v in state.items() if not k.startswith(('leaf.', 'pair.'))}
    nested['leaf'] = {'v': state['leaf.v'], 'label': state['leaf.label']}
    nested['pair'] = {'0': state['pair.0'], '1': {'v': state['pair.1.v'], 'label': state['pair.1.label']}}
    rebuilt = from_state_dict(Tree, nested)
    assert type(rebuilt.leaf) is Leaf and rebuilt.leaf.label == 'first' and type(rebuilt.pair[1]) is Leaf
    assert math.equal(rebuilt.leaf.v, tree.leaf.v) and math.equal(rebuilt.pair[1].v, tree.pair[1].v)
    with pytest.raises(KeyError, match=r"keys \['leaf.w'\] that name no field of Leaf"):
        from_state_dict(Tree, {**nested, 'leaf': {'w': state['leaf.v'], 'label': 'x', 'v': state['leaf.v']}})
    loose = from_state_dict(Tree, {**state, 'anything': {'kept': 1}})
    assert loose.anything == {'kept': 1}  # no structure declared there: the dict is the value


def test_malformed_state_dicts_are_rejected_with_the_key():
    state = state_dict(make_tree())
    with pytest.raises(ValueError, match=r"value at 'leaf' and also keys under it"):
        from_state_dict(Tree, {**state, 'leaf': 1})
    with pytest.raises(ValueError, match=r"under 'parts' of a list must be numbered 0...1, but got \['0', '2'\]"):
        from_state_dict(Tree, {**{k: v for k, v in state.items() if k != 'parts.1'}, 'parts.2': state['a']})
    with pytest.raises(ValueError, match=r"keys under 'anything' \(v\), but the annotation there"):
        from_state_dict(Tree, {**{k: v for k, v in state.items() if k != 'anything'}, 'anything.v': state['a']})
    with pytest.raises(TypeError, match='takes a dataclass instance'):
        state_dict({'a': 1})
    with pytest.raises(TypeError, match='builds dataclasses'):
        from_state_dict(dict, {})


# --- backends and devices ----------------------------------------------------------------------


@pytest.mark.parametrize('name', BACKEND_NAMES)
def test_to_backend_moves_every_tensor_and_keeps_kinds_and_caches(name):
    target = get_backend(name)
    tree = make_tree()
    total = tree.total
    expanded = math.expand(values(spatial(x=3)), batch(b=2))
    stacked = math.stack([values(spatial(x=2)), values(spatial(x=3))], batch('b'))
    moved = to_backend({'tree': tree, 'lazy': (expanded, stacked), 'n': 3}, name)
    assert moved['n'] == 3
    assert all(t.backend is target for t in [moved['tree'].a, moved['tree'].pair[1].v, *moved['lazy']])
    assert type(moved['lazy'][0]) is Expanded and type(moved['lazy'][1]) is Stacked
    assert moved['tree'].total.backend is target and 'total' in vars(moved['tree'])
    np.testing.assert_allclose(moved['tree'].total.numpy('x'), total.numpy('x'))
    np.testing.assert_allclose(moved['lazy'][1][{'b': 1}].numpy('x'), stacked[{'b': 1}].numpy('x'))
    back = to_backend(moved, NUMPY)
    assert back['tree'].parts[0].backend is NUMPY


@pytest.mark.parametrize('name', BACKEND_NAMES)
def test_to_device_places_tensors_on_a_device(name):
    backend = get_backend(name)
    device = backend.list_devices('CPU')[0]
    tree = to_device(make_tree(), device)
    assert tree.a.backend is backend
    assert backend.get_device(tree.leaf.v.native()) == device
    same = to_device(tree, 'CPU')
    assert same.a.backend is backend
    with pytest.raises(ValueError, match="has no 'TPU' device"):
        to_device(make_tree(), 'TPU')


def test_to_backend_of_unknown_name_is_a_value_error():
    with pytest.raises(ValueError, match="Unknown backend 'nope'"):
        to_backend(make_tree(), 'nope')


def test_channel_labels_survive_a_backend_trip():
    t = values(channel(vector='x,y'))
    assert to_backend(t, NUMPY).shape.get_labels('vector') == ('x', 'y')
