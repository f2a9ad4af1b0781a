"""Dataclasses and Tensors as pytree nodes of JAX and PyTorch, registered without importing either.

A registered dataclass flattens into its *children*, the data fields (those that may hold
tensors), and static *aux data*, the config and special fields; `static_field()` and
`data_field()` override that split per field. Cached property values are not part of the
flattened form, so a transform never leaves a tracer in a cache: an unflattened instance
computes its properties afresh. Unflattening sets the fields on an instance made by
`object.__new__` and runs no `__init__`, `__post_init__` or `@checked` validation, as JAX
requires (it unflattens with placeholder leaves).

The Tensor kinds of `lazyphi.math` are nodes too: a dense tensor's child is its native and its
aux data the Shape and backend; a lazily expanded tensor's child is the tensor it expands; a
stacked tensor's children are its parts. Rebuilding a dense tensor from a native whose array
shape disagrees with the Shape raises `IncompatibleShapes`, so a transform that maps over an
axis lazyphi does not know about (`jax.vmap`, `lax.scan` over a Tensor's native) fails loudly
instead of producing a tensor whose shape lies.

Registration is lazy. A library already in `sys.modules` gets a class at once; otherwise it is
registered when lazyphi's backend for that library is loaded (`on_backend_loaded`). Call
`ensure_registered()` after importing a library by hand if no lazyphi backend of it is loaded yet.
"""

import contextlib
import dataclasses
import importlib
import sys
from collections.abc import Callable
from typing import Any

from .._errors import IncompatibleShapes
from ..backend import Backend, NoBackendFound, choose_backend, on_backend_loaded
from ..math import Expanded, Shape, Stacked, Tensor, data_fields
from ..math.kinds import Dense

_STATIC = 'lazyphi_static'  # dataclass field metadata key: True static, False child, absent by classification
_LIBRARIES = ('jax', 'torch')

Flatten = Callable[[Any], tuple[list, Any]]
Unflatten = Callable[[Any, list], Any]  # (aux data, children) -> node, JAX's argument order


# --- field markers -------------------------------------------------------------------------------


def static_field(*, metadata=None, **kwargs) -> Any:
    """`dataclasses.field(**kwargs)` marking the field as static: part of the pytree structure, never a leaf.

    Static values must be hashable and comparable; changing one makes `jax.jit` compile again.
    """
    return dataclasses.field(metadata={**(metadata or {}), _STATIC: True}, **kwargs)


def data_field(*, metadata=None, **kwargs) -> Any:
    """`dataclasses.field(**kwargs)` marking the field as a pytree child, whatever its annotation says."""
    return dataclasses.field(metadata={**(metadata or {}), _STATIC: False}, **kwargs)


# --- Tensor kinds --------------------------------------------------------------------------------


def _flatten_dense(t: Dense) -> tuple[list, Any]:
    return [t.native()], (t.shape, t.backend)


def _unflatten_dense(aux: tuple, children: list) -> Dense:
    (native,) = children
    shape, backend = aux
    leaf_shape = _array_shape(native)
    if leaf_shape is not None:  # an array or tracer; JAX also unflattens placeholders, which are let through
        _check_leaf_shape(leaf_shape, shape)
        if not backend.is_tensor(native, True):  # a transform returned another library's array
            with contextlib.suppress(NoBackendFound):
                holder = choose_backend(native)
                backend = backend if holder.catch_all else holder  # placeholders (ShapeDtypeStruct) keep theirs
    return Dense(native, shape, backend)


def _array_shape(native) -> tuple | None:
    """The axis sizes of an array-like value (None entries for unknown sizes), or None if it is none."""
    leaf_shape = getattr(native, 'shape', None)
    if leaf_shape is None or isinstance(leaf_shape, tuple):
        return leaf_shape
    try:  # TensorFlow's TensorShape
        return tuple(leaf_shape)
    except (TypeError, ValueError):  # not iterable, or of unknown rank
        return None


