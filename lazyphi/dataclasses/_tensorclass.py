"""`TensorClass`: tensordict's inheritance-based tensor dataclass, on named-dim Tensors.

A subclass becomes a dataclass whose constructor also takes `batch_size=` and `device=`. Field
values are converted once, when set: native arrays of any backend become Tensors whose leading
axes are the batch dims, numbers become Tensors (expanded to the batch dims, which costs
nothing), other values are kept as non-tensor data. The batch dims are named by a Shape, or
`b0, b1, ...` when given as sizes; every Tensor field must have them. Positional indexing,
`len`, iteration, `unbind` and `split` act along the batch dims in order.

Instances are mutable unless the class is `frozen`. Setting a field (`obj.x = ...`, `set`,
`update`, `load_state_dict`) converts and checks the value like the constructor and drops the
cached properties that read that field, so a cached value is never stale.
"""

import copy
import dataclasses
import functools
import importlib
import operator
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from ..backend import ComputeDevice, DType, NoBackendFound, choose_backend
from ..math import Shape, Tensor, batch, cast, concat, expand, shape, spatial, stack, wrap
from ..math import slice as slice_
from ._checked import autocast_fields
from ._mutate import _drop_dependent_cache
from ._state import from_state_dict, state_dict, to_device

_OPTIONS = ('autocast', 'nocast', 'frozen', 'tensor_only', 'shadow')
_BATCH_NAMES = '_tensorclass_batch'  # instance attribute: names of the declared batch dims
_READY = '_tensorclass_ready'  # instance attribute: construction finished, so setting a field converts and checks
_PATH = '_tensorclass_path'  # instance attribute: (directory it was memmapped to or loaded from, its batch dims)
_SHARED = '_tensorclass_shared'  # instance attribute: non-tensor values set are written to the save's manifest
_NO_DEFAULT = object()
_RESERVED = frozenset({'batch_size', 'device', 'get', 'set', 'update', 'apply', 'unbind', 'split', 'to', 'cast',
                       'to_dict', 'from_dict', 'state_dict', 'load_state_dict', 'batch_dims', 'memmap', 'memmap_',
                       'memmap_like', 'load_memmap', 'load_', 'memmap_refresh_', 'save', 'dumps', 'load',
                       'consolidate', 'saved_path'})
# The disk side (lazyphi.storage, a sibling layer) is resolved on first use of a memmap method, never at import:
# storage knows no TensorClass and TensorClass imports no storage (docs/design.md, "Layers").
_STORAGE = 'lazyphi.storage'


def _storage():
    return importlib.import_module(_STORAGE)
_DEVICE_TYPES = ('cpu', 'gpu', 'cuda', 'tpu')


