"""@checked: Annotated dims and dtypes of dataclass fields are validated when an instance is made."""

import dataclasses
from typing import Annotated

import numpy as np
import pytest
from backends import BACKEND_NAMES, get_backend

import lazyphi.dataclasses as jdc
from lazyphi import math
from lazyphi.backend import DType
from lazyphi.dataclasses._checked import (
    AnnotationMismatch,
    AnnotationTypeMismatch,
    batch_axes,
    check_fields,
    checked,
)
from lazyphi.math import Tensor, batch, channel, instance, spatial

EVENTS = []


@checked
@dataclasses.dataclass(frozen=True)
class Grid:
    values: Annotated[Tensor, spatial('x,y'), channel(vector='x,y'), float]
    mask: Annotated[Tensor | None, 'x:s,y:s', bool] = None
    note: str = ''


@checked
@dataclasses.dataclass(frozen=True)
class Sized:
    samples: Annotated[Tensor, instance(points=3), DType(float, 64)]
    weights: Annotated[Tensor, 'points:i', int] | None = None  # Optional[Annotated[...]]

    def __post_init__(self):
        # runs after the check, so it may rely on the declared dims
        EVENTS.append(self.samples.shape.get_size('points'))


def grid(*dims, dtype=None) -> Tensor:
    return math.zeros(*dims, dtype=dtype)


GOOD = (spatial(x=4, y=3), channel(vector='x,y'))


@pytest.mark.parametrize('dims', [
    GOOD,
    (batch(b=2), *GOOD),  # extra batch dims are allowed
    (channel(vector='x,y'), batch(runs=5), spatial(y=3, x=4)),  # by name, in any order
])
def test_accepted_shapes(dims):
    assert Grid(grid(*dims)).values.shape.rank == len(math.merge_shapes(*dims))


def test_optional_fields_accept_none_and_check_values():
    assert Grid(grid(*GOOD), mask=None).mask is None
    assert Grid(grid(*GOOD), mask=grid(spatial(x=4, y=3), dtype=bool)).mask.dtype.kind is bool
    with pytest.raises(AnnotationTypeMismatch, match=r"Grid\.mask must be a Tensor .* of kind bool.*or None"):
        Grid(grid(*GOOD), mask=grid(spatial(x=4, y=3)))
    assert Sized(math.tensor(np.zeros(3), instance('points')), weights=None).weights is None


@pytest.mark.parametrize('dims, dtype, error, problem', [
    ((spatial(x=4), channel(vector='x,y')), None, AnnotationMismatch, "dim 'y' is missing"),
    ((spatial(x=4), instance(y=3), channel(vector='x,y')), None, AnnotationMismatch,
     "dim 'y' is instance, not spatial"),
    ((*GOOD, spatial(z=2)), None, AnnotationMismatch, r"dims \('z',\) are not declared"),
    ((*GOOD, instance(points=2)), None, AnnotationMismatch, r"dims \('points',\) are not declared"),
    ((spatial(x=4, y=3), channel(vector='a,b')), None, AnnotationMismatch,
     r"dim 'vector' has labels \('a', 'b'\), not \('x', 'y'\)"),
    ((spatial(x=4, y=3), channel(vector=3)), None, AnnotationMismatch, "dim 'vector' has size 3, not 2"),
    (GOOD, int, AnnotationTypeMismatch, 'got dtype int'),
    (GOOD, complex, AnnotationTypeMismatch, 'got dtype complex'),
])
def test_rejected_values_name_field_expectation_and_value(dims, dtype, error, problem):
    with pytest.raises(error, match=problem) as info:
        Grid(grid(*dims, dtype=dtype))
    message = str(info.value)
    assert message.startswith('Grid.values must be a Tensor with dims (xˢ, yˢ, vectorᶜ=x,y) of kind float, '
                              'plus any batch dims, but got ')
    assert isinstance(info.value, ValueError)


def test_wrong_value_type_is_a_type_error_and_a_value_error():
    with pytest.raises(AnnotationTypeMismatch, match=r"Grid\.values must be a Tensor .* but got 1\.5 of type float"
                       ) as info:
        Grid(1.5)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    with pytest.raises(AnnotationTypeMismatch, match=r"Grid\.values .* but got None"):
        Grid(None)  # not optional