def _check_leaf_shape(leaf_shape: tuple, shape: Shape) -> None:
    sizes = shape.sizes
    if len(leaf_shape) != len(sizes) or any(isinstance(s, int) and isinstance(n, int) and n != s
                                            for n, s in zip(leaf_shape, sizes, strict=True)):
        raise IncompatibleShapes(
            f"Cannot rebuild a Tensor of shape {shape} (axis sizes {tuple(sizes)}) from a native of shape "
            f"{tuple(leaf_shape)}: a transform changed the axes of the Tensor's native without lazyphi knowing, "
            f"as jax.vmap or lax.scan over a Tensor does when it maps over one of its named dims. "
            f"Map over named dims with lazyphi functions instead, or pass natives (t.native(order)) to the transform.")


def _flatten_expanded(t: Expanded) -> tuple[list, Any]:
    return [t._inner], t.shape


def _unflatten_expanded(shape: Shape, children: list) -> Expanded:
    return Expanded(children[0], shape)


def _flatten_stacked(t: Stacked) -> tuple[list, Any]:
    return list(t.parts), t._dim


def _unflatten_stacked(dim: Shape, children: list) -> Stacked:
    return Stacked(children, dim)


# kind -> (flatten, unflatten, keys: node -> one attribute name or index per child, for key paths)
_TENSOR_NODES: dict[type, tuple[Flatten, Unflatten, Callable[[Any], tuple]]] = {
    Dense: (_flatten_dense, _unflatten_dense, lambda t: ('native',)),
    Expanded: (_flatten_expanded, _unflatten_expanded, lambda t: ('inner',)),
    Stacked: (_flatten_stacked, _unflatten_stacked, lambda t: tuple(range(len(t.parts)))),
}


def map_natives(t: Tensor, fn: Callable[[Any], Any]) -> Tensor:
    """`t` with `fn` applied to every backend native it holds, keeping its kind (expanded, stacked).

    The backend of each result is the one holding the new native. Kinds other than those of
    `lazyphi.math` are materialised first.
    """
    node = _TENSOR_NODES.get(type(t))
    if node is None:
        t = t._dense()
        node = _TENSOR_NODES[Dense]
    flatten, unflatten, _ = node
    children, aux = flatten(t)
    return unflatten(aux, [map_natives(c, fn) if isinstance(c, Tensor) else fn(c) for c in children])


# --- dataclasses ---------------------------------------------------------------------------------


