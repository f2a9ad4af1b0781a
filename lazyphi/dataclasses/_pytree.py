"""Dataclasses and Tensors as pytree nodes of JAX and PyTorch, registered without importing either.

A registered dataclass flattens into its *children* and static *aux data*. `register_pytree`
makes the data fields (those that may hold tensors) children and the config and special fields
static; `pytree_dataclass` makes every field a child, as jax_dataclasses does. In both,
`static_field()`, a `Static[T]` annotation and `data_field()` decide per field. Cached property
values are not part of the flattened form, so a transform never leaves a tracer in a cache: an
unflattened instance computes its properties afresh. Unflattening sets the fields on an instance made by
`object.__new__` and runs no `__init__`, `__post_init__` or `@checked` validation, as JAX
requires (it unflattens with placeholder leaves).

The Tensor kinds of `lazyphi.math` are nodes too: a dense tensor's child is its native and its
aux data the Shape and backend; a lazily expanded tensor's child is the tensor it expands; a
stacked tensor's children are its parts. A transform that maps over leaves (`jax.vmap`,
`lax.scan`) maps over the first dim of each dense tensor, whose native's first axis it is; any
other disagreement of a native's axes with the Shape raises `IncompatibleShapes` instead of
producing a tensor whose shape lies.

Registration is lazy. A library already in `sys.modules` gets a class at once; otherwise it is
registered when lazyphi's backend for that library is loaded (`on_backend_loaded`). Call
`ensure_registered()` after importing a library by hand if no lazyphi backend of it is loaded yet.
flax's serialization (`to_state_dict`, `to_bytes`, ...) gets every class when `flax.serialization`
is imported, before or after lazyphi: an import hook watches for it.
"""

import contextlib
import dataclasses
import functools
import importlib
import importlib.abc
import importlib.machinery
import inspect
import re
import sys
import threading
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from .._errors import IncompatibleShapes
from ..backend import Backend, NoBackendFound, choose_backend, on_backend_loaded
from ..math import Expanded, Shape, Stacked, Tensor, batch, data_fields
from ..math.kinds import Dense, resolved_annotations

_STATIC = 'lazyphi_static'  # dataclass field metadata key: True static, False child, absent by classification
# library -> the module whose import makes registering with it possible
_LIBRARIES = {'jax': 'jax', 'torch': 'torch', 'flax': 'flax.serialization'}

Flatten = Callable[[Any], tuple[list, Any]]
Unflatten = Callable[[Any, list], Any]  # (aux data, children) -> node, JAX's argument order
T = TypeVar('T')


# --- field markers -------------------------------------------------------------------------------


class _StaticMark:
    """The metadata `Static[T]` puts into `Annotated`."""

    def __repr__(self) -> str:
        return 'Static'


_STATIC_MARK = _StaticMark()
Static = Annotated[T, _STATIC_MARK]
"""`Static[T]` annotates a dataclass field or a `jit` argument of type T as static, as in jax_dataclasses."""
_STATIC_TEXT = re.compile(r'(?:^|[\s\[.,])Static\[')  # Static[...] in an annotation left as a string


