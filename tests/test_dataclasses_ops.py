"""replace / copy construction, equal / data_eq, copy_and_mutate and dataclass_repr."""

import collections
import dataclasses
import functools
import threading

import numpy as np
import pytest
from backends import BACKEND_NAMES, get_backend
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import shapes

import lazyphi.dataclasses as jdc
from lazyphi import math
from lazyphi.dataclasses import (
    cached_property,
    cached_values,
    copy,
    copy_and_mutate,
    data_eq,
    dataclass_repr,
    equal,
    replace,
)
from lazyphi.math import Shape, Tensor, batch, channel, spatial

CALLS = collections.Counter()


@pytest.fixture(autouse=True)
def reset_calls():
    CALLS.clear()


def field(seed=0, n=3, dtype=np.float64) -> Tensor:
    return math.tensor(np.random.default_rng(seed).normal(size=n).astype(dtype), spatial('x'))


@dataclasses.dataclass(frozen=True)
class Particle:
    position: Tensor
    velocity: Tensor
    name: str = 'p'
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        CALLS['post_init'] += 1
        if not self.name:
            raise ValueError('name must not be empty')

    @cached_property
    def energy(self):
        CALLS['energy'] += 1
        return math.sum(self.velocity ** 2, 'x')

    @functools.cached_property
    def label(self):
        CALLS['label'] += 1
        return self.name.upper()

    @cached_property
    def tag_count(self):
        CALLS['tag_count'] += 1
        return len(self.tags)


def particle(seed=0, **kwargs) -> Particle:
    return Particle(field(seed), field(seed + 1), **kwargs)


# --- replace and copy ----------------------------------------------------------------------------


def test_replace_runs_post_init_and_validates():
    p = particle()
    CALLS.clear()
    q = replace(p, name='q')
    assert CALLS['post_init'] == 1 and q.name == 'q' and q.position is p.position
    with pytest.raises(ValueError, match='must not be empty'):
        replace(p, name='')


def test_replace_rejects_unknown_fields_naming_them_and_the_fields():
    with pytest.raises(TypeError, match=r"no field\(s\) 'speed', 'mass'; its fields are position, velocity, name"):
        replace(particle(), speed=1, mass=2)
    with pytest.raises(TypeError, match='dataclass instance'):
        replace(Particle, name='x')
    with pytest.raises(TypeError, match='dataclass instance'):
        copy(3)


def test_replace_of_init_false_field_and_initvar():
    @dataclasses.dataclass(frozen=True)
    class Scaled:
        base: float
        factor: dataclasses.InitVar[float] = 1.
        value: float = dataclasses.field(init=False)

        def __post_init__(self, factor):
            object.__setattr__(self, 'value', self.base * factor)

    s = Scaled(2., 3.)
    assert s.value == 6.
    assert replace(s, base=4.).value == 4.  # the InitVar takes its default again
    assert replace(s, factor=5.).value == 10.
    with pytest.raises(ValueError, match='init=False'):
        replace(s, value=1.)


def test_call_metaclass_decides_whether_the_metaclass_call_runs():
    class Counting(type):
        def __call__(cls, *args, **kwargs):
            CALLS['metaclass'] += 1
            return super().__call__(*args, **kwargs)

    @dataclasses.dataclass(frozen=True)
    class C(metaclass=Counting):
        a: float

        @cached_property
        def twice(self):
            return self.a * 2

    c = C(1.)
    c.twice  # noqa: B018
    assert CALLS['metaclass'] == 1
    d = replace(c, a=2.)
    assert CALLS['metaclass'] == 1 and d.twice == 4.
    e = copy(c, call_metaclass=True)
    assert CALLS['metaclass'] == 2 and cached_values(e) == {'twice': 2.}
    assert replace(c, call_metaclass=True, a=3.).a == 3. and CALLS['metaclass'] == 3


def test_replace_and_copy_of_slots_and_plain_dataclasses():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: float
        b: float = 0.

    s = Slotted(1.)
    assert replace(s, b=2.) == Slotted(1., 2.) and copy(s) == s

    @dataclasses.dataclass
    class Mutable:
        a: float

        @cached_property
        def twice(self):
            return self.a * 2

    m = Mutable(1.)
    m.twice  # noqa: B018
    assert cached_values(replace(m, a=2.)) == {} and cached_values(replace(m)) == {'twice': 2.}


