"""TensorClass: tensordict's habits on named-dim tensors, from the reference's examples as printed."""

import collections
import dataclasses
from typing import Any

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import DType, default_backend
from lazyphi.dataclasses import TensorClass, cached_property
from lazyphi.math import Tensor, batch, spatial

CALLS = collections.Counter()


def native(values):
    """`values` as a native array of the test's backend."""
    return default_backend().as_tensor(np.asarray(values, np.float32))


pytestmark = pytest.mark.usefixtures('backend')


def test_the_reference_foo_as_printed():
    torch = pytest.importorskip('torch')

    class Foo(TensorClass):
        tensor: torch.Tensor
        non_tensor: Any
        nested: Any = None

    foo = Foo(tensor=torch.randn(3), non_tensor="a string!", nested=None, batch_size=[3])
    assert foo.batch_size == batch(b0=3) and tuple(foo.batch_size.sizes) == (3,)
    assert isinstance(foo.tensor, Tensor) and foo.tensor.shape == batch(b0=3) and foo.tensor.backend.name == 'torch'
    assert foo.non_tensor == 'a string!' and foo.nested is None
    assert repr(foo).startswith('Foo(tensor=') and "non_tensor='a string!'" in repr(foo)
    assert repr(foo).endswith('batch_size=(b0ᵇ=3))')


def test_options_by_brackets_and_keywords_as_printed():
    torch = pytest.importorskip('torch')

    class Foo(TensorClass["autocast"]):
        integer: int
    assert Foo(integer=torch.ones(())).integer == 1 and type(Foo(integer=torch.ones(())).integer) is int

    class Foo(TensorClass, autocast=True):  # equivalent
        integer: int
    assert type(Foo(integer=torch.ones(())).integer) is int

    class Foo(TensorClass["nocast"]):
        integer: int
    assert type(Foo(integer=1).integer) is int

    class Foo(TensorClass["nocast", "frozen"]):  # multiple keywords can be used
        integer: int
    assert Foo(integer=1).integer == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        Foo(integer=1).integer = 2

    class Foo(TensorClass, nocast=True):  # equivalent
        integer: int
    assert type(Foo(integer=1).integer) is int

    class Foo(TensorClass):
        integer: int
    assert isinstance(Foo(integer=1).integer, Tensor) and int(Foo(integer=1).integer) == 1  # tensor(1)


def test_option_errors_name_what_is_accepted():
    with pytest.raises(TypeError, match=r"takes the options \('autocast', 'nocast', 'frozen', 'tensor_only', "
                                        r"'shadow'\), not \['frozn'\]"):
        TensorClass["frozn"]
    with pytest.raises(TypeError, match='autocast and nocast exclude each other'):
        class Both(TensorClass, autocast=True, nocast=True):
            x: int
    with pytest.raises(AttributeError, match=r"fields \['batch_size'\] would shadow TensorClass members"):
        class Shadowing(TensorClass):
            batch_size: int

    class Allowed(TensorClass, shadow=True):
        get: int
    assert Allowed(get=1).__dict__['get'] is not None

    class OnlyTensors(TensorClass["tensor_only"]):
        x: Any
    with pytest.raises(TypeError, match=r"OnlyTensors.x: a tensor_only class holds Tensors, but got 'text'"):
        OnlyTensors(x='text')
    with pytest.raises(ValueError, match=r"batch_size must be a Shape or a sequence of non-negative ints"):
        OnlyTensors(x=1, batch_size=[-1])


class Particles(TensorClass):
    position: Any
    velocity: Any
    label: str = 'particles'

    @cached_property
    def speed(self) -> Tensor:
        CALLS['speed'] += 1
        return math.vec_length(self.velocity, '_0')

    @cached_property
    def height(self) -> Tensor:
        CALLS['height'] += 1
        return self.position[{'_0': 1}]


def particles(n=4) -> Particles:
    return Particles(native(np.arange(n * 2).reshape(n, 2)), native(np.ones((n, 2))), batch_size=[n])


def test_batch_size_names_the_leading_axes_and_is_checked():
    p = particles()
    assert p.position.shape == batch(b0=4) & spatial(_0=2) and p.position.backend is default_backend()
    named = Particles(native(np.zeros((3, 2))), native(np.zeros((3, 2))), batch_size=batch(examples=3))
    assert named.batch_size == batch(examples=3) and named.velocity.shape.names == ('examples', '_0')
    with pytest.raises(ValueError, match=r"does not start with the batch sizes \(5,\)"):
        Particles(native(np.zeros((3, 2))), native(np.zeros((3, 2))), batch_size=[5])
    with pytest.raises(ValueError, match=r"Particles.velocity has the shape \(xˢ=3\), which lacks the batch dims"):
        Particles(native(np.zeros((3, 2))), math.zeros(spatial(x=3)), batch_size=[3])
    scalar = Particles(1.0, native(np.zeros((3, 2))), batch_size=[3])
    assert scalar.position.shape == batch(b0=3)  # a number is expanded to the batch dims
    placed = Particles(native(np.zeros((3, 2))), native(np.zeros((3, 2))), batch_size=[3], device='cpu')
    assert placed.position.device.device_type == 'CPU'