def _is_static_annotation(annotation) -> bool:
    """Whether an annotation (resolved, or a string that could not be resolved) is `Static[...]`."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return bool(_STATIC_TEXT.search(annotation))
    return typing.get_origin(annotation) is Annotated and any(m is _STATIC_MARK for m in annotation.__metadata__)


def static_field(*, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING,
                 init: bool = True, kw_only: Any = dataclasses.MISSING, **kwargs) -> Any:
    """`dataclasses.field(...)` marking the field as static: part of the pytree structure, never a leaf.

    Static values must be hashable and comparable; changing one makes `jax.jit` compile again.
    Annotating the field `Static[T]` does the same.
    """
    return _marked_field(True, default, default_factory, init, kw_only, kwargs)


def data_field(*, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING,
               init: bool = True, kw_only: Any = dataclasses.MISSING, **kwargs) -> Any:
    """`dataclasses.field(...)` marking the field as a pytree child, whatever its annotation says."""
    return _marked_field(False, default, default_factory, init, kw_only, kwargs)


def _marked_field(static: bool, default, default_factory, init: bool, kw_only, kwargs: dict) -> Any:
    # the explicit parameters above are those a type checker reads from a field specifier
    metadata = {**(kwargs.pop('metadata', None) or {}), _STATIC: static}
    return dataclasses.field(default=default, default_factory=default_factory, init=init, kw_only=kw_only,
                             metadata=metadata, **kwargs)


# --- Tensor kinds --------------------------------------------------------------------------------


def _flatten_dense(t: Dense) -> tuple[list, Any]:
    return [t.native()], (t.shape, t.backend)


def _unflatten_dense(aux: tuple, children: list) -> Dense:
    (native,) = children
    shape, backend = aux
    leaf_shape = _array_shape(native)
    if leaf_shape is not None:  # an array or tracer; JAX also unflattens placeholders, which are let through
        shape = _mapped_shape(leaf_shape, shape)
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


_MAPPED = threading.local()  # .dims: the dims transforms mapped over in this thread, most recent last
_MAPPED_KEPT = 16
STACKED_DIM = 'stack'
"""Name of the batch dim of an axis a transform stacked outputs along, when no dim it mapped over had its size."""


def _mapped_shape(leaf_shape: tuple, shape: Shape) -> Shape:
    """The Shape of a native whose axes are `leaf_shape` that was flattened with `shape`.

    Transforms that map over leaves (`jax.vmap`, `lax.scan`, `torch.vmap`) take their first axis
    away and put a stacked axis in front of their outputs. The first axis of a Tensor's native is
    its first dim, so a native lacking it has the Shape without that dim, which is remembered; a
    native with one more leading axis gets the most recently mapped dim of that size back, or a
    batch dim named `STACKED_DIM`. Any other difference raises `IncompatibleShapes`.
    """
    def fits(sizes) -> bool:
        return len(sizes) == len(shape) and all(not isinstance(s, int) or not isinstance(n, int) or n == s
                                                for n, s in zip(sizes, shape.sizes, strict=True))
    if fits(leaf_shape):
        return shape
    mapped = _MAPPED.__dict__.setdefault('dims', [])
    if shape.rank and fits((shape.sizes[0], *leaf_shape)):
        mapped.append(shape[0])
        del mapped[:-_MAPPED_KEPT]
        return shape[1:]
    if leaf_shape and fits(tuple(leaf_shape[1:])):
        size = leaf_shape[0]
        dim = next((d for d in reversed(mapped) if d.size == size and d.name not in shape), None)
        return (dim if dim is not None else batch(**{STACKED_DIM: size})) + shape
    raise IncompatibleShapes(
        f"Cannot rebuild a Tensor of shape {shape} (axis sizes {tuple(shape.sizes)}) from a native of shape "
        f"{tuple(leaf_shape)}: a transform changed the axes of the Tensor's native other than by mapping over its "
        f"first dim ({shape.names[0] if shape.rank else 'it has none'}) or stacking along a new first axis. "
        f"Map over named dims with lazyphi functions instead, or pass natives (t.native(order)) to the transform.")


def _flatten_expanded(t: Expanded) -> tuple[list, Any]:
    return [t._inner], (t.shape, t._inner.shape)


def _unflatten_expanded(aux: tuple, children: list) -> Expanded:
    """An expanded Tensor whose inner tensor a transform mapped over (or stacked) loses (or gains) those dims too."""
    shape, inner_shape = aux
    inner = children[0]
    if isinstance(inner, Tensor) and inner.shape.names != inner_shape.names:
        lost = [n for n in inner_shape.names if n not in inner.shape]
        shape = inner.shape.without(shape.names) + shape.without(lost)
    return Expanded(inner, shape)


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


def _field_split(cls: type, all_children: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(child field names, static field names) of a dataclass.

    A field marker decides first, then a `Static[T]` annotation; an unmarked field is a child if
    `all_children` (jax_dataclasses' rule), else if the field classification calls it data.
    """
    hints = resolved_annotations(cls)
    data = {f.name for f in data_fields(cls)}
    children, static = [], []
    for f in dataclasses.fields(cls):
        marked = f.metadata.get(_STATIC)
        if marked is None:
            marked = _is_static_annotation(hints.get(f.name, f.type)) or not (all_children or f.name in data)
        (static if marked else children).append(f.name)
    return tuple(children), tuple(static)