def test_cached_values_computed_by_post_init_are_not_overwritten():
    @dataclasses.dataclass(frozen=True)
    class Eager:
        a: float

        def __post_init__(self):
            self.twice  # noqa: B018

        @cached_property
        def twice(self):
            return self.a * 2

    assert replace(Eager(1.), a=5.).twice == 10.
    assert copy(Eager(1.)).twice == 2.


# --- equal and data_eq ---------------------------------------------------------------------------


def test_equal_compares_data_by_value_and_config_by_eq():
    a = particle(0)
    assert equal(a, particle(0))
    assert not equal(a, particle(1))
    assert not equal(a, particle(0, name='other'))
    assert not equal(a, 'not a particle')
    transposed = math.wrap(np.stack([a.position.numpy('x')] * 2), batch('b'), spatial('x'))
    assert equal(transposed, math.wrap(transposed.numpy('x,b'), spatial('x'), batch('b')))  # dim order is free


def test_equal_with_tolerances():
    t = field(0)
    bumped = t * (1 + 1e-6)
    assert not equal(t, bumped)
    assert equal(t, bumped, rel_tolerance=1e-5)
    assert equal(t, t + 1e-4, abs_tolerance=1e-3) and not equal(t, t + 1e-2, abs_tolerance=1e-3)
    assert equal(particle(0), replace(particle(0), velocity=particle(0).velocity + 1e-9), abs_tolerance=1e-6)
    assert equal(1.0, 1.0 + 1e-12, rel_tolerance=1e-9) and not equal(1.0, 1.1)


def test_equal_with_nan():
    t = math.wrap(np.array([1., np.nan]), spatial('x'))
    same_values = math.wrap(np.array([1., np.nan]), spatial('x'))
    assert equal(t, same_values) and equal(t, t)
    assert not equal(t, same_values, equal_nan=False) and not equal(t, t, equal_nan=False)
    assert equal(float('nan'), float('nan')) and not equal(float('nan'), float('nan'), equal_nan=False)


def test_equal_needs_same_dims():
    t = field(0)
    assert not equal(t, math.wrap(t.numpy('x'), channel('x')))  # another dim type
    assert not equal(t, math.wrap(t.numpy('x'), spatial('y')))
    assert not equal(t, field(0, n=4))
    assert not equal(math.wrap(1.), t)
    assert equal(math.wrap(2.), 2) and equal(2, math.wrap(2.))
    assert not equal(t, None)


def test_equal_on_trees_and_non_numeric_tensors():
    t = field(0)
    assert equal([t, {'k': (t, 1)}], [t * 1, {'k': (t * 1, 1)}])
    assert not equal([t], [t, t]) and not equal({'k': t}, {'j': t}) and not equal((t,), [t])
    ints = math.wrap(np.array([1, 2]), spatial('x'))
    assert equal(ints, math.wrap(np.array([1., 2.]), spatial('x')))
    assert not equal(ints, math.wrap(np.array([1, 3]), spatial('x')))
    assert equal(ints, math.wrap(np.array([1, 3]), spatial('x')), abs_tolerance=1)
    assert equal(np.array([1., 2.]), np.array([1., 2. + 1e-9]), abs_tolerance=1e-6)
    assert not equal(np.array([1., 2.]), np.array([1., 2., 3.]))


def test_equal_non_uniform_tensors():
    a = math.stack([field(0, n=2), field(1, n=3)], batch('b'))
    assert equal(a, math.stack([field(0, n=2), field(1, n=3)], batch('b')))
    assert not equal(a, math.stack([field(0, n=2), field(2, n=3)], batch('b')))


@settings(max_examples=30, deadline=None)
@given(s=shapes(max_rank=3, with_labels=False), rel=st.floats(1e-6, 1e-2), seed=st.integers(0, 1000))
def test_equal_is_reflexive_symmetric_and_respects_tolerance(s: Shape, rel: float, seed: int):
    values = np.random.default_rng(seed).uniform(1, 2, size=s.sizes)
    t = math.wrap(values, s)
    assert equal(t, t) and equal(t, t * 1)
    off = t * (1 + rel * 10)
    assert equal(t, off) == equal(off, t) == (s.volume == 0)
    assert equal(t, t * (1 + rel / 10), rel_tolerance=rel)