class TensorClass:
    """Base class of dataclasses of tensors with batch dims, as tensordict's `TensorClass`.

    `class Foo(TensorClass): x: Tensor` makes `Foo` a dataclass taking `Foo(x=..., batch_size=..., device=...)`.
    Options, as class keywords or in brackets: `frozen` (immutable instances), `autocast` (convert values to
    their fields' annotated types), `nocast` (keep values exactly as given), `tensor_only` (every value must
    become a Tensor), `shadow` (allow field names that shadow this class's methods):
    `class Foo(TensorClass, frozen=True)` or `class Foo(TensorClass["nocast", "frozen"])`.
    """
    _tensorclass_options: frozenset = frozenset()

    def __class_getitem__(cls, options) -> type:
        names = (options,) if isinstance(options, str) else tuple(options)
        unknown = [n for n in names if n not in _OPTIONS]
        if unknown:
            raise TypeError(f"TensorClass[...] takes the options {_OPTIONS}, not {unknown}")
        return type(f"TensorClass[{', '.join(map(repr, names))}]", (cls,),
                    {'_tensorclass_options': cls._tensorclass_options | frozenset(names), '_tensorclass_base': True})

    def __init_subclass__(cls, **kwargs):
        options = {name: kwargs.pop(name) for name in _OPTIONS if name in kwargs}
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get('_tensorclass_base'):
            return
        bad = {name: value for name, value in options.items() if not isinstance(value, bool)}
        if bad:
            raise TypeError(f"TensorClass options take True or False, but got {bad}")
        chosen = (cls._tensorclass_options | {n for n, v in options.items() if v}) - {n for n, v in options.items()
                                                                                     if not v}
        if {'autocast', 'nocast'} <= chosen:
            raise TypeError(f"{cls.__qualname__}: the options autocast and nocast exclude each other")
        cls._tensorclass_options = frozenset(chosen)
        dataclasses.dataclass(cls, frozen='frozen' in chosen, eq=False, repr=False)
        if 'shadow' not in chosen:
            clashes = sorted({f.name for f in dataclasses.fields(cls)} & _RESERVED)
            if clashes:
                raise AttributeError(f"{cls.__qualname__}: the fields {clashes} would shadow TensorClass members; "
                                     f"rename them or declare the class with shadow=True")
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, batch_size=None, device=None, **kwargs):
            object.__setattr__(self, _READY, False)
            init(self, *args, **kwargs)
            self._tensorclass_finish(batch_size, device)
        cls.__init__ = __init__

    # --- construction ----------------------------------------------------------------------------

    def _tensorclass_finish(self, batch_size, device) -> None:
        dims = _batch_dims(batch_size)
        object.__setattr__(self, _BATCH_NAMES, dims.names)
        if 'autocast' in self._tensorclass_options:
            autocast_fields(self)
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, self._tensorclass_value(f.name, getattr(self, f.name), dims))
        if device is not None:
            for f in dataclasses.fields(self):
                value = getattr(self, f.name)
                if isinstance(value, (Tensor, TensorClass)):
                    object.__setattr__(self, f.name, to_device(value, _device(device)))
        object.__setattr__(self, _READY, True)

    def _tensorclass_value(self, name: str, value, dims: Shape):
        """A field's value as stored: converted unless `nocast`, and checked to have the batch dims."""
        options = self._tensorclass_options
        if 'nocast' not in options:
            value = _as_tensor(value, dims, numbers='autocast' not in options)
        if 'tensor_only' in options and not isinstance(value, (Tensor, TensorClass)) and value is not None:
            raise TypeError(f"{type(self).__qualname__}.{name}: a tensor_only class holds Tensors, but got "
                            f"{value!r} of type {type(value).__qualname__}")
        if isinstance(value, (Tensor, TensorClass)):
            missing = [d for d in dims if d.name not in shape(value) or shape(value).get_size(d.name) != d.size]
            if missing:
                raise ValueError(f"{type(self).__qualname__}.{name} has the shape {shape(value)}, which lacks the "
                                 f"batch dims {dims} (at least {missing[0]}); every Tensor field must have them")
        return value

    def __setattr__(self, name: str, value) -> None:
        fields = {f.name for f in dataclasses.fields(self)}
        if name in fields and self.__dict__.get(_READY):
            value = self._tensorclass_value(name, value, self.batch_dims)
        object.__setattr__(self, name, value)
        if name in fields:
            _drop_dependent_cache(self, {name})
            if self.__dict__.get(_SHARED) and self.saved_path and not isinstance(value, (Tensor, TensorClass)):
                _storage().share_value(self.saved_path, name, value)

    # --- batch dims ------------------------------------------------------------------------------

    @property
    def batch_dims(self) -> Shape:
        """The declared batch dims still present, then the batch dims every Tensor field has (a stacked one, say).

        Tensors of Python objects (non-tensor values of stacked instances) do not count.
        """
        tensors = [shape(v) for v in self._tensor_values()
                   if isinstance(v, TensorClass) or v.dtype.kind in (bool, int, float, complex)]
        if not tensors:
            return batch()
        declared = [n for n in self.__dict__.get(_BATCH_NAMES, ()) if all(n in s for s in tensors)]
        common = [n for n in tensors[0].batch.names if n not in declared and all(n in s for s in tensors[1:])]
        return tensors[0].only(declared + common, reorder=True)

    @property
    def batch_size(self) -> Shape:
        """The batch dims with their sizes (a Shape; `tuple(obj.batch_size.sizes)` for tensordict's torch.Size)."""
        return self.batch_dims

    def _tensor_values(self) -> list:
        return [v for f in dataclasses.fields(self) if isinstance(v := getattr(self, f.name), (Tensor, TensorClass))]

    def __len__(self) -> int:
        dims = self.batch_dims
        if not dims:
            raise TypeError(f"len() of a {type(self).__qualname__} without batch dims")
        return dims.sizes[0]

    def __getitem__(self, item):
        """Positional indices and slices select along the batch dims in order; a dict or str selects by dim name."""
        if isinstance(item, (dict, str, Shape)):
            return slice_(self, item)
        return slice_(self, self._positions(item))

    def _positions(self, item) -> dict:
        """A positional index (ints and slices, one per batch dim in order) as {dim name: int or slice}."""
        items = item if isinstance(item, tuple) else (item,)
        dims = self.batch_dims
        if len(items) > dims.rank or any(not isinstance(i, (int, slice)) for i in items):
            raise IndexError(f"{type(self).__qualname__}[{item!r}]: index with at most {dims.rank} ints or slices, "
                             f"one per batch dim {dims}, or with a dict of dim names")
        return {dims.names[k]: i for k, i in enumerate(items)}

    def __setitem__(self, item, value: 'TensorClass') -> None:
        """Write the Tensor fields of `value` (an instance of this class) into `self[item]`, field by field.

        Disk-backed fields (after `memmap`, `memmap_like`, `load_memmap`) are written on disk, chunk by chunk
        (one writer per chunk at a time: see `memmap_like`); other fields get a new Tensor with those elements
        replaced. Non-tensor fields are left as they are. `item` as for indexing: ints and slices, one per
        batch dim, or a dict of dim names to ints and slices.
        """
        if not isinstance(value, type(self)):
            raise TypeError(f"{type(self).__qualname__}[...] = value takes an instance of {type(self).__qualname__}, "
                            f"but got {type(value).__qualname__}")
        selection = dict(item) if isinstance(item, dict) else self._positions(item)
        storage = _storage()
        changes = {}
        for f in dataclasses.fields(self):
            target, given = getattr(self, f.name), getattr(value, f.name)
            if isinstance(target, TensorClass):
                target[selection] = given
            elif isinstance(target, Tensor):
                written = storage.assign(target, {k: v for k, v in selection.items() if k in target.shape}, given)
                if written is not target:
                    changes[f.name] = written
        if changes and 'frozen' in self._tensorclass_options:
            raise dataclasses.FrozenInstanceError(
                f"{type(self).__qualname__} is frozen: its fields {sorted(changes)} lie in memory and cannot be "
                f"written into (disk-backed fields were); memmap it, or use memmap_like, for a writable buffer")
        for name, written in changes.items():
            object.__setattr__(self, name, written)
        _drop_dependent_cache(self, set(changes))

    def __iter__(self) -> Iterator:
        return iter(self.unbind(0))

    def unbind(self, dim: int | str = 0) -> tuple:
        """The instances along one batch dim (its position among the batch dims, or its name)."""
        name = self._dim_name(dim)
        return tuple(slice_(self, {name: i}) for i in range(self.batch_dims.get_size(name)))

    def split(self, split_size: int | list, dim: int | str = 0) -> tuple:
        """Pieces along one batch dim: `split_size` elements each (the last may be shorter), or the sizes listed."""
        name = self._dim_name(dim)
        total = self.batch_dims.get_size(name)
        if isinstance(split_size, int):
            if split_size < 1:
                raise ValueError(f"split(): split_size must be at least 1, but got {split_size}")
            sizes = [min(split_size, total - start) for start in range(0, total, split_size)]
        else:
            sizes = list(split_size)
            if sum(sizes) != total or any(s < 0 for s in sizes):
                raise ValueError(f"split(): sizes {sizes} must be non-negative and add up to {name}'s size {total}")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return tuple(slice_(self, {name: slice(s, s + n)}) for s, n in zip(starts, sizes, strict=True))

    def _dim_name(self, dim: int | str) -> str:
        dims = self.batch_dims
        if isinstance(dim, str) and dim in dims:
            return dim
        if isinstance(dim, int) and -dims.rank <= dim < dims.rank:
            return dims.names[dim]
        raise ValueError(f"{type(self).__qualname__} has the batch dims {dims}; {dim!r} names none of them")

    # --- values ----------------------------------------------------------------------------------

    def apply(self, fn: Callable, *others) -> 'TensorClass':
        """A copy whose Tensor fields (and those of nested tensor classes) are `fn(value, *others' values)`."""
        changes = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (Tensor, TensorClass)):
                partners = [getattr(o, f.name) if isinstance(o, TensorClass) else o for o in others]
                changes[f.name] = value.apply(fn, *partners) if isinstance(value, TensorClass) else fn(value, *partners)
        return self._with(changes)

    def _with(self, changes: dict) -> 'TensorClass':
        result = copy.copy(self)
        vars(result).pop(_PATH, None)  # new values: no longer those on disk
        vars(result).pop(_SHARED, None)
        for name, value in changes.items():
            object.__setattr__(result, name, value)
        _drop_dependent_cache(result, set(changes))
        return result

    def _binary(self, other, op: Callable, reverse: bool = False):
        if isinstance(other, TensorClass) and type(other) is not type(self):
            return NotImplemented
        return self.apply((lambda a, b: op(b, a)) if reverse else op, other)

    def __add__(self, other):
        return self._binary(other, operator.add)

    def __radd__(self, other):
        return self._binary(other, operator.add, True)

    def __sub__(self, other):
        return self._binary(other, operator.sub)

    def __rsub__(self, other):
        return self._binary(other, operator.sub, True)

    def __mul__(self, other):
        return self._binary(other, operator.mul)

    def __rmul__(self, other):
        return self._binary(other, operator.mul, True)

    def __truediv__(self, other):
        return self._binary(other, operator.truediv)

    def __rtruediv__(self, other):
        return self._binary(other, operator.truediv, True)

    def __pow__(self, other):
        return self._binary(other, operator.pow)

    def __neg__(self):
        return self.apply(operator.neg)

    def __abs__(self):
        return self.apply(abs)

    def get(self, key: str | tuple, default=_NO_DEFAULT):
        """The value at `key`: a field name, or a tuple of names into nested instances; `default` where absent."""
        keys = (key,) if isinstance(key, str) else tuple(key)
        value = self
        for k in keys:
            if not isinstance(k, str):
                raise TypeError(f"get(): keys are str or tuples of str, but got {key!r}")
            if not (dataclasses.is_dataclass(value) and k in {f.name for f in dataclasses.fields(value)}):
                if default is _NO_DEFAULT:
                    raise KeyError(f"{type(self).__qualname__} has no entry {key!r} (no field {k!r} there)")
                return default
            value = getattr(value, k)
        return value

    def set(self, key: str | tuple, value, inplace: bool = False) -> 'TensorClass':
        """Set the field at `key` (a name, or a tuple of names into nested instances); returns `self`.

        The value is converted and checked as at construction; cached properties reading the field are dropped.
        `inplace` is accepted for tensordict's signature: Tensors are immutable, so a field always gets the new value.
        """
        keys = (key,) if isinstance(key, str) else tuple(key)
        owner = self.get(keys[:-1]) if len(keys) > 1 else self
        if not isinstance(owner, TensorClass) or keys[-1] not in {f.name for f in dataclasses.fields(owner)}:
            raise KeyError(f"{type(self).__qualname__} has no field at {key!r} to set")
        setattr(owner, keys[-1], value)
        return self

    def update(self, entries: Mapping) -> 'TensorClass':
        """Set several fields from a dict; a dict given for a nested instance updates that instance. Returns `self`."""
        for name, value in entries.items():
            current = self.get(name, None)
            if isinstance(current, TensorClass) and isinstance(value, Mapping):
                current.update(value)
            else:
                self.set(name, value)
        return self

    def to_dict(self) -> dict:
        """The fields as a dict, nested instances as nested dicts."""
        return {f.name: v.to_dict() if isinstance(v := getattr(self, f.name), TensorClass) else v
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, entries: Mapping, batch_size=None, device=None) -> 'TensorClass':
        """An instance from a dict of its fields; dicts for fields holding tensor classes build those."""
        hints = {f.name: f.type for f in dataclasses.fields(cls)}
        values = {}
        for name, value in entries.items():
            target = hints.get(name)
            nested = isinstance(target, type) and issubclass(target, TensorClass) and isinstance(value, Mapping)
            values[name] = target.from_dict(value, batch_size, device) if nested else value
        return cls(**values, batch_size=batch_size, device=device)

    def state_dict(self) -> dict:
        """Flat dotted keys to values, as `lazyphi.dataclasses.state_dict`."""
        return state_dict(self)

    def load_state_dict(self, state: Mapping, strict: bool = True) -> 'TensorClass':
        """Set the fields from a state dict made by `state_dict`; returns `self`.

        Args:
            state: dotted keys to values.
            strict: every field must have its entries and every key must name one; if False, fields without
                entries keep their values and unknown keys are ignored.

        Raises:
            KeyError: (strict) a field has no entry or a key names no field.
        """
        loaded = from_state_dict(type(self), state if strict else {**self.state_dict(), **state}, strict)
        given = {key.split('.')[0] for key in state}
        for f in dataclasses.fields(self):
            if f.name in given:
                setattr(self, f.name, getattr(loaded, f.name))
        return self

    def cast(self, dtype) -> 'TensorClass':
        """A copy with every Tensor cast to `dtype` (a DType, a Python type, or a NumPy, PyTorch or JAX dtype)."""
        target = DType.as_dtype(dtype)
        return self.apply(lambda t: cast(t, target))

    def to(self, target) -> 'TensorClass':
        """A copy on a device (a `ComputeDevice`, or 'cpu', 'gpu', 'cuda', 'tpu') or cast to a dtype."""
        if isinstance(target, ComputeDevice) or (isinstance(target, str) and target.lower() in _DEVICE_TYPES):
            return to_device(self, _device(target))
        try:
            dtype = DType.as_dtype(target)
        except (TypeError, ValueError) as err:
            raise TypeError(f"to() takes a device or a dtype, but got {target!r}") from err
        return self.cast(dtype)

    # --- on disk (lazyphi.storage) ------------------------------------------------------------------

    def memmap(self, prefix=None, copy_existing: bool = False, *, num_threads: int = 0, return_early: bool = False,
               share_non_tensor: bool = False, existsok: bool = True) -> 'TensorClass | Future':
        """A copy whose Tensor fields lie in a save (Zarr) at `prefix`, read chunk by chunk when used.

        Non-tensor values go into the save's JSON manifest. tensordict's arguments:

        Args:
            prefix: the directory; None: a new temporary directory, not deleted afterwards.
            copy_existing: False: a Tensor already on disk outside `prefix` is an error; True: it is copied.
            num_threads: with `return_early`, > 0 runs the save on a thread of its own. Chunks are written by
                `lazyphi.save`'s threads whatever it is.
            return_early: with `num_threads > 0`, return a `concurrent.futures.Future` of the copy at once.
            share_non_tensor: setting a non-tensor field of the copy writes it into the save's manifest, where
                every later load or `memmap_refresh_` (in any process) finds it.
            existsok: replace a save at `prefix`; False: an existing `prefix` is a FileExistsError.
        """
        return self._to_disk(prefix, copy_existing, num_threads, return_early, share_non_tensor, existsok, True, False)

    def memmap_(self, prefix=None, copy_existing: bool = False, *, num_threads: int = 0, return_early: bool = False,
                share_non_tensor: bool = False, existsok: bool = True) -> 'TensorClass | Future':
        """`memmap` in place: the Tensor fields of `self` become disk-backed; returns `self` (or its Future)."""
        return self._to_disk(prefix, copy_existing, num_threads, return_early, share_non_tensor, existsok, True, True)

    def memmap_like(self, prefix=None, copy_existing: bool = False, *, existsok: bool = True, num_threads: int = 0,
                    return_early: bool = False, share_non_tensor: bool = False) -> 'TensorClass | Future':
        """A copy whose Tensor fields are empty, writable arrays on disk of the same shapes, dims and dtypes.

        Nothing is written or held in memory (expanded Tensors get arrays of their full shape). Each chunk is
        missing until written: reading it raises `ChunkMissing`, never zeros. Fill it by `buffer[i] = instance`
        or `buffer[a:b] = instance`. The rule: one writer per chunk at a time; writers of disjoint ranges of
        whole chunks (`buffer.<field>.chunks[0]` along the first dim) may run at once, in threads or
        processes. Arguments as `memmap`.
        """
        return self._to_disk(prefix, copy_existing, num_threads, return_early, share_non_tensor, existsok, False,
                             False)

    save = memmap
    dumps = memmap

    def _to_disk(self, prefix, copy_existing, num_threads, return_early, share, existsok, values, inplace):
        for name, flag in (('copy_existing', copy_existing), ('return_early', return_early),
                           ('share_non_tensor', share), ('existsok', existsok)):
            if not isinstance(flag, bool):
                raise TypeError(f"memmap(): {name} takes True or False, but got {flag!r}")
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
            raise ValueError(f"memmap(): num_threads must be a non-negative int, but got {num_threads!r}")
        metadata = {**_declared(self), 'share_non_tensor': share}

        def write() -> 'TensorClass':
            tree, path = _storage().memmap(self, prefix, copy_existing=copy_existing, existsok=existsok,
                                           values=values, metadata=metadata)
            loaded = _restored(tree, metadata, path)
            if not inplace:
                return loaded
            self._take(loaded)
            return self
        if not (return_early and num_threads > 0):
            return write()
        pool = ThreadPoolExecutor(1, thread_name_prefix='lazyphi-memmap')
        try:
            return pool.submit(write)
        finally:
            pool.shutdown(wait=False)

    def _take(self, other: 'TensorClass') -> None:
        """Take the fields and disk state of `other` (an instance of this class) in place; drop the caches."""
        names = [f.name for f in dataclasses.fields(self)]
        for name in names:
            object.__setattr__(self, name, getattr(other, name))
        for key in (_BATCH_NAMES, _PATH, _SHARED):
            object.__setattr__(self, key, other.__dict__.get(key))
        _drop_dependent_cache(self, set(names))

    @classmethod
    def load_memmap(cls, prefix, device=None, non_blocking: bool = False, *, out: 'TensorClass | None' = None):
        """The instance saved at `prefix` by `memmap` (or `memmap_like`), its Tensors read chunk by chunk when used.

        Args:
            prefix: the directory.
            device: load the values now, onto this device ('cpu', 'gpu', a `ComputeDevice`); None: stay lazy.
            non_blocking: accepted for tensordict's signature.
            out: load into this instance instead (`out.load_(prefix)`).

        Raises:
            FileNotFoundError: nothing at `prefix`.
            TypeError: the save holds no instance of this class.
        """
        if out is not None:
            return out.load_(prefix)
        tree, metadata, path = _storage().load_memmap(prefix, cls)
        if not isinstance(tree, cls):
            raise TypeError(f"{cls.__qualname__}.load_memmap({path!r}): the save holds a {type(tree).__qualname__}, "
                            f"not a {cls.__qualname__}")
        obj = _restored(tree, metadata, path)
        return obj if device is None else to_device(obj, _device(device))

    load = load_memmap

    def load_(self, prefix) -> 'TensorClass':
        """Load the instance saved at `prefix` into `self` (its fields become those on disk); returns `self`."""
        self._take(type(self).load_memmap(prefix))
        return self

    @property
    def saved_path(self) -> str | None:
        """The directory this instance was memmapped to or loaded from; None if neither, or for a part of it
        (a slice, an element: their batch dims are not those saved) or a result computed from it."""
        saved = self.__dict__.get(_PATH)
        return saved[0] if saved is not None and saved[1] == self.batch_dims else None

    def memmap_refresh_(self) -> 'TensorClass':
        """Open the save at `saved_path` again: values another process wrote there (shared non-tensor values
        included) become this instance's. Returns `self`.

        Raises:
            ValueError: the instance has no saved path (it was never memmapped or loaded).
        """
        path = self.saved_path
        if path is None:
            raise ValueError(f"memmap_refresh_(): this {type(self).__qualname__} has no saved path: it was never "
                             f"memmapped or loaded from disk. Call memmap_(prefix) or load_(prefix) first")
        return self.load_(path)

    def consolidate(self) -> 'TensorClass':
        """A copy whose Tensors lie in memory, each one dense native array of its own (on disk: read now)."""
        return self.apply(_storage().consolidated)

    def __repr__(self) -> str:
        fields = ', '.join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
        return f"{type(self).__name__}({fields}, batch_size={self.batch_dims})"

    @classmethod
    def __stack__(cls, values: tuple, dim: Shape, **kwargs) -> 'TensorClass':
        """Tensor fields stacked along `dim`; non-tensor values that differ become a Tensor of them, one per element."""
        return _join(values, lambda items: stack(items, dim), lambda items: stack([wrap(i) for i in items], dim))

    @classmethod
    def __concat__(cls, values: tuple, dim: str, **kwargs) -> 'TensorClass':
        """Tensor fields concatenated along `dim`; non-tensor values must agree."""
        def differ(items):
            raise ValueError(f"concat() of {cls.__qualname__} instances whose non-tensor values differ: {items}")
        return _join(values, lambda items: concat(items, dim), differ)