def test_indexing_len_iteration_unbind_and_split_go_along_the_batch_dims():
    p = particles()
    assert len(p) == 4 and p[1].batch_size == batch() and p[1:3].batch_size == batch(b0=2)
    np.testing.assert_array_equal(p[1].position.numpy('_0'), [2, 3])
    np.testing.assert_array_equal([q.position.numpy('_0')[0] for q in p], [0, 2, 4, 6])
    assert [len(q) for q in p.split(3)] == [3, 1] and [len(q) for q in p.split([1, 3])] == [1, 3]
    assert len(p.unbind(0)) == 4 and len(p.unbind('b0')) == 4
    np.testing.assert_array_equal(p[{'b0': 2}].position.numpy('_0'), [4, 5])
    with pytest.raises(IndexError, match=r"index with at most 1 ints or slices"):
        p[0, 1]
    with pytest.raises(ValueError, match=r"split\(\): sizes \[1, 1\] must be non-negative and add up to b0's size 4"):
        p.split([1, 1])
    with pytest.raises(ValueError, match=r"has the batch dims \(b0ᵇ=4\); 'x' names none of them"):
        p.unbind('x')
    with pytest.raises(TypeError, match='len\\(\\) of a Particles without batch dims'):
        len(p[0])


def test_arithmetic_and_apply_act_on_every_tensor_field():
    p = particles()
    doubled = p * 2
    assert isinstance(doubled, Particles) and doubled.label == 'particles'
    np.testing.assert_array_equal(doubled.position.numpy('b0,_0'), p.position.numpy('b0,_0') * 2)
    np.testing.assert_array_equal((1 - p).velocity.numpy('b0,_0'), 0)
    np.testing.assert_array_equal((p + p).velocity.numpy('b0,_0'), 2)
    np.testing.assert_array_equal((-p / 2).velocity.numpy('b0,_0'), -0.5)
    np.testing.assert_array_equal(p.apply(lambda t, o: t * o, p).velocity.numpy('b0,_0'), 1)


def test_get_set_update_and_never_stale_caches():
    CALLS.clear()
    p = particles()
    assert p.get('label') == 'particles' and p.get(('velocity',)) is p.velocity and p.get('mass', 7) == 7
    with pytest.raises(KeyError, match="Particles has no entry 'mass'"):
        p.get('mass')
    assert p.speed is not None and p.height is not None
    assert CALLS == {'speed': 1, 'height': 1}
    p.set('velocity', native(np.full((4, 2), 3.0)))  # a native converted like at construction
    assert 'speed' not in vars(p) and 'height' in vars(p)  # exactly the dependent cache is dropped
    np.testing.assert_allclose(p.speed.numpy('b0'), np.sqrt(18), rtol=1e-6)
    p.position = native(np.zeros((4, 2)))  # an attribute write does the same
    assert 'height' not in vars(p) and 'speed' in vars(p)
    np.testing.assert_array_equal(p.height.numpy('b0'), 0)
    p.update({'label': 'moved', 'velocity': native(np.zeros((4, 2)))})
    assert p.label == 'moved' and 'speed' not in vars(p)
    with pytest.raises(ValueError, match='lacks the batch dims'):
        p.set('velocity', math.zeros(spatial(x=4)))
    with pytest.raises(KeyError, match="no field at 'mass' to set"):
        p.set('mass', 1)


def test_dicts_and_state_dicts_round_trip():
    p = particles()
    entries = p.to_dict()
    assert set(entries) == {'position', 'velocity', 'label'}
    rebuilt = Particles.from_dict(entries, batch_size=[4])
    assert math.equal(rebuilt.position, p.position) and rebuilt.batch_size == p.batch_size
    state = p.state_dict()
    other = particles() * 0
    other.load_state_dict(state)
    assert math.equal(other.position, p.position) and other.label == 'particles'
    with pytest.raises(KeyError, match='has no entry for label'):
        other.load_state_dict({k: v for k, v in state.items() if k != 'label'})
    partial = (particles() * 0).load_state_dict({'position': state['position']}, strict=False)
    assert math.equal(partial.position, p.position)


def test_cast_and_to_take_dtypes_of_every_library_and_devices():
    p = particles()
    assert p.cast(np.float64).position.dtype == DType(float, 64)
    assert p.to(np.float16).velocity.dtype == DType(float, 16)
    assert p.to('cpu').position.backend is default_backend() and p.to('CPU').batch_size == p.batch_size
    with pytest.raises(TypeError, match="to\\(\\) takes a device or a dtype, but got 'nowhere'"):
        p.to('nowhere')


def test_stack_keeps_differing_non_tensor_values_per_element_and_concat_joins():
    a, b = particles(2), particles(2) + 1
    b.label = 'other'
    stacked = math.stack([a, b], batch('run'))
    assert isinstance(stacked, Particles) and stacked.batch_size == batch(b0=2, run=2)
    assert stacked.label.shape == batch(run=2) and stacked.label.numpy('run').tolist() == ['particles', 'other']
    np.testing.assert_array_equal(stacked.position.run[1].numpy('b0,_0'), b.position.numpy('b0,_0'))
    joined = math.concat([a, particles(3)], 'b0')
    assert len(joined) == 5 and joined.label == 'particles'
    with pytest.raises(ValueError, match='non-tensor values differ'):
        math.concat([a, b], 'b0')