def test_data_eq_installs_value_equality_and_config_hash():
    @data_eq(abs_tolerance=1e-6)
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        value: Tensor
        name: str = 'f'

    @data_eq
    @dataclasses.dataclass
    class Mutable:
        value: Tensor

    t = field(0)
    a, b = Frozen(t), Frozen(t + 1e-9)
    assert a == b and not a.__ne__(b)
    assert a != Frozen(t + 1) and a != Frozen(t, name='g')
    assert hash(a) == hash(b) == hash(Frozen(t + 1))
    assert a.__eq__(3) is NotImplemented
    assert Mutable(t) == Mutable(t * 1)
    with pytest.raises(TypeError):
        hash(Mutable(t))
    nan = math.wrap(np.array([np.nan]), spatial('x'))
    assert Frozen(nan) == Frozen(nan * 1)


def test_data_eq_by_reference_and_without_nan_equality():
    @data_eq(compare_tensors_by_ref=True)
    @dataclasses.dataclass(frozen=True)
    class ByRef:
        value: Tensor
        items: tuple = ()

    @data_eq(equal_nan=False)
    @dataclasses.dataclass(frozen=True)
    class StrictNan:
        value: Tensor

    t = field(0)
    assert ByRef(t) == ByRef(t) and ByRef(t) != ByRef(t * 1)
    assert ByRef(t, (t,)) == ByRef(t, (t,)) and ByRef(t, (t,)) != ByRef(t, (t * 1,))
    nan = math.wrap(np.array([np.nan]), spatial('x'))
    assert StrictNan(nan) != StrictNan(nan)


def test_data_eq_usage_errors():
    with pytest.raises(TypeError, match='above @dataclass'):
        @dataclasses.dataclass
        @data_eq
        class Wrong:
            a: Tensor
    with pytest.raises(TypeError, match='eq=False'):
        @data_eq
        @dataclasses.dataclass(eq=False)
        class NoEq:
            a: Tensor


def test_data_eq_nested_dataclasses_and_compare_false():
    @data_eq
    @dataclasses.dataclass(frozen=True)
    class Outer:
        inner: Particle
        note: str = dataclasses.field(default='', compare=False)

    assert Outer(particle(0), note='x') == Outer(particle(0), note='y')
    assert Outer(particle(0)) != Outer(particle(1))


# --- copy_and_mutate -----------------------------------------------------------------------------


def test_copy_and_mutate_frozen_leaves_original_and_class_untouched():
    p = particle(0, tags=['a'])
    p.energy, p.label, p.tag_count  # noqa: B018
    own_setattr = vars(Particle)['__setattr__']
    with copy_and_mutate(p) as m:
        assert m is not p and m.position is p.position and m.tags is not p.tags
        m.velocity = field(5)
        m.name = 'm'
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.name = 'changed'
    assert vars(Particle)['__setattr__'] is own_setattr and '__delattr__' in vars(Particle)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = 'again'
    assert p.name == 'p' and p.velocity is not m.velocity
    assert set(cached_values(m)) == {'tag_count'}
    assert equal(m.energy, math.sum(field(5) ** 2, 'x')) and m.label == 'M'


def test_copy_and_mutate_detects_in_place_changes_of_containers():
    p = particle(0, tags=['a'])
    p.energy, p.tag_count  # noqa: B018
    with copy_and_mutate(p) as m:
        m.tags.append('b')
    assert p.tags == ['a'] and m.tags == ['a', 'b']
    assert set(cached_values(m)) == {'energy'} and m.tag_count == 2


def test_copy_and_mutate_on_non_frozen_and_delete():
    @dataclasses.dataclass
    class Box:
        value: Tensor
        extra: float = 0.

        @cached_property
        def twice(self):
            return self.value * 2

        @cached_property
        def extra_twice(self):
            return self.extra * 2

    b = Box(field(0))
    b.twice, b.extra_twice  # noqa: B018
    with copy_and_mutate(b) as m:
        m.extra = 1.
    assert set(cached_values(m)) == {'twice'} and m.extra_twice == 2.
    with copy_and_mutate(particle(tags=[field(0)]), validate=False) as m:
        del m.tags
    assert not hasattr(m, 'tags')
    with pytest.raises(ValueError, match=r'Particle\.tags\[0\] changed its shape from .* to nothing'), \
            copy_and_mutate(particle(tags=[field(0)])) as m:
        del m.tags