def test_sizes_and_exact_dtypes():
    good = math.tensor(np.zeros(3), instance('points'))
    assert good.dtype == DType(float, 64)
    EVENTS.clear()
    Sized(good)
    assert EVENTS == [3]
    with pytest.raises(AnnotationMismatch, match="dim 'points' has size 4, not 3"):
        Sized(math.tensor(np.zeros(4), instance('points')))
    assert EVENTS == [3]  # __post_init__ did not run on the rejected value
    with pytest.raises(AnnotationTypeMismatch, match=r'must be a Tensor with dims \(pointsⁱ=3\) of dtype float64.*'
                                                     r'got dtype float32'):
        Sized(math.tensor(np.zeros(3, dtype=np.float32), instance('points')))
    with pytest.raises(AnnotationTypeMismatch, match=r'Sized\.weights .* of kind int.*got dtype float64'):
        Sized(good, weights=good)


def test_replace_validates_but_slicing_does_not():
    value = Grid(grid(batch(b=2), *GOOD))
    with pytest.raises(AnnotationMismatch):
        dataclasses.replace(value, values=grid(spatial(x=4)))
    sliced = math.slice(value, {'x': 0})  # tree functions copy without __init__
    assert 'x' not in sliced.values.shape


def test_class_without_post_init_and_subclasses_are_checked():
    @checked
    @dataclasses.dataclass
    class Base:
        values: Annotated[Tensor, 'x:s']

    @dataclasses.dataclass
    class Child(Base):
        extra: Annotated[Tensor, 'vector:c'] = None

    Base(grid(spatial(x=2)))
    with pytest.raises(AnnotationMismatch, match=r"Base\.values .* dim 'x' is missing"):
        Base(grid(spatial(y=2)))
    with pytest.raises(AnnotationMismatch, match=r"Child\.extra .*dim 'vector' is missing"):
        Child(grid(spatial(x=2)), grid(spatial(x=2)))

    class PlainChild(Base):
        pass

    with pytest.raises(AnnotationMismatch, match=r"PlainChild\.values"):
        PlainChild(grid(spatial(y=2)))


def test_unchecked_fields_and_non_tensor_bases():
    @dataclasses.dataclass(frozen=True)
    class Line:
        values: Tensor

    @checked
    @dataclasses.dataclass(frozen=True)
    class Mixed:
        anything: Tensor  # no metadata: not checked
        inner: Annotated[Line, 'x:s']  # any shaped class: its type and shape are checked

    Mixed(3, Line(grid(batch(b=2), spatial(x=4))))
    with pytest.raises(AnnotationMismatch, match=r"Mixed\.inner must be a Line with dims \(xˢ\).*dim 'x' is missing"):
        Mixed(3, Line(grid(spatial(y=4))))
    with pytest.raises(AnnotationTypeMismatch, match=r"Mixed\.inner must be a Line .* of type Grid"):
        Mixed(3, Grid(grid(*GOOD)))


def test_checked_needs_a_dataclass_and_valid_specs():
    with pytest.raises(TypeError, match='Put it above @dataclass'):
        checked(int)

    @checked
    @dataclasses.dataclass
    class BadSpec:
        values: Annotated[Tensor, 'x:q']

    with pytest.raises(TypeError, match=r"BadSpec\.values: the annotation metadata 'x:q' is no dim spec"):
        BadSpec(grid(spatial(x=2)))


def test_check_fields_can_be_called_directly():
    value = Grid(grid(*GOOD))
    object.__setattr__(value, 'values', grid(spatial(x=1)))
    with pytest.raises(AnnotationMismatch):
        check_fields(value)


# --- jax_dataclasses' annotations of arrays without dim names -------------------------------------


def test_the_jax_dataclasses_mnist_example_as_printed(capsys):
    jnp = pytest.importorskip('jax.numpy')
    import numpy as onp


    @jdc.pytree_dataclass
    class MnistStruct(jdc.EnforcedAnnotationsMixin):
        image: Annotated[
            jnp.ndarray,
            (..., 28, 28),
            jnp.float32,
        ]
        label: Annotated[
            jnp.ndarray,
            (..., 10),
            jnp.integer,
        ]

    # OK
    struct = MnistStruct(
      image=onp.zeros((28, 28), dtype=onp.float32),
      label=onp.zeros((10,), dtype=onp.uint8),
    )
    print(struct.get_batch_axes())  # Prints ()

    # OK
    struct = MnistStruct(
      image=onp.zeros((32, 28, 28), dtype=onp.float32),
      label=onp.zeros((32, 10), dtype=onp.uint8),
    )
    print(struct.get_batch_axes())  # Prints (32,)
    assert capsys.readouterr().out.splitlines() == ['()', '(32,)']

    # AssertionError on instantiation because of type mismatch
    with pytest.raises(AssertionError, match=r'MnistStruct\.label must be .* of kind integer, but got dtype float32'):
        MnistStruct(
          image=onp.zeros((28, 28), dtype=onp.float32),
          label=onp.zeros((10,), dtype=onp.float32),  # Not an integer type!
        )

    # AssertionError on instantiation because of shape mismatch
    with pytest.raises(AssertionError, match=r'label must be .* of shape \(\.\.\., 10\).* got shape \(5,\)'):
        MnistStruct(
          image=onp.zeros((28, 28), dtype=onp.float32),
          label=onp.zeros((5,), dtype=onp.uint8),
        )

    # AssertionError on instantiation because of batch axis mismatch
    with pytest.raises(AssertionError, match=r'batch axes .* differ between fields: image \(64,\), label \(32,\)'):
        MnistStruct(
          image=onp.zeros((64, 28, 28), dtype=onp.float32),
          label=onp.zeros((32, 10), dtype=onp.uint8),
        )


