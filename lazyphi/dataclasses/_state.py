"""Flat state dicts of dataclass instances, and moving all their tensors to another backend or device.

`state_dict(obj)` maps dotted keys to values: `'field'`, `'nested.field'`, `'items.0'`,
`'table.key'`. Where the nesting is followed is decided by the class's annotations, never by
the values alone, so that `from_state_dict(cls, state)` can rebuild exactly what was there:

* a data field annotated with a dataclass type, holding an instance of exactly that type,
  contributes one key per field of the instance;
* a data field (or element) annotated `list[...]` or `tuple[...]` holding a non-empty list or
  tuple of exactly that type contributes one key per element, `'name.0'`, `'name.1'`, ...;
* one annotated `dict[...]` holding a non-empty dict whose keys are str without dots
  contributes one key per item;
* everything else is one value under its own key: tensors, None, numbers, config and special
  fields, empty containers, and values the annotation does not describe (an instance of a
  subclass, a dataclass in a field annotated `Any`).

Cached property values are not part of the state; a rebuilt instance computes them again.
"""

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ..backend import Backend, ComputeDevice, backend_by_name, choose_backend, convert
from ..math import data_fields
from ..math.kinds import map_tensors, resolved_annotations
from ._pytree import map_natives

T = TypeVar('T')
_UNIONS = (typing.Union, types.UnionType)


# --- state dicts ---------------------------------------------------------------------------------


def state_dict(obj) -> dict[str, Any]:
    """All fields of dataclass instance `obj`, nested ones included, as a flat dict with dotted keys.

    See the module docstring for which values are nested. Tensors are the values themselves,
    not copies.

    Raises:
        TypeError: `obj` is not a dataclass instance.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"state_dict() takes a dataclass instance, but got {obj!r} of type {type(obj).__qualname__}")
    state: dict[str, Any] = {}
    for key, value, annotation in _field_entries(obj):
        _flatten_into(state, key, value, annotation)
    return state


def _field_entries(obj) -> list[tuple[str, Any, Any]]:
    """(name, value, annotation) of every field; the annotation is None (a leaf) for non-data fields."""
    cls = type(obj)
    hints = resolved_annotations(cls)
    data = {f.name for f in data_fields(cls)}
    return [(f.name, getattr(obj, f.name), hints.get(f.name, f.type) if f.name in data else None)
            for f in dataclasses.fields(cls)]


def _flatten_into(state: dict, key: str, value, annotation) -> None:
    entries = _nested_entries(value, annotation)
    if entries is None:
        state[key] = value
        return
    for sub_key, sub_value, sub_annotation in entries:
        _flatten_into(state, f'{key}.{sub_key}', sub_value, sub_annotation)


def _nested_entries(value, annotation) -> list[tuple[str, Any, Any]] | None:
    """(key, value, annotation) of the parts of `value` the annotation describes, or None to keep it whole."""
    target, args = _structure(annotation)
    if target is None or type(value) is not target:
        return None
    if dataclasses.is_dataclass(target):
        return _field_entries(value)
    if not value:
        return None  # an empty container has no entries to rebuild it from
    if target is dict:
        if not all(isinstance(k, str) and k and '.' not in k for k in value):
            return None
        return [(k, v, args[-1] if args else Any) for k, v in value.items()]
    element_types = _element_annotations(args, len(value))
    if element_types is None:
        return None
    return [(str(i), v, a) for i, (v, a) in enumerate(zip(value, element_types, strict=True))]


def _structure(annotation) -> tuple[type | None, tuple]:
    """(dataclass type, list, tuple or dict the annotation names; its type arguments), or (None, ())."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in _UNIONS:
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return None, ()
            annotation = members[0]
        else:
            break
    if origin in (list, tuple, dict):
        return origin, typing.get_args(annotation)
    if annotation in (list, tuple, dict) or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return annotation, ()
    return None, ()


def _element_annotations(args: tuple, count: int) -> tuple | None:
    """Annotation of each of `count` elements of a list or tuple with type arguments `args`; None on mismatch."""
    if not args:
        return (Any,) * count
    if len(args) == 2 and args[1] is Ellipsis:
        return (args[0],) * count
    if len(args) == 1:  # list[X]
        return (args[0],) * count
    return args if len(args) == count else None  # tuple[A, B, C]


def from_state_dict(cls: type[T], state: Mapping[str, Any], strict: bool = True) -> T:
    """Build an instance of dataclass `cls` from a state dict made by `state_dict`.

    Nested dicts count as dotted keys (`{'inner': {'w': w}}` as `{'inner.w': w}`) wherever the annotation
    declares a dataclass, list, tuple or dict. Every dataclass, the outer and the nested ones, is built by
    calling its class with its init fields, so `__init__`, `__post_init__` and validation such as `@checked`
    run exactly once per instance; fields with `init=False` are set afterwards to their values in the state.

    Args:
        cls: the dataclass to build.
        state: dotted keys to values, as `state_dict` makes them.
        strict: if True, every field must have its entries and no key may be left over. If False,
            fields without entries take their defaults and unknown keys are ignored.

    Raises:
        TypeError: `cls` is not a dataclass.
        KeyError: (strict) a field has no entry, or a key names no field.
        ValueError: a key is both a value and the prefix of other keys, or entries under a prefix do not fit
            the annotation there (list indices not 0...n-1, nesting under a field that is not nested).
    """
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise TypeError(f"from_state_dict() builds dataclasses, but got {cls!r}")
    return _build_dataclass(cls, _key_tree(state), '', strict)