def test_copy_and_mutate_validation_errors():
    p = particle(0)
    with pytest.raises(ValueError, match=r"Particle\.velocity changed its shape from \(xˢ=3\) .* to \(xˢ=4\)"), \
            copy_and_mutate(p) as m:
        m.velocity = field(0, n=4)
    with pytest.raises(ValueError, match=r'Particle\.velocity changed its dtype from float64 to float32'), \
            copy_and_mutate(p) as m:
        m.velocity = field(0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"Particle\.position changed its shape from \(xˢ=3\) .* to \(\)"), \
            copy_and_mutate(p) as m:
        m.position = 1.0
    with pytest.raises(ValueError, match='changed its shape'), copy_and_mutate(p) as m:
        m.position = 'text'
    with copy_and_mutate(p, validate=False) as m:
        m.velocity = field(0, n=4)
    assert m.velocity.shape.get_size('x') == 4
    with copy_and_mutate(p) as m:  # another dim order is the same shape
        m.velocity = math.wrap(m.velocity.numpy('x'), spatial('x'))


def test_copy_and_mutate_validates_nested_structures():
    @dataclasses.dataclass(frozen=True)
    class Holder:
        parts: list
        table: dict
        inner: Particle

    h = Holder([field(0)], {'k': field(1)}, particle())
    with pytest.raises(ValueError, match=r'Holder\.parts\[0\] changed its shape'), copy_and_mutate(h) as m:
        m.parts[0] = field(0, n=5)
    with pytest.raises(ValueError, match=r'Holder\.parts\[1\] changed its shape from nothing'), \
            copy_and_mutate(h) as m:
        m.parts.append(field(2))
    with copy_and_mutate(h) as m:  # values other than tensors may come and go
        m.table['j'] = 1
        m.parts.append('text')
    with pytest.raises(ValueError, match=r"Holder\.table\['k'\] changed its shape from .* to a str"), \
            copy_and_mutate(h) as m:
        m.table['k'] = 'text'
    with pytest.raises(ValueError, match=r"Holder\.table\['k'\] changed its shape"), copy_and_mutate(h) as m:
        m.table['k'] = field(0, n=2)
    with pytest.raises(ValueError, match=r'Holder\.inner\.position changed its shape'), copy_and_mutate(h) as m:
        m.inner = replace(m.inner, position=field(0, n=2))


def test_copy_and_mutate_makes_the_dataclasses_inside_the_copy_mutable():
    @dataclasses.dataclass(frozen=True)
    class Body:
        position: Tensor
        mass: float = 1.

        @cached_property
        def momentum(self):
            return self.position * self.mass

    @dataclasses.dataclass(frozen=True)
    class Scene:
        body: Body
        others: list
        table: dict

        @cached_property
        def count(self):
            return len(self.others)

    scene = Scene(Body(field(0)), [Body(field(1))], {'far': Body(field(2))})
    scene.body.momentum, scene.count  # noqa: B018
    own_setattr = vars(Body)['__setattr__']
    with copy_and_mutate(scene) as s:
        s.body.position = field(3)
        s.table['far'].mass = 3.
        fresh = Body(field(4))
        with pytest.raises(dataclasses.FrozenInstanceError):  # made inside the block: as its class makes it
            fresh.mass = 5.
        with pytest.raises(dataclasses.FrozenInstanceError):  # the original's instances stay frozen
            scene.body.mass = 5.
    assert equal(s.body.position, field(3)) and s.table['far'].mass == 3.
    assert equal(scene.body.position, field(0)) and scene.table['far'].mass == 1.
    assert 'momentum' not in cached_values(s.body) and equal(s.body.momentum, field(3))
    assert set(cached_values(s)) == {'count'}  # count reads only `others`, which did not change
    with copy_and_mutate(s) as t:
        t.others[0].mass = 2.
    assert t.others[0].mass == 2. and s.others[0].mass == 1. and 'count' not in cached_values(t)
    for frozen_again in (s.body, s.table['far'], t.others[0]):
        with pytest.raises(dataclasses.FrozenInstanceError):
            frozen_again.mass = 6.
    assert vars(Body)['__setattr__'] is own_setattr