@pytest.mark.parametrize('backend', BACKEND_NAMES)
def test_shape_patterns_and_numpy_dtypes_check_the_arrays_of_every_backend(backend):
    b = get_backend(backend)

    @checked
    @dataclasses.dataclass(frozen=True)
    class Frames:
        pixels: Annotated[object, (3, ..., None), np.floating]  # batch axes between a leading 3 and one last axis
        ids: Annotated[object | None, (..., 2), np.dtype('int32')] = None

    def array(shape, dtype=np.float32):
        return b.as_tensor(np.zeros(shape, dtype))

    frames = Frames(array((3, 5, 4, 7)), array((5, 4, 2), np.int32))
    assert batch_axes(frames) == (5, 4)
    assert batch_axes(Frames(array((3, 7)))) == ()
    with pytest.raises(AnnotationMismatch, match=r'Frames\.pixels must be .* of shape \(3, \.\.\., None\).* got shape '
                                                 r'\(4, 5, 7\)'):
        Frames(array((4, 5, 7)))
    with pytest.raises(AnnotationMismatch, match=r'Frames\.pixels must be .* got shape \(3,\)'):
        Frames(array((3,)))  # the last axis is missing
    with pytest.raises(AnnotationTypeMismatch, match=r'Frames\.pixels must be .* of kind floating, but got dtype int'):
        Frames(array((3, 7), np.int64))
    with pytest.raises(AnnotationTypeMismatch,
                       match=r'Frames\.ids must be an array .* of dtype int32, or None, but got dtype int64'):
        Frames(array((3, 7)), array((2,), np.int64))
    with pytest.raises(AnnotationMismatch, match=r'differ between fields: pixels \(5,\), ids \(6,\)'):
        Frames(array((3, 5, 7)), array((6, 2), np.int32))


def test_shape_patterns_are_for_unnamed_arrays_and_bad_metadata_is_named():
    @checked
    @dataclasses.dataclass(frozen=True)
    class Patterned:
        values: Annotated[object, (..., 3)]

    with pytest.raises(AnnotationTypeMismatch, match=r'a shape pattern describes arrays without dim names'):
        Patterned(math.zeros(channel(vector=3)))

    @checked
    @dataclasses.dataclass(frozen=True)
    class Typo:
        values: Annotated[object, (..., '3')]

    with pytest.raises(TypeError, match=r"Typo\.values: the annotation metadata \(Ellipsis, '3'\) is no shape pattern"):
        Typo(np.zeros(3))

    @checked
    @dataclasses.dataclass(frozen=True)
    class Both:
        values: Annotated[Tensor, channel('vector'), (..., 3)]

    with pytest.raises(TypeError, match=r'gives both dims .* and the shape pattern'):
        Both(math.zeros(channel(vector=3)))

    class OtherLibrary:  # metadata lazyphi does not know is left to its library
        pass

    @checked
    @dataclasses.dataclass(frozen=True)
    class Foreign:
        values: Annotated[Tensor, channel('vector'), OtherLibrary()]

    assert Foreign(math.zeros(channel(vector=3))).values.shape.get_size('vector') == 3
    with pytest.raises(AnnotationMismatch):
        Foreign(math.zeros(spatial(x=3)))


def test_batch_dims_of_checked_tensors_agree_across_fields():
    @checked
    @dataclasses.dataclass(frozen=True)
    class Labelled:
        image: Annotated[Tensor, spatial(y=28, x=28), float]
        label: Annotated[Tensor, channel(c=10), int]

    Labelled(math.zeros(batch(b=64), spatial(y=28, x=28)), math.zeros(batch(b=64), channel(c=10), dtype=int))
    with pytest.raises(AnnotationMismatch, match=r"batch dim 'b' has size 64 in image but 32 in label"):
        Labelled(math.zeros(batch(b=64), spatial(y=28, x=28)), math.zeros(batch(b=32), channel(c=10), dtype=int))