def _join(values: tuple, join: Callable, join_others: Callable) -> TensorClass:
    first = values[0]
    changes = {}
    for f in dataclasses.fields(first):
        items = [getattr(v, f.name) for v in values]
        if all(isinstance(i, (Tensor, TensorClass)) for i in items):
            changes[f.name] = join(items)
        elif all(i is items[0] or i == items[0] for i in items):
            changes[f.name] = items[0]
        else:
            changes[f.name] = join_others(items)
    return first._with(changes)


def _declared(obj: TensorClass) -> dict:
    """The declared batch dims of `obj` and of the tensor classes in its fields, as a save's metadata keeps them."""
    nested = {f.name: _declared(v) for f in dataclasses.fields(obj) if isinstance(v := getattr(obj, f.name),
                                                                                  TensorClass)}
    return {'batch': list(obj.__dict__.get(_BATCH_NAMES, ())), 'fields': nested}


def _restored(obj: TensorClass, metadata: dict, path: str | None) -> TensorClass:
    """An instance `lazyphi.load` rebuilt (no `__init__` ran) with the state `__init__` sets, and its save."""
    for f in dataclasses.fields(obj):
        if isinstance(value := getattr(obj, f.name), TensorClass):
            _restored(value, metadata.get('fields', {}).get(f.name, {}), None)
    object.__setattr__(obj, _BATCH_NAMES, tuple(metadata.get('batch', ())))
    object.__setattr__(obj, _READY, True)
    object.__setattr__(obj, _PATH, None if path is None else (path, obj.batch_dims))
    object.__setattr__(obj, _SHARED, bool(metadata.get('share_non_tensor', False)))
    return obj