@pytest.mark.parametrize('backend', BACKEND_NAMES)
def test_copy_and_mutate_validates_native_arrays_of_every_backend(backend):
    b = get_backend(backend)

    @dataclasses.dataclass(frozen=True)
    class Node:
        child: object

    node = Node(b.as_tensor(np.zeros(3, np.float32)))
    with copy_and_mutate(node) as updated:
        updated.child = b.as_tensor(np.ones(3, np.float32))
    assert b.numpy(updated.child).tolist() == [1, 1, 1] and b.numpy(node.child).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match=r'Node\.child changed its shape from \(3,\) \(.*float32.* to \(4,\)'), \
            copy_and_mutate(node) as updated:
        updated.child = b.as_tensor(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r'Node\.child changed its dtype from .*float32.* to .*int32'), \
            copy_and_mutate(node) as updated:
        updated.child = b.as_tensor(np.ones(3, np.int32))
    with pytest.raises(ValueError, match=r'Node\.child changed its shape from .* to a structure holding '
                                         r'.*Node\.child\[0\], .*Node\.child\[1\]'), copy_and_mutate(node) as updated:
        updated.child = (node.child, node.child)
    with copy_and_mutate(node, validate=False) as updated:
        updated.child = b.as_tensor(np.ones(4, np.float32))
    assert tuple(updated.child.shape) == (4,)


def test_copy_and_mutate_the_jax_dataclasses_example_as_printed(capsys):
    jnp = pytest.importorskip('jax.numpy')

    @jdc.pytree_dataclass
    class Node:
        child: jnp.ndarray

    obj = Node(child=jnp.zeros(3))

    with jdc.copy_and_mutate(obj) as obj_updated:
        # Make mutations to the dataclass. This is primarily useful for nested
        # dataclasses.
        obj_updated.child = jnp.ones(3)

    print(obj)
    print(obj_updated)
    dtype = jnp.zeros(3).dtype  # float64: lazyphi's JAX backend, as phiml's, enables 64-bit values
    assert capsys.readouterr().out.splitlines() == [f'{Node.__qualname__}(child=Array([0., 0., 0.], dtype={dtype}))',
                                                    f'{Node.__qualname__}(child=Array([1., 1., 1.], dtype={dtype}))']


def test_copy_and_mutate_error_in_block_restores_the_class():
    own_setattr = vars(Particle)['__setattr__']
    with pytest.raises(KeyError), copy_and_mutate(particle()) as m:
        m.name = 'x'
        raise KeyError('boom')
    assert vars(Particle)['__setattr__'] is own_setattr
    with pytest.raises(TypeError, match='dataclass instance'), copy_and_mutate([1]):
        pass


def test_copy_and_mutate_from_several_threads():
    barrier = threading.Barrier(4, timeout=10)
    own_setattr = vars(Particle)['__setattr__']
    results, errors = {}, []
    original = particle(0)

    def work(i):
        try:
            with copy_and_mutate(original) as m:
                barrier.wait()  # all four blocks are open at once
                m.name = f'n{i}'
                barrier.wait()
            results[i] = m
        except Exception as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and {r.name for r in results.values()} == {'n0', 'n1', 'n2', 'n3'}
    assert vars(Particle)['__setattr__'] is own_setattr and original.name == 'p'


# --- repr ----------------------------------------------------------------------------------------


def test_dataclass_repr_shows_shapes_not_data():
    @dataclasses.dataclass(frozen=True)
    class Scene:
        particle: Particle
        grid: Tensor
        arrays: tuple
        hidden: Tensor = dataclasses.field(default=None, repr=False)
        many: list = dataclasses.field(default_factory=lambda: list(range(10)))
        table: dict = dataclasses.field(default_factory=dict)

    big = math.wrap(np.full((2, 50), 123.456), batch('b'), spatial('x'))
    scene = Scene(particle(), big, (np.ones((4, 5)), 'x' * 200), table={'k': big})
    text = dataclass_repr(scene)
    assert '123' not in text and 'hidden' not in text
    assert 'grid=float64(bᵇ=2, xˢ=50)' in text
    assert "Particle(position=float64(xˢ=3), velocity=float64(xˢ=3), name='p', tags=[])" in text
    assert 'ndarray(4, 5) float64' in text and '...' in text
    assert 'many=[0, 1, 2, 3, 4, 5, ... 4 more]' in text
    assert "table={'k': float64(bᵇ=2, xˢ=50)}" in text
    assert len(text) < 400
    with pytest.raises(TypeError):
        dataclass_repr(3)


def test_dataclass_repr_of_self_references():
    @dataclasses.dataclass
    class Node:
        children: list

    n = Node([])
    n.children.append(n)
    assert dataclass_repr(n) == 'Node(children=[Node(...)])'
    assert dataclass_repr(Node([(1,)])) == 'Node(children=[(1,)])'