def _dataclass_node(cls: type, all_children: bool) -> tuple[Flatten, Unflatten, Callable[[Any], tuple]]:
    split: list = []  # computed on first use, when forward references in annotations resolve

    def names() -> tuple[tuple[str, ...], tuple[str, ...]]:
        if not split:
            split.append(_field_split(cls, all_children))
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


def _register_with_flax(cls: type, flatten: Flatten, unflatten: Unflatten, keys: Callable) -> None:
    """flax.serialization's state dicts: a node's state maps each child's key (as a str) to the child's state."""
    serialization = importlib.import_module('flax.serialization')

    def to_state_dict(obj) -> dict:
        children, _ = flatten(obj)
        return {str(k): serialization.to_state_dict(c) for k, c in zip(keys(obj), children, strict=True)}

    def from_state_dict(target, state: dict):
        children, aux = flatten(target)
        names = [str(k) for k in keys(target)]
        if set(state) != set(names):
            raise ValueError(f"Cannot restore a {type(target).__qualname__} from a state with the entries "
                             f"{sorted(state)}: it needs exactly {sorted(names)}")
        return unflatten(aux, [serialization.from_state_dict(c, state[n], name=n)
                               for n, c in zip(names, children, strict=True)])

    serialization.register_serialization_state(cls, to_state_dict, from_state_dict)


_REGISTRARS = {'jax': _register_with_jax, 'torch': _register_with_torch, 'flax': _register_with_flax}


def _register_all(library: str) -> None:
    """Register every known class with `library`, which must be imported, skipping those it already has."""
    done = _REGISTERED[library]
    for cls, node in list(_NODES.items()):
        if cls not in done:
            _REGISTRARS[library](cls, *node)
            done.add(cls)