class _Leaf:
    __slots__ = ('value',)

    def __init__(self, value):
        self.value = value


def _key_tree(state: Mapping[str, Any]) -> dict:
    """Nested dicts of the dotted keys' parts, with `_Leaf`s holding the values."""
    tree: dict = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"State dict keys must be str, but got {key!r}")
        *parents, last = key.split('.')
        node = tree
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if isinstance(node, _Leaf):
                raise ValueError(f"The state dict holds a value at {'.'.join(parents[:depth + 1])!r} and also keys "
                                 f"under it, such as {key!r}")
        if isinstance(node.get(last), dict):
            raise ValueError(f"The state dict holds a value at {key!r} and also keys under it")
        node[last] = _Leaf(value)
    return tree


def _build(node, annotation, path: str, strict: bool):
    target, args = _structure(annotation)
    if isinstance(node, _Leaf):
        if target is None or not isinstance(node.value, Mapping):
            return node.value
        node = _key_tree(node.value)  # a nested dict where a structure is declared: rebuild it, as dotted keys
    if target is None:
        raise ValueError(f"The state dict has keys under {path!r} ({', '.join(sorted(node))}), but the annotation "
                         f"there, {annotation!r}, names no dataclass, list, tuple or dict to rebuild")
    if dataclasses.is_dataclass(target):
        return _build_dataclass(target, node, path + '.', strict)
    if target is dict:
        return {k: _build(v, args[-1] if args else Any, f'{path}.{k}', strict) for k, v in node.items()}
    if sorted(node) != [str(i) for i in range(len(node))]:
        raise ValueError(f"The entries under {path!r} of a {target.__name__} must be numbered 0...{len(node) - 1}, "
                         f"but got {sorted(node)}")
    element_types = _element_annotations(args, len(node)) or (Any,) * len(node)
    return target(_build(node[str(i)], a, f'{path}.{i}', strict) for i, a in enumerate(element_types))


def _build_dataclass(cls: type, node: dict, prefix: str, strict: bool):
    hints = resolved_annotations(cls)
    data = {f.name for f in data_fields(cls)}
    fields = dataclasses.fields(cls)
    if strict:
        unknown = sorted(set(node) - {f.name for f in fields})
        if unknown:
            raise KeyError(f"The state dict has keys {[prefix + k for k in unknown]} that name no field of "
                           f"{cls.__qualname__}")
    init_values, later = {}, {}
    for f in fields:
        if f.name not in node:
            if strict:
                raise KeyError(f"The state dict has no entry for {prefix}{f.name} ({cls.__qualname__}.{f.name})")
            continue
        annotation = hints.get(f.name, f.type) if f.name in data else None
        value = _build(node[f.name], annotation, prefix + f.name, strict)
        (init_values if f.init else later)[f.name] = value
    obj = cls(**init_values)
    for name, value in later.items():
        object.__setattr__(obj, name, value)
    return obj


# --- backends and devices ------------------------------------------------------------------------


def to_backend(obj: T, backend: Backend | str) -> T:
    """`obj` with every Tensor in it, cached property values included, held by `backend`.

    Args:
        obj: a Tensor, or a tuple, list, dict or dataclass instance holding Tensors.
        backend: a `Backend` or its name, such as 'numpy', 'torch' or 'jax'.

    Raises:
        ValueError: `backend` names no backend that can be loaded.
    """
    target = backend_by_name(backend) if isinstance(backend, str) else backend
    return map_tensors(lambda t: map_natives(t, lambda native: convert(native, target)), obj, 'to_backend')


def to_device(obj: T, device: ComputeDevice | str) -> T:
    """`obj` with every Tensor in it, cached property values included, on `device`.

    Args:
        obj: a Tensor, or a tuple, list, dict or dataclass instance holding Tensors.
        device: a `ComputeDevice`, whose backend then holds every Tensor, or a device type
            ('CPU', 'GPU', 'TPU', in any case), which picks the first device of that type of each Tensor's backend.

    Raises:
        ValueError: a Tensor's backend has no device of the given type.
    """
    def move(native):
        if isinstance(device, ComputeDevice):
            target = device.backend
            return target.allocate_on_device(convert(native, target), device)
        backend = choose_backend(native)
        matching = backend.list_devices(device)
        if not matching:
            raise ValueError(f"Backend {backend.name} has no {device!r} device; its devices are "
                             f"{[d.name for d in backend.list_devices()]}")
        return backend.allocate_on_device(native, matching[0])

    return map_tensors(lambda t: map_natives(t, move), obj, 'to_device')

