"""Classification of dataclass fields into data, config and special fields."""

import collections.abc
import dataclasses
import enum
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final, Literal, NewType, Optional, TypeVar, Union

import pytest

from lazyphi.backend import DType
from lazyphi.math import Shape, Tensor, batch, tensor
from lazyphi.math._fields import (
    config_fields,
    data_fields,
    dataclass_data_items,
    field_names,
    is_data_annotation,
    non_data_fields,
    special_fields,
)


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass(frozen=True)
class Inner:
    values: Tensor


Meters = NewType('Meters', float)
Wrapped = NewType('Wrapped', Tensor)
T_free = TypeVar('T_free')
T_num = TypeVar('T_num', bound=float)
T_any_of = TypeVar('T_any_of', int, Tensor)


@pytest.mark.parametrize('annotation', [
    Tensor, Inner, Any, object, 'Unresolved', typing.ForwardRef('Unresolved'),
    Optional[Tensor], Union[int, Tensor], Tensor | None, int | Inner,  # noqa: UP007, UP045 - old spellings too
    tuple[Tensor, ...], tuple[int, Tensor], list[Inner], set[Tensor], Sequence[Tensor],
    dict[str, Tensor], collections.abc.Mapping[str, Inner], dict[str, list[Tensor | None]],
    tuple, list, dict, typing.Tuple, typing.List,  # noqa: UP006 - the old typing aliases must work too
    Annotated[Tensor, 'meta'], Final[Tensor], Wrapped, T_free, T_any_of,
])
def test_data_annotations(annotation):
    assert is_data_annotation(annotation)


@pytest.mark.parametrize('annotation', [
    int, float, complex, bool, str, bytes, None, type(None), Color, Shape, slice, range, DType, type,
    Optional[int], Union[int, str], int | None, float | Shape,  # noqa: UP007, UP045 - old spellings too
    tuple[int, ...], tuple[str, float], list[str], frozenset[str], Sequence[float], dict[str, int],
    dict[Tensor, int],  # keys are hashable, which tensors are not
    Callable, Callable[[Tensor], Tensor], typing.Callable, type[Tensor], typing.Type[Inner],  # noqa: UP006
    Literal['a', 'b'], Annotated[int, 'meta'], Final[str], Meters, T_num, Ellipsis,
])
def test_config_annotations(annotation):
    assert not is_data_annotation(annotation)


@dataclasses.dataclass(frozen=True)
class Everything:
    points: Tensor
    inner: Inner
    maybe: 'Optional[Tensor]'  # noqa: UP045 - resolved from a string
    many: 'tuple[Tensor, ...]'
    by_name: 'dict[str, Inner]'
    nested: 'Everything | None'
    anything: Any
    count: int
    scale: float  # config, as in the reference library
    label: 'str'
    mode: Color
    grid: Shape
    window: slice
    fn: Callable
    names: tuple[str, ...]
    variable_attrs: tuple[str, ...] = ('points',)
    value_attrs: tuple[str, ...] = ()


def names(fields) -> list[str]:
    return [f.name for f in fields]


def test_classification_of_a_dataclass_with_many_annotation_forms():
    assert names(data_fields(Everything)) == ['points', 'inner', 'maybe', 'many', 'by_name', 'nested', 'anything']
    assert names(config_fields(Everything)) == ['count', 'scale', 'label', 'mode', 'grid', 'window', 'fn', 'names']
    assert names(special_fields(Everything)) == ['variable_attrs', 'value_attrs']
    assert names(non_data_fields(Everything)) == [*names(config_fields(Everything)), 'variable_attrs', 'value_attrs']
    assert field_names(Everything) == {f.name for f in dataclasses.fields(Everything)}


def test_classification_returns_fields_in_definition_order_and_is_cached():
    fields = data_fields(Everything)
    assert all(isinstance(f, dataclasses.Field) for f in fields)
    assert data_fields(Everything) is fields
    assert config_fields(Everything) is config_fields(Everything)


def test_instance_and_class_give_the_same_fields():
    obj = Inner(tensor([1.0, 2.0]))
    assert data_fields(obj) == data_fields(Inner)
    assert config_fields(obj) == ()
    assert special_fields(obj) == ()


def test_unresolvable_string_annotations_count_as_data_and_others_still_resolve():
    @dataclasses.dataclass
    class Local:
        missing: 'NameThatDoesNotExist'  # noqa: F821 - deliberately unresolvable
        broken: 'tuple[int,'  # noqa: F722 - deliberately not Python
        itself: 'Local | None'
        count: 'int'
        size: 'Shape'

    assert names(data_fields(Local)) == ['missing', 'broken', 'itself']
    assert names(config_fields(Local)) == ['count', 'size']


def test_names_visible_only_inside_a_function_stay_unresolved_and_count_as_data():
    @dataclasses.dataclass
    class Helper:
        value: int

    @dataclasses.dataclass
    class Holder:
        helper: 'Helper'
        flag: 'bool'
        missing: 'Unknown'  # noqa: F821

    # Helper is not reachable from the module globals, so it stays unresolved and counts as data
    assert names(data_fields(Holder)) == ['helper', 'missing']
    assert names(config_fields(Holder)) == ['flag']


def test_inherited_fields_are_classified_with_their_own_module_and_order():
    @dataclasses.dataclass(frozen=True)
    class Child(Inner):
        extra: 'int' = 0
        more: 'Tensor | None' = None

    assert names(data_fields(Child)) == ['values', 'more']
    assert names(config_fields(Child)) == ['extra']


def test_special_fields_are_neither_data_nor_config_whatever_their_annotation():
    @dataclasses.dataclass
    class Special:
        variable_attrs: Any = ()
        value_attrs: Tensor = None

    assert special_fields(Special) == dataclasses.fields(Special)
    assert data_fields(Special) == ()
    assert config_fields(Special) == ()
    assert non_data_fields(Special) == dataclasses.fields(Special)


def test_dataclass_without_fields():
    @dataclasses.dataclass
    class Empty:
        pass

    assert data_fields(Empty) == config_fields(Empty) == special_fields(Empty) == non_data_fields(Empty) == ()


def test_dataclass_data_items():
    values = tensor([1.0, 2.0], batch('b'))
    obj = Everything(values, Inner(values), None, (), {}, None, 3, 1, 0.5, 'a', Color.RED, batch(b=2),
                     slice(None), len, ('x',))
    items = dataclass_data_items(obj)
    assert [name for name, _ in items] == ['points', 'inner', 'maybe', 'many', 'by_name', 'nested', 'anything']
    assert items[0][1] is values
    assert items[-1] == ('anything', 3)


def test_dataclass_data_items_needs_an_instance():
    with pytest.raises(TypeError, match=r"needs a dataclass instance, but got the class Inner"):
        dataclass_data_items(Inner)


@pytest.mark.parametrize('function', [data_fields, config_fields, special_fields, non_data_fields,
                                      dataclass_data_items])
@pytest.mark.parametrize('value, type_name', [(3, 'builtins.int'), ('text', 'builtins.str'),
                                              (Color.RED, 'test_fields.Color')])
def test_non_dataclass_is_a_type_error_naming_its_type(function, value, type_name):
    with pytest.raises(TypeError, match=rf"needs a dataclass type or instance, but got .* of type {type_name}"):
        function(value)


def test_non_dataclass_class_is_a_type_error():
    with pytest.raises(TypeError, match=r"needs a dataclass type or instance, but got <class 'int'> of type "
                                        r"builtins.type"):
        data_fields(int)