def _add_node(cls: type, node: tuple) -> None:
    _NODES[cls] = node
    for library, module in _LIBRARIES.items():
        if module in sys.modules:
            _register_all(library)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Registers every class with a library whose registry is imported after lazyphi (flax has no backend).

    It finds nothing itself: for the watched module it asks the other finders and wraps the loader so
    that registration follows the module's execution.
    """

    def __init__(self, library: str):
        self.library = library

    def find_spec(self, name: str, path, target=None):
        if name != _LIBRARIES[self.library]:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module) -> None:
            execute(module)
            _register_all(self.library)

        spec.loader.exec_module = exec_module
        return spec


def register_pytree(cls: type, *, all_children: bool = False) -> type:
    """Make a dataclass a pytree node of JAX and PyTorch: data fields are children, config fields static.

    Usable as a class decorator. Neither library is imported: each gets the class now if it is
    already imported, else when lazyphi loads its backend (or on `ensure_registered()`).
    Subclasses are separate pytree types; register them too.

    Args:
        cls: dataclass.
        all_children: every field not marked static (`static_field()` or a `Static[T]` annotation) is a
            child, as in jax_dataclasses; by default an unmarked field is a child only if its annotation
            may hold data (a Tensor, an array, a dataclass, ...), so numbers and strings stay static.

    Returns:
        `cls`.

    Raises:
        TypeError: `cls` is not a dataclass.
    """
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise TypeError(f"register_pytree() takes a dataclass, but got {cls!r}")
    if cls not in _NODES:
        _add_node(cls, _dataclass_node(cls, all_children))
    return cls


@typing.overload
def pytree_dataclass(cls: type[T], /) -> type[T]: ...


@typing.overload
def pytree_dataclass(*, init: bool = True, repr: bool = True, eq: bool = True, order: bool = False,
                     unsafe_hash: bool = False, frozen: bool = True, match_args: bool = True,
                     kw_only: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@typing.dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, static_field, data_field))
def pytree_dataclass(cls=None, /, **kwargs):
    """`dataclasses.dataclass(frozen=True, **kwargs)` registered as a pytree node, as in jax_dataclasses.

    As there, every field is a child of the node except those marked static, by `static_field()` or
    by a `Static[T]` annotation. Type checkers (mypy, pyright) check constructor calls as for any dataclass.

    Raises:
        TypeError: `frozen=False` is passed; pytree nodes must be immutable.
    """
    if kwargs.get('frozen', True) is not True:
        raise TypeError("pytree_dataclass() makes frozen dataclasses; drop frozen=False (use "
                        "lazyphi.dataclasses.replace or copy_and_mutate to derive modified copies)")
    kwargs['frozen'] = True

    def decorate(cls):
        return register_pytree(dataclasses.dataclass(**kwargs)(cls), all_children=True)

    return decorate if cls is None else decorate(cls)


def jit(fn: Callable | None = None, /, **jit_kwargs) -> Callable:
    """`jax.jit` that takes the parameters annotated `Static[T]` as static arguments, as jax_dataclasses' `jit`.

    Static fields of pytree dataclasses passed in are static without annotation: they are part of the
    tree structure. Usable as `@jit` and `@jit(donate_argnums=...)`; other keywords go to `jax.jit`.

    Raises:
        TypeError: `fn` is not callable.
    """
    if fn is None:
        return functools.partial(jit, **jit_kwargs)
    if not callable(fn):
        raise TypeError(f"jit() takes a function, but got {fn!r}")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError, AttributeError):  # an annotation naming something not defined yet
        hints = dict(getattr(fn, '__annotations__', {}))
    params = inspect.signature(fn).parameters
    static = tuple(name for name, p in params.items()
                   if _is_static_annotation(hints.get(name, p.annotation)) and p.kind is not p.VAR_KEYWORD)
    static_kwargs = {'static_argnames': tuple(jit_kwargs.pop('static_argnames', ())) + static} if static else {}
    return importlib.import_module('jax').jit(fn, **static_kwargs, **jit_kwargs)


def ensure_registered(library: str | None = None) -> None:
    """Register all pytree classes (and the Tensor kinds) with JAX, PyTorch and flax's serialization now.

    Needed only when JAX or PyTorch was imported after the classes were registered and no lazyphi
    backend of it has been loaded since (flax is registered when `flax.serialization` is imported).

    Args:
        library: 'jax', 'torch' or 'flax' to import that library and register with it; None for every
            supported library that is already imported.

    Raises:
        ValueError: `library` is not one of 'jax', 'torch', 'flax'.
        ImportError: `library` is not installed.
    """
    if library is None:
        for name, module in _LIBRARIES.items():
            if module in sys.modules:
                _register_all(name)
        return
    if library not in _LIBRARIES:
        raise ValueError(f"ensure_registered() supports the libraries {tuple(_LIBRARIES)}, not {library!r}")
    importlib.import_module(_LIBRARIES[library])
    _register_all(library)


def _on_backend(backend: Backend) -> None:
    _register_all(backend.name)


for _kind, _node in _TENSOR_NODES.items():
    _add_node(_kind, _node)
for _library in ('jax', 'torch'):
    on_backend_loaded(_library, _on_backend)
if _LIBRARIES['flax'] not in sys.modules:
    sys.meta_path.insert(0, _RegisterOnImport('flax'))