# --- autocast ------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Settings:
    steps: int
    label: str = ''


@checked(autocast=True)
@dataclasses.dataclass(frozen=True)
class Casting:
    y: Tensor
    grid: Annotated[Tensor | None, spatial('x,y'), float] = None
    count: int = 0
    scale: float = 1.0
    name: str = ''
    table: Annotated[np.ndarray | None, np.float32] = None
    settings: Settings | None = None
    anything: int | str = 'left alone'


def test_autocast_as_printed_by_tensordict():
    """tensordict's docstring: `@tensorclass(autocast=True) class X: y: torch.Tensor`, then `X(1).y` is a tensor."""
    @checked(autocast=True)
    @dataclasses.dataclass(frozen=True)
    class X:
        y: Tensor

    assert isinstance(X(1).y, Tensor) and X(1).y.shape.rank == 0 and int(X(1).y) == 1

    @checked
    @dataclasses.dataclass(frozen=True)
    class Plain:
        y: Tensor

    assert Plain(1).y == 1  # tensordict's autocast=False: the value as given


@pytest.mark.parametrize('backend', BACKEND_NAMES)
def test_autocast_makes_tensors_on_the_values_backend_with_declared_dims_and_dtype(backend):
    b = get_backend(backend)
    native = b.as_tensor(np.arange(6, dtype=np.int64).reshape(2, 3))
    c = Casting(b.as_tensor(np.float32(2.5)), grid=native)
    assert c.y.backend is b and float(c.y) == 2.5
    assert c.grid.backend is b and c.grid.shape == spatial(x=2, y=3) and c.grid.dtype.kind is float
    np.testing.assert_array_equal(c.grid.numpy('x,y'), np.arange(6).reshape(2, 3))
    vector = Casting([1, 2, 3]).y
    assert vector.shape.rank == 1 and vector.numpy().tolist() == [1, 2, 3]
    tensor = math.ones(batch(b=2), spatial(x=2, y=3), dtype=int)
    kept = Casting(tensor, grid=tensor)
    assert kept.y is tensor  # a Tensor stays as it is
    assert kept.grid.dtype.kind is float and kept.grid.shape == tensor.shape  # cast to the declared kind


def test_autocast_converts_builtins_arrays_and_nested_dataclasses():
    c = Casting(0, count=3.0, scale=2, name=5, table=[1, 2], settings={'steps': 4, 'label': 'a'})
    assert (c.count, type(c.count)) == (3, int) and (c.scale, type(c.scale)) == (2.0, float) and c.name == '5'
    assert c.table.dtype == np.float32 and c.table.tolist() == [1.0, 2.0]
    assert c.settings == Settings(4, 'a')
    assert c.anything == 'left alone' and Casting(0, anything=2.5).anything == 2.5  # a union of several types
    assert Casting(0, count=math.tensor(7)).count == 7  # a Tensor of one value gives its number
    assert Casting(0).grid is None and Casting(0).settings is None  # None where the annotation admits it
    replaced = dataclasses.replace(c, count='8')
    assert replaced.count == 8


def test_autocast_errors_name_field_value_and_type_and_checks_still_run():
    with pytest.raises(AnnotationTypeMismatch, match=r"Casting\.count: autocast cannot convert 'many' \(of type str\) "
                                                     r"to int"):
        Casting(0, count='many')
    with pytest.raises(TypeError, match=r'Casting\.settings: autocast cannot convert .* to Settings'):
        Casting(0, settings={'wrong': 1})
    with pytest.raises(AnnotationMismatch, match=r"Casting\.grid must be a Tensor with dims \(xˢ, yˢ\).* dim 'x' is "
                                                 r"missing"):
        Casting(0, grid=[1.0, 2.0])  # one axis: not named x, y, so the check refuses it
    with pytest.raises(TypeError, match=r'autocast=\.\.\.\) takes True or False, got 1'):
        checked(autocast=1)(Settings)


def test_autocast_runs_before_post_init_and_in_subclasses():
    seen = []

    @checked(autocast=True)
    @dataclasses.dataclass(frozen=True)
    class Base:
        n: int

        def __post_init__(self):
            seen.append(type(self.n))

    @dataclasses.dataclass(frozen=True)
    class Child(Base):
        x: float = 0

    assert Base('3').n == 3 and seen == [int]
    child = Child('4', x=1)
    assert (child.n, child.x, type(child.x)) == (4, 1.0, float)