def _field_split(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(child field names, static field names) of a dataclass: markers first, then the field classification."""
    data = {f.name for f in data_fields(cls)}
    children, static = [], []
    for f in dataclasses.fields(cls):
        marked = f.metadata.get(_STATIC)
        (static if (f.name not in data if marked is None else marked) else children).append(f.name)
    return tuple(children), tuple(static)


def _dataclass_node(cls: type) -> tuple[Flatten, Unflatten, Callable[[Any], tuple]]:
    split: list = []  # computed on first use, when forward references in annotations resolve

    def names() -> tuple[tuple[str, ...], tuple[str, ...]]:
        if not split:
            split.append(_field_split(cls))
        return split[0]

    def flatten(obj) -> tuple[list, Any]:
        children, static = names()
        return [getattr(obj, n) for n in children], tuple(getattr(obj, n) for n in static)

    def unflatten(aux: tuple, children: list):
        obj = object.__new__(cls)
        child_names, static = names()
        for name, value in zip(child_names, children, strict=True):
            object.__setattr__(obj, name, value)
        for name, value in zip(static, aux, strict=True):
            object.__setattr__(obj, name, value)
        return obj

    return flatten, unflatten, lambda obj: names()[0]


# --- registration --------------------------------------------------------------------------------

_NODES: dict[type, tuple] = {}  # every class to register: (flatten, unflatten, keys)
_REGISTERED: dict[str, set] = {lib: set() for lib in _LIBRARIES}  # library -> classes registered with it


def _keyed(flatten: Flatten, keys: Callable[[Any], tuple], attr_key: type, index_key: type) -> Callable:
    """A flatten function that pairs each child with its key: an attribute name or a sequence index."""
    def flatten_with_keys(obj):
        children, aux = flatten(obj)
        return [(index_key(k) if isinstance(k, int) else attr_key(k), c)
                for k, c in zip(keys(obj), children, strict=True)], aux
    return flatten_with_keys


def _register_with_jax(cls: type, flatten: Flatten, unflatten: Unflatten, keys: Callable) -> None:
    tree_util = importlib.import_module('jax.tree_util')
    tree_util.register_pytree_with_keys(cls, _keyed(flatten, keys, tree_util.GetAttrKey, tree_util.SequenceKey),
                                        unflatten, flatten)


def _register_with_torch(cls: type, flatten: Flatten, unflatten: Unflatten, keys: Callable) -> None:
    pytree = importlib.import_module('torch.utils._pytree')
    pytree.register_pytree_node(cls, flatten, lambda children, aux: unflatten(aux, list(children)),
                                serialized_type_name=f'{cls.__module__}.{cls.__qualname__}',
                                flatten_with_keys_fn=_keyed(flatten, keys, pytree.GetAttrKey, pytree.SequenceKey))


_REGISTRARS = {'jax': _register_with_jax, 'torch': _register_with_torch}


def _register_all(library: str) -> None:
    """Register every known class with `library`, which must be imported, skipping those it already has."""
    done = _REGISTERED[library]
    for cls, node in list(_NODES.items()):
        if cls not in done:
            _REGISTRARS[library](cls, *node)
            done.add(cls)


def _add_node(cls: type, node: tuple) -> None:
    _NODES[cls] = node
    for library in _LIBRARIES:
        if library in sys.modules:
            _register_all(library)


def register_pytree(cls: type) -> type:
    """Make a dataclass a pytree node of JAX and PyTorch: data fields are children, config fields static.

    Usable as a class decorator. Neither library is imported: each gets the class now if it is
    already imported, else when lazyphi loads its backend (or on `ensure_registered()`).
    Subclasses are separate pytree types; register them too.

    Returns:
        `cls`.

    Raises:
        TypeError: `cls` is not a dataclass.
    """
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise TypeError(f"register_pytree() takes a dataclass, but got {cls!r}")
    if cls not in _NODES:
        _add_node(cls, _dataclass_node(cls))
    return cls


def pytree_dataclass(cls=None, /, **kwargs):
    """`dataclasses.dataclass(frozen=True, **kwargs)` followed by `register_pytree`, as in jax_dataclasses.

    Unlike jax_dataclasses, unmarked fields are split by their annotation (tensor-holding fields are
    children, the rest static); mark fields with `static_field()` or `data_field()` to decide yourself.

    Raises:
        TypeError: `frozen=False` is passed; pytree nodes must be immutable.
    """
    if kwargs.get('frozen', True) is not True:
        raise TypeError("pytree_dataclass() makes frozen dataclasses; drop frozen=False (use "
                        "lazyphi.dataclasses.replace to derive modified copies)")
    kwargs['frozen'] = True

    def decorate(cls):
        return register_pytree(dataclasses.dataclass(**kwargs)(cls))

    return decorate if cls is None else decorate(cls)


def ensure_registered(library: str | None = None) -> None:
    """Register all pytree classes (and the Tensor kinds) with JAX and PyTorch now.

    Needed only when such a library was imported after the classes were registered and no
    lazyphi backend of it has been loaded since.

    Args:
        library: 'jax' or 'torch' to import that library and register with it; None for every
            supported library that is already imported.

    Raises:
        ValueError: `library` is not one of 'jax', 'torch'.
        ImportError: `library` is not installed.
    """
    if library is None:
        for name in _LIBRARIES:
            if name in sys.modules:
                _register_all(name)
        return
    if library not in _LIBRARIES:
        raise ValueError(f"ensure_registered() supports the libraries {_LIBRARIES}, not {library!r}")
    importlib.import_module(library)
    _register_all(library)


def _on_backend(backend: Backend) -> None:
    _register_all(backend.name)


for _kind, _node in _TENSOR_NODES.items():
    _add_node(_kind, _node)
for _library in _LIBRARIES:
    on_backend_loaded(_library, _on_backend)