def _batch_dims(batch_size) -> Shape:
    if batch_size is None:
        return batch()
    if isinstance(batch_size, Shape):
        return batch_size
    sizes = tuple(batch_size) if not isinstance(batch_size, int) else (batch_size,)
    if not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ValueError(f"batch_size must be a Shape or a sequence of non-negative ints, but got {batch_size!r}")
    return batch(**{f'b{i}': s for i, s in enumerate(sizes)})


def _as_tensor(value, dims: Shape, numbers: bool):
    """A native array as a Tensor (its leading axes the batch dims), a number (if `numbers`) as one expanded to them;
    anything else as it is."""
    if isinstance(value, (Tensor, TensorClass, str, bytes, Mapping)) or value is None:
        return value
    if isinstance(value, (bool, int, float, complex)):
        return expand(wrap(value), dims) if numbers else value
    try:
        backend = choose_backend(value)
    except NoBackendFound:
        return value
    if backend.catch_all:
        return value
    axes = len(backend.staticshape(value))
    if axes < dims.rank or tuple(backend.staticshape(value))[:dims.rank] != tuple(dims.sizes):
        raise ValueError(f"An array of shape {tuple(backend.staticshape(value))} does not start with the batch "
                         f"sizes {tuple(dims.sizes)} of {dims}")
    rest = backend.staticshape(value)[dims.rank:]  # named by position from the last axis, as jit_compile names them
    return wrap(value, dims, spatial(**{f'_{len(rest) - 1 - i}': n for i, n in enumerate(rest)}))


def _device(device) -> ComputeDevice | str:
    if isinstance(device, ComputeDevice):
        return device
    name = str(device).lower().split(':')[0]
    return {'cuda': 'GPU'}.get(name, name.upper())

