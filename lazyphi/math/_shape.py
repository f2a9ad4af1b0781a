"""Named, typed dimensions and the `Shape` that holds them.

A dim has a name, a size, a type (batch, dual, instance, spatial or channel) and
optionally one label per item. Shapes are plain immutable values: building one costs a
few attribute stores, and the functions here keep the common cases (equal shapes, an
empty shape, one shape holding the other) free of any loops.
"""
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partialmethod
from operator import itemgetter

from .._errors import DimNotFound, IncompatibleShapes
from ..backend import DType
from ._selection import ShapeSelection
from ._sizes import NonUniform, parse_size

BATCH = 'batch'
DUAL = 'dual'
INSTANCE = 'instance'
SPATIAL = 'spatial'
CHANNEL = 'channel'
DIM_TYPES = (BATCH, DUAL, INSTANCE, SPATIAL, CHANNEL)

_TYPE_ORDER = {t: i for i, t in enumerate(DIM_TYPES)}
_SUPERSCRIPTS = {BATCH: 'ᵇ', DUAL: 'ᵈ', INSTANCE: 'ⁱ', SPATIAL: 'ˢ', CHANNEL: 'ᶜ'}
_FILTER_FORMS = ("None, a str like 'x,y', a Shape, a sequence or set of those, "
                 "or a function mapping a Shape to a Shape (such as spatial or non_batch)")
_RAISE = object()  # default marker: no default was given
_CACHE_LIMIT = 4096  # entries per memo dict; they are keyed by small tuples and strings
_CANONICAL_ORDERS: dict = {}  # types tuple -> itemgetter sorting them canonically, or None
_TYPE_POSITIONS: dict = {}  # types tuple -> {dim type: (positions of that type, positions of others)}
_RESOLVED: dict = {}  # parsed str and all-str tuple dim filters


class Shape(ShapeSelection):
    """Immutable sequence of named, typed dims with sizes and optional item labels.

    The constructor stores its arguments as they are, without checks, because it sits
    on every hot path; use `batch`, `spatial`, ... to build shapes from user input.
    Instances must not be mutated: they are hashed and shared freely.
    """
    __slots__ = ('_hash', 'labels', 'names', 'sizes', 'types')

    def __init__(self, sizes: tuple, names: tuple[str, ...], types: tuple[str, ...],
                 labels: tuple[tuple[str, ...] | None, ...]):
        self.sizes = sizes
        self.names = names
        self.types = types
        self.labels = labels

    # --- basic properties ---

    dim_types = property(lambda self: self.types, doc="Alias of `types`.")
    item_names = property(lambda self: self.labels, doc="Alias of `labels`.")

    rank = property(lambda self: len(self.names), doc="Number of dims.")
    is_empty = property(lambda self: not self.names, doc="True if the shape has no dims.")

    def __len__(self) -> int:
        return len(self.names)

    def __bool__(self) -> bool:
        return bool(self.names)

    @property
    def is_uniform(self) -> bool:
        """True unless some size is a `NonUniform`."""
        return not any(isinstance(s, NonUniform) for s in self.sizes)

    @property
    def volume(self) -> int | None:
        """Number of elements, or None if a size is unknown.

        A non-uniform shape counts the elements of each slice along the dims its sizes vary along; without
        those dims (a non-uniform size whose `along` dims are not in this shape) the count is None.
        """
        volume = 1
        for size in self.sizes:
            if size is None:
                return None
            if isinstance(size, NonUniform):
                return self._non_uniform_volume()
            volume *= size
        return volume

    def _non_uniform_volume(self) -> int | None:
        along = self.non_uniform_shape
        if along.rank == 0 or not all(isinstance(s, int) for s in along.sizes):
            return None
        total = 0
        for index in itertools.product(*[range(s) for s in along.sizes]):
            part = self.after_gather(dict(zip(along.names, index, strict=True)))
            count = part.volume
            if count is None:
                return None
            total += count
        return total

    def _single(self, what: str) -> int:
        if len(self.names) != 1:
            raise ValueError(f"Shape.{what} needs a shape of rank 1 but {self} has rank {len(self.names)}")
        return 0

    name = property(lambda self: self.names[self._single('name')], doc="Name of the dim of a rank-1 shape.")
    size = property(lambda self: self.sizes[self._single('size')], doc="Size of the dim of a rank-1 shape.")
    type = property(lambda self: self.types[self._single('type')], doc="Type of the dim of a rank-1 shape.")
    item_labels = property(lambda self: self.labels[self._single('item_labels')],
                           doc="Item labels of the dim of a rank-1 shape, or None.")

    # --- lookup ---

    def index(self, name: 'str | Shape') -> int:
        """Position of the dim called `name`; a rank-1 Shape stands for its name."""
        if isinstance(name, Shape):
            name = name.name
        try:
            return self.names.index(name)
        except ValueError:
            raise DimNotFound(f"Dim {name!r} is not part of shape {self}") from None

    def indices(self, names) -> tuple[int, ...]:
        """Positions of the dims selected by the dim filter `names`, in the order given."""
        return tuple(self.index(n) for n in resolve_dims(names, self))

    def get_size(self, name: str, default=_RAISE):
        """Size of dim `name`, or `default` if given and the dim is absent."""
        if default is not _RAISE and name not in self.names:
            return default
        return self.sizes[self.index(name)]

    def get_type(self, name: 'str | Shape') -> str:
        """Type of dim `name`: 'batch', 'dual', 'instance', 'spatial' or 'channel'."""
        return self.types[self.index(name)]

    get_dim_type = get_type

    def get_item_names(self, name: str) -> tuple[str, ...] | None:
        """Item labels of dim `name`, or None."""
        return self.labels[self.index(name)]

    get_labels = get_item_names

    def _select(self, idx: Sequence[int]) -> 'Shape':
        if len(idx) > 1:
            pick = itemgetter(*idx)
            return Shape(pick(self.sizes), pick(self.names), pick(self.types), pick(self.labels))
        if idx:
            i = idx[0]
            return Shape((self.sizes[i],), (self.names[i],), (self.types[i],), (self.labels[i],))
        return EMPTY_SHAPE

    def __getitem__(self, item) -> 'Shape':
        if isinstance(item, int):
            if not -len(self.names) <= item < len(self.names):
                raise IndexError(f"Index {item} is out of range for shape {self} of rank {len(self.names)}")
            return Shape((self.sizes[item],), (self.names[item],), (self.types[item],), (self.labels[item],))
        if isinstance(item, slice):
            return Shape(self.sizes[item], self.names[item], self.types[item], self.labels[item])
        if isinstance(item, (list, tuple)):
            idx = []
            for entry in item:
                if isinstance(entry, int):
                    idx.append(range(len(self.names))[entry])
                else:
                    idx.extend(self.index(n) for n in resolve_dims(entry, self))
            return self._select(idx)
        return self._select([self.index(n) for n in resolve_dims(item, self)])

    def __contains__(self, item) -> bool:
        names = self.names
        if type(item) is str and ',' not in item:
            return item in names
        return all(n in names for n in resolve_dims(item))

    def __iter__(self) -> Iterator['Shape']:
        for i in range(len(self.names)):
            yield Shape((self.sizes[i],), (self.names[i],), (self.types[i],), (self.labels[i],))

    # --- value semantics ---

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, Shape):
            return NotImplemented
        return (self.names == other.names and self.sizes == other.sizes
                and self.types == other.types and self.labels == other.labels)

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = hash((self.names, self.sizes, self.types, self.labels))
            return self._hash

    def __reduce__(self):
        return _unpickled_shape, (self.sizes, self.names, self.types, self.labels)

    def __repr__(self) -> str:
        return '(' + ', '.join(map(_dim_repr, self.names, self.sizes, self.types, self.labels)) + ')'

    def __and__(self, other) -> 'Shape':
        """Merge with another shape; `shape & dual` appends the dual twins of the non-batch, non-dual dims."""
        if isinstance(other, Shape):
            return merge_shapes(self, other)
        if callable(other) and getattr(other, 'dim_type', None) == DUAL:
            return concat_shapes(self, self.primal.as_dual())
        if callable(other):
            raise TypeError(f"Shape & {getattr(other, '__name__', other)!r}: only `dual` can be merged as a "
                            f"function (it adds the dual twins of the dims); merge Shapes or shaped objects")
        return merge_shapes(self, other)

    __rand__ = __and__

    def __add__(self, other) -> 'Shape':
        """`shape + int` adds to every size; `shape + shape` concatenates, keeping both orders."""
        if isinstance(other, int) and not isinstance(other, bool):
            return self._plus(other, '+')
        return concat_shapes(self, other)

    def __sub__(self, other) -> 'Shape':
        """`shape - int` subtracts from every size; `shape - dims` removes dims (any dim filter)."""
        if isinstance(other, int) and not isinstance(other, bool):
            return self._plus(-other, '-')
        return self.without(other)

    def _plus(self, n: int, operator_name: str) -> 'Shape':
        if self.batch:
            raise ValueError(f"Shape {operator_name} int changes sizes, which batch dims do not allow: {self}")
        if not all(isinstance(size, int) for size in self.sizes) or any(size + n < 0 for size in self.sizes):
            raise ValueError(f"Shape {operator_name} {abs(n)} needs known sizes that stay >= 0, but the shape is "
                             f"{self}")
        return Shape(tuple(size + n for size in self.sizes), self.names, self.types, (None,) * len(self.names))

    def __mul__(self, dtype) -> 'ShapeDtype':
        try:
            problem = None if DType.as_dtype(dtype) is not None else 'None is no data type'
        except (TypeError, ValueError) as err:
            problem = str(err)
        if problem:
            raise TypeError(f'Shape * x makes a shape-and-dtype placeholder: x must be a data type such as float, '
                            f"int, a DType or a name like 'float32', got {dtype!r:.100} ({problem})")
        return ShapeDtype(self, dtype)

    __rmul__ = __mul__

    # --- sub-shapes ---

    def only(self, dims, reorder: bool = False) -> 'Shape':
        """Dims of this shape selected by the dim filter `dims`; absent dims are ignored.

        Args:
            dims: any dim filter accepted by `resolve_dims`.
            reorder: order the result as `dims` lists them instead of keeping this shape's order.
        """
        wanted = resolve_dims(dims, self)
        names = self.names
        if reorder:
            idx = [names.index(n) for n in dict.fromkeys(wanted) if n in names]
            return self if idx == list(range(len(names))) else self._select(idx)
        idx = [i for i, n in enumerate(names) if n in wanted]
        return self if len(idx) == len(names) else self._select(idx)

    def without(self, dims) -> 'Shape':
        """This shape minus the dims selected by the dim filter `dims`; absent dims are ignored."""
        unwanted = resolve_dims(dims, self)
        idx = [i for i, n in enumerate(self.names) if n not in unwanted]
        return self if len(idx) == len(self.names) else self._select(idx)

    def isdisjoint(self, dims) -> bool:
        """True if none of the dims selected by `dims` is part of this shape."""
        return not any(n in self.names for n in resolve_dims(dims, self))

    def _of_type(self, dim_type: str) -> 'Shape':
        types = self.types
        if dim_type not in types:
            return EMPTY_SHAPE
        idx = _type_positions(types)[dim_type][0]
        return self if len(idx) == len(types) else self._select(idx)

    def _not_of_type(self, dim_type: str) -> 'Shape':
        types = self.types
        if dim_type not in types:
            return self
        return self._select(_type_positions(types)[dim_type][1])

    batch = property(lambda self: self._of_type(BATCH), doc="The batch dims.")
    dual = property(lambda self: self._of_type(DUAL), doc="The dual dims.")
    instance = property(lambda self: self._of_type(INSTANCE), doc="The instance dims.")
    spatial = property(lambda self: self._of_type(SPATIAL), doc="The spatial dims.")
    channel = property(lambda self: self._of_type(CHANNEL), doc="The channel dims.")
    non_batch = property(lambda self: self._not_of_type(BATCH), doc="All dims except batch dims.")
    non_dual = property(lambda self: self._not_of_type(DUAL), doc="All dims except dual dims.")
    non_instance = property(lambda self: self._not_of_type(INSTANCE), doc="All dims except instance dims.")
    non_spatial = property(lambda self: self._not_of_type(SPATIAL), doc="All dims except spatial dims.")
    non_channel = property(lambda self: self._not_of_type(CHANNEL), doc="All dims except channel dims.")
    primal = property(lambda self: self._select([i for i, t in enumerate(self.types) if t not in (BATCH, DUAL)]),
                      doc="The dims that are neither batch nor dual: instance, spatial and channel dims.")
    non_primal = property(lambda self: self._select([i for i, t in enumerate(self.types) if t in (BATCH, DUAL)]),
                          doc="The batch and dual dims.")
    batch_rank = property(lambda self: self.types.count(BATCH), doc="Number of batch dims.")
    dual_rank = property(lambda self: self.types.count(DUAL), doc="Number of dual dims.")
    instance_rank = property(lambda self: self.types.count(INSTANCE), doc="Number of instance dims.")
    spatial_rank = property(lambda self: self.types.count(SPATIAL), doc="Number of spatial dims.")
    channel_rank = property(lambda self: self.types.count(CHANNEL), doc="Number of channel dims.")
    singleton = property(lambda self: self._select([i for i, s in enumerate(self.sizes) if s == 1]),
                         doc="The dims of size 1.")
    non_singleton = property(lambda self: self._select([i for i, s in enumerate(self.sizes) if s != 1]),
                             doc="The dims whose size is not 1.")
    defined = property(lambda self: self._select([i for i, s in enumerate(self.sizes) if s is not None]),
                       doc="The dims of known size.")
    undefined = property(lambda self: self._select([i for i, s in enumerate(self.sizes) if s is None]),
                         doc="The dims whose size is unknown.")
    well_defined = property(lambda self: None not in self.sizes, doc="True if every size is known.")
    name_list = property(lambda self: list(self.names), doc="The dim names as a list.")
    reversed = property(lambda self: self._select(range(len(self.names) - 1, -1, -1)),
                        doc="This shape with its dims in reverse order.")
    untyped_dict = property(lambda self: {n: lab if lab is not None else s for n, s, lab in
                                          zip(self.names, self.sizes, self.labels, strict=True)},
                            doc="{name: size, or the item labels where the dim has them}.")

    @property
    def dim_type(self) -> str:
        """The type ('batch', 'spatial', ...) of the dims of a shape whose dims share one type."""
        types = set(self.types)
        if len(types) != 1:
            raise ValueError(f"Shape.dim_type needs dims of one type, but {self} has {len(types)} types")
        return types.pop()

    @property
    def non_uniform(self) -> 'Shape':
        """The dims whose size varies along other dims (a `NonUniform` size)."""
        return self._select([i for i, s in enumerate(self.sizes) if isinstance(s, NonUniform)])

    @property
    def is_non_uniform(self) -> bool:
        """True if some size varies along other dims."""
        return not self.is_uniform

    @property
    def non_uniform_shape(self) -> 'Shape':
        """The dims along which some size of this shape varies."""
        along = dict.fromkeys(a for s in self.sizes if isinstance(s, NonUniform) for a in s.along)
        return self.only(tuple(along), reorder=True)

    def unstack(self, dim: str) -> tuple['Shape', ...]:
        """The shape of each slice along `dim` (non-uniform sizes resolved per slice), `dim` removed."""
        size = self.get_size(dim)
        if not isinstance(size, int):
            raise ValueError(f"Shape.unstack({dim!r}) needs a dim of known, uniform size, but {self} has {size}")
        return tuple(self.after_gather({dim: i}) for i in range(size))

    def is_compatible(self, other: 'Shape') -> bool:
        """True if this shape and `other` merge without conflict (sizes, types and labels of shared dims agree)."""
        try:
            merge_shapes(self, other)
            return True
        except IncompatibleShapes:
            return False

    def without_sizes(self) -> 'Shape':
        """This shape with every size unknown and no item labels."""
        return Shape((None,) * len(self.names), self.names, self.types, (None,) * len(self.names))

    def mask(self, names) -> tuple[int, ...]:
        """1 for each dim selected by the dim filter `names`, 0 for the others, in this shape's order."""
        selected = resolve_dims(names, self)
        return tuple(int(n in selected) for n in self.names)

    def flipped(self, dims) -> 'Shape':
        """The shape of a value flipped along `dims`: the item labels of those dims in reverse order."""
        selected = resolve_dims(dims, self)
        labels = tuple(lab[::-1] if lab is not None and n in selected else lab
                       for n, lab in zip(self.names, self.labels, strict=True))
        return Shape(self.sizes, self.names, self.types, labels)

    def first_index(self, names: bool = False) -> dict:
        """The index {dim: 0} of the first element (with `names`, the first item label where a dim has labels)."""
        return {n: lab[0] if names and lab else 0 for n, lab in zip(self.names, self.labels, strict=True)}

    def meshgrid(self, names: bool = False):
        """Iterate over the index {dim: position} of every element, the last dim fastest.

        Args:
            names: give item labels instead of positions for dims that have labels.
        """
        for size in self.sizes:
            if not isinstance(size, int):
                raise ValueError(f"Shape.meshgrid() needs known, uniform sizes, but the shape is {self}")
        for index in itertools.product(*[range(s) for s in self.sizes]):
            yield {n: lab[i] if names and lab is not None else i
                   for n, lab, i in zip(self.names, self.labels, index, strict=True)}


    # --- modified copies ---

    def with_size(self, size) -> 'Shape':
        """Copy of a rank-1 shape with a new size; str or tuple-of-str sizes become item labels."""
        i = self._single('with_size')
        size, labels = parse_size(size, self.names[i])
        return Shape((size,), self.names, self.types, (labels,))

    def with_sizes(self, sizes) -> 'Shape':
        """Copy with new sizes.

        Args:
            sizes: one size per dim (each as in `with_size`), a single int or None for all dims,
                or a Shape whose sizes and labels replace those of the dims sharing its names.
        """
        names = self.names
        if isinstance(sizes, Shape):
            new_sizes, new_labels = list(self.sizes), list(self.labels)
            for j, name in enumerate(sizes.names):
                if name in names:
                    i = names.index(name)
                    new_sizes[i], new_labels[i] = sizes.sizes[j], sizes.labels[j]
            return Shape(tuple(new_sizes), names, self.types, tuple(new_labels))
        if not isinstance(sizes, (tuple, list)):
            size, _ = parse_size(sizes, ','.join(names))
            return Shape((size,) * len(names), names, self.types, (None,) * len(names))
        if len(sizes) != len(names):
            raise ValueError(f"with_sizes needs one size per dim of {self} but got {len(sizes)}: {sizes!r}")
        parsed = [parse_size(s, n) for s, n in zip(sizes, names, strict=True)]
        return Shape(tuple(p[0] for p in parsed), names, self.types, tuple(p[1] for p in parsed))

    def with_dim_size(self, dim: 'str | Shape', size, keep_labels: bool = False) -> 'Shape':
        """Copy in which dim `dim` has the new `size` (parsed as in `with_size`).

        Args:
            keep_labels: keep the dim's current labels when `size` is an int; they must fit the new size.
        """
        i = self.index(dim)
        name = self.names[i]
        new_size, new_labels = parse_size(size, name)
        if keep_labels and new_labels is None and self.labels[i] is not None:
            new_labels = self.labels[i]
            if len(new_labels) != new_size:
                raise ValueError(f"Cannot keep the {len(new_labels)} labels of dim {name!r} "
                                 f"when resizing it to {new_size!r}")
        return Shape((*self.sizes[:i], new_size, *self.sizes[i + 1:]), self.names, self.types,
                     (*self.labels[:i], new_labels, *self.labels[i + 1:]))

    def replace(self, dims, new) -> 'Shape':
        """Copy in which the dims selected by `dims` are renamed or retyped, keeping their position.

        Args:
            dims: dim filter selecting dims of this shape; each must be present.
            new: new names as str 'a,b' or a sequence of str (types kept), or a Shape whose names and
                types replace the old ones and whose sizes and labels do too where they are set.
                A single dim may be replaced by a Shape of several dims, which are spliced in.
        """
        idx = [self.index(n) for n in resolve_dims(dims, self)]
        sizes, names, types, labels = list(self.sizes), list(self.names), list(self.types), list(self.labels)
        if isinstance(new, Shape):
            if len(idx) == 1 and len(new) > 1:
                i = idx[0]
                sizes[i:i + 1], names[i:i + 1] = new.sizes, new.names
                types[i:i + 1], labels[i:i + 1] = new.types, new.labels
                return _unique_or_raise(Shape(tuple(sizes), tuple(names), tuple(types), tuple(labels)), 'Shape.replace')
            _check_same_count(idx, new.names, self)
            for j, i in enumerate(idx):
                names[i], types[i] = new.names[j], new.types[j]
                if new.sizes[j] is not None:
                    if new.labels[j] is not None or new.sizes[j] != sizes[i]:
                        labels[i] = new.labels[j]
                    sizes[i] = new.sizes[j]
        else:
            if isinstance(new, (tuple, list)) and all(isinstance(n, str) for n in new):
                new_names = tuple(new)
            elif isinstance(new, str):
                new_names = resolve_dims(new)
            else:
                raise TypeError(f"New dim names must be a str 'a,b', a sequence of str or a Shape, but got {new!r}")
            _check_same_count(idx, new_names, self)
            for i, name in zip(idx, new_names, strict=True):
                names[i] = checked_name(name, types[i])
        return _unique_or_raise(Shape(tuple(sizes), tuple(names), tuple(types), tuple(labels)), 'Shape.replace')

    def rename(self, dims, new_names) -> 'Shape':
        """Copy in which the dims selected by `dims` get `new_names` (str 'a,b', sequence of str or Shape)."""
        return self.replace(dims, new_names.names if isinstance(new_names, Shape) else new_names)

    def as_type(self, dim_type) -> 'Shape':
        """Copy with every dim converted to `dim_type` (a type constant or a constructor such as `spatial`).

        Converting to dual prefixes names with '~'; converting away from dual strips it.
        """
        dim_type = _dim_type_arg(dim_type)
        if all(t == dim_type for t in self.types):
            return self
        names = tuple(_name_for_type(n, dim_type) for n in self.names)
        converted = Shape(self.sizes, names, (dim_type,) * len(names), self.labels)
        return _unique_or_raise(converted, f'Converting to {dim_type}')

    as_batch = partialmethod(as_type, BATCH)
    as_dual = partialmethod(as_type, DUAL)
    as_instance = partialmethod(as_type, INSTANCE)
    as_spatial = partialmethod(as_type, SPATIAL)
    as_channel = partialmethod(as_type, CHANNEL)


def _type_positions(types: tuple[str, ...]) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    try:
        return _TYPE_POSITIONS[types]
    except KeyError:
        positions = {t: (tuple(i for i, u in enumerate(types) if u == t),
                         tuple(i for i, u in enumerate(types) if u != t)) for t in set(types)}
        return _cache(_TYPE_POSITIONS, types, positions)


def _dim_repr(name, size, dim_type, labels) -> str:
    head = f"{name}{_SUPERSCRIPTS.get(dim_type, f'[{dim_type}]')}"
    if labels is not None:
        return f"{head}={','.join(map(str, labels))}"
    return head if size is None else f"{head}={size}"


def _check_same_count(idx: list, new_names: Sequence, shape: Shape) -> None:
    if len(idx) != len(new_names):
        old = tuple(shape.names[i] for i in idx)
        raise ValueError(f"Cannot replace dims {old} of {shape} by {tuple(new_names)}: the counts differ")


def _unique_or_raise(shape: Shape, operation: str) -> Shape:
    if len(set(shape.names)) != len(shape.names):
        dup = next(n for n in shape.names if shape.names.count(n) > 1)
        raise IncompatibleShapes(f"{operation} would give {shape}, in which dim {dup!r} appears more than once")
    return shape


def _name_for_type(name: str, dim_type: str) -> str:
    if dim_type == DUAL:
        return name if name.startswith('~') else '~' + name
    return name[1:] if name.startswith('~') else name


def checked_name(name: str, dim_type: str) -> str:
    """Validate a user-given dim name; dual names get their '~' prefix."""
    if dim_type != DUAL and name.isidentifier():
        return name
    name = name.strip()
    core = name
    if dim_type == DUAL:
        core = name[1:] if name.startswith('~') else name
        name = '~' + core
    if not core.isidentifier():
        prefix = " (optionally prefixed by '~')" if dim_type == DUAL else ''
        hint = "; only dual dims may start with '~'" if name.startswith('~') and dim_type != DUAL else ''
        raise ValueError(f"Invalid dim name {name!r}: names must be Python identifiers{prefix}{hint}")
    return name


@dataclass(frozen=True)
class ShapeDtype:
    """Placeholder for a value of known shape and dtype, written `spatial(x=8) * complex`."""
    shape: Shape
    dtype: object

    def __repr__(self) -> str:
        return f"{self.shape} * {getattr(self.dtype, '__name__', self.dtype)}"


EMPTY_SHAPE = Shape((), (), (), ())


def _unpickled_shape(sizes: tuple, names: tuple, types: tuple, labels: tuple) -> Shape:
    """A shape as unpickled: equal shapes of int sizes share one object (`_shared_shape`)."""
    if all(type(size) is int for size in sizes):
        return _shared_shape(sizes, names, types, labels)
    return Shape(sizes, names, types, labels)  # non-uniform sizes (tensors) neither hash nor compare as keys


@lru_cache(maxsize=1024)
def _shared_shape(sizes: tuple, names: tuple, types: tuple, labels: tuple) -> Shape:
    """One object per shape unpickled here (shapes are immutable): a cluster's client fetching 10^4 blocks' outputs
    of one shape unpickled 320 bytes of shape per block (a third of what each block's output took)."""
    return Shape(sizes, names, types, labels)

# --- merging ---


def merge_shapes(*objs, allow_varying_sizes: bool = False, allow_varying_labels: bool = False) -> Shape:
    """Union of the dims of all `objs` (Shapes or objects `shape_of` accepts).

    Dims are ordered by type (batch, dual, instance, spatial, channel), and within a type by
    first appearance. A size None merges with any size, and no labels with any labels. If one
    argument already holds the merged result, it is returned as it is, in its own dim order.

    Args:
        allow_varying_sizes: if True, a dim whose sizes differ gets size None (unknown) and no
            labels instead of raising.
        allow_varying_labels: if True, a dim whose labels differ (at equal size) gets no labels
            instead of raising. Conflicting types always raise.

    Raises:
        IncompatibleShapes: a shared dim differs in size, type or labels.
    """
    if len(objs) == 2:
        a, b = objs
        if type(a) is not Shape:
            a = shape_of(a)
        if type(b) is not Shape:
            b = shape_of(b)
        if a is b or not b.names:
            return a
        if not a.names:
            return b
        if a == b:
            return a
        if set(a.names).isdisjoint(b.names):
            return _canonical(a.sizes + b.sizes, a.names + b.names, a.types + b.types, a.labels + b.labels)
        if _holds(a, b):
            return a
        if _holds(b, a):
            return b
        return _merge((a, b), allow_varying_sizes, allow_varying_labels)
    shapes = [s for s in map(shape_of, objs) if s.names]
    for candidate in shapes:
        if all(s is candidate or _holds(candidate, s) for s in shapes):
            return candidate
    return _merge(shapes, allow_varying_sizes, allow_varying_labels) if shapes else EMPTY_SHAPE


def _holds(a: Shape, b: Shape) -> bool:
    """True if merging `b` into `a` gives `a`: every dim of `b` is in `a` and agrees, where set, with it."""
    names = a.names
    for i, n in enumerate(b.names):
        if n not in names:
            return False
        j = names.index(n)
        s, lab = b.sizes[i], b.labels[i]
        if a.types[j] != b.types[i] or (s is not None and a.sizes[j] != s) or (lab is not None and a.labels[j] != lab):
            return False
    return True


def _merge(shapes: Sequence[Shape], allow_varying_sizes: bool, allow_varying_labels: bool = False) -> Shape:
    first = shapes[0]
    sizes, names, types, labels = list(first.sizes), list(first.names), list(first.types), list(first.labels)
    varying: set[str] = set()  # dims whose sizes differed; they stay None
    unlabelled: set[str] = set()  # dims whose labels differed (allowed): they stay without labels
    for k in range(1, len(shapes)):
        shape = shapes[k]
        for i, n in enumerate(shape.names):
            if n not in names:
                names.append(n)
                sizes.append(shape.sizes[i])
                types.append(shape.types[i])
                labels.append(shape.labels[i])
                continue
            j, s, t, lab = names.index(n), shape.sizes[i], shape.types[i], shape.labels[i]
            if types[j] != t:
                raise _merge_conflict(shapes, k, n, sizes[j], labels[j], f"is {types[j]} in one and {t} in the other")
            if s is None or n in varying or (sizes[j] == s and labels[j] == lab):
                continue
            if sizes[j] is None:
                sizes[j], labels[j] = s, lab
            elif sizes[j] != s:
                if not allow_varying_sizes:
                    raise _merge_conflict(shapes, k, n, sizes[j], labels[j],
                                          f"has size {sizes[j]} in one and {s} in the other")
                sizes[j] = labels[j] = None
                varying.add(n)
            elif lab is not None and n not in unlabelled:
                if labels[j] is not None:
                    if not allow_varying_labels:
                        raise _merge_conflict(shapes, k, n, sizes[j], labels[j],
                                              f"has labels {labels[j]} in one and {lab} in the other")
                    labels[j] = None
                    unlabelled.add(n)
                else:
                    labels[j] = lab
    return _canonical(sizes, names, tuple(types), labels)


def _canonical(sizes: Sequence, names: Sequence, types: tuple[str, ...], labels: Sequence) -> Shape:
    """Shape of these dims, stably sorted into canonical type order."""
    try:
        pick = _CANONICAL_ORDERS[types]
    except KeyError:
        keys = [_TYPE_ORDER.get(t, len(DIM_TYPES)) for t in types]
        # an unsorted sequence has at least two dims, so the getter returns tuples
        pick = itemgetter(*sorted(range(len(keys)), key=keys.__getitem__)) if keys != sorted(keys) else None
        _cache(_CANONICAL_ORDERS, types, pick)
    if pick is None:
        return Shape(tuple(sizes), tuple(names), types, tuple(labels))
    return Shape(pick(sizes), pick(names), pick(types), pick(labels))


def _cache(cache: dict, key, value):
    """Store `value` in one of the module's memo dicts, emptying it first once it is full; return `value`."""
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def _merge_conflict(shapes: Sequence[Shape], k: int, name: str, size, labels, what: str) -> IncompatibleShapes:
    """Error naming shape `k` and an earlier shape whose dim `name` has the merged `size` and `labels`."""
    having = [s for s in shapes[:k] if name in s.names]
    earlier = next((s for s in having if s.get_size(name) == size and s.get_labels(name) == labels), having[0])
    return IncompatibleShapes(f"Cannot merge {earlier} and {shapes[k]}: dim {name!r} {what}")


def concat_shapes(*shapes) -> Shape:
    """Dims of all `shapes` (or shaped objects) in the order given.

    Raises:
        IncompatibleShapes: a dim name occurs more than once.
    """
    shapes = [s for s in map(shape_of, shapes) if s.names]
    if len(shapes) == 1:
        return shapes[0]
    result = Shape(sum((s.sizes for s in shapes), ()), sum((s.names for s in shapes), ()),
                   sum((s.types for s in shapes), ()), sum((s.labels for s in shapes), ()))
    return _unique_or_raise(result, f"Concatenating {', '.join(map(repr, shapes))}")


def _dim_type_arg(dim_type) -> str:
    """A dim type from a type name ('batch', ...) or a dim constructor (`batch`, ..., which carry `dim_type`)."""
    if dim_type in _TYPE_ORDER:
        return dim_type
    constructed = getattr(dim_type, 'dim_type', None)
    if constructed in _TYPE_ORDER:
        return constructed
    raise ValueError(f"Invalid dim type {dim_type!r}: expected one of {DIM_TYPES} or one of the functions "
                     f"batch, dual, instance, spatial, channel")


# --- dim filters ---

# What the `dim`/`dims` parameters of the operations accept: names as 'x,y', a Shape, a sequence or set of
# those, a function selecting from a Shape (`spatial`, `non_batch`), or None for no dims; see `resolve_dims`.
DimFilter = str | Sequence | set | Shape | Callable | None


def resolve_dims(dims, shape: Shape | None = None) -> tuple[str, ...]:
    """Names selected by a dim filter.

    Args:
        dims: None (no dims), a str 'x,y', a Shape, a sequence of those (flattened), a set of those (in
            the order of `shape`, others by name), or a function such as `spatial` that maps a Shape to the
            Shape of the dims it selects.
        shape: the shape a function filter acts on.

    Raises:
        TypeError: `dims` has none of these forms, or is a function and `shape` is None.
    """
    if type(dims) is str or type(dims) is tuple:
        try:
            return _RESOLVED[dims]
        except KeyError:
            pass
        except TypeError:  # a tuple holding something unhashable
            return _resolve_sequence(dims, shape)
        if type(dims) is str:
            names = tuple(n for n in map(str.strip, dims.split(',')) if n)
        else:
            names = _resolve_sequence(dims, shape)
            if not all(type(d) is str for d in dims):
                return names
        return _cache(_RESOLVED, dims, names)
    if dims is None:
        return ()
    if isinstance(dims, Shape):
        return dims.names
    if isinstance(dims, (str, tuple, list)):
        return resolve_dims(str(dims) if isinstance(dims, str) else tuple(dims), shape)
    if isinstance(dims, (set, frozenset)):  # no order of its own: the shape's, then by name
        names = set(_resolve_sequence(dims, shape))
        in_shape = tuple(n for n in shape.names if n in names) if shape is not None else ()
        return in_shape + tuple(sorted(names.difference(in_shape)))
    if callable(dims):
        if shape is None:
            raise TypeError(f"The dim filter {getattr(dims, '__name__', dims)!r} is a function, "
                            f"which needs a shape to act on, but none was given")
        selected = dims(shape)
        if not isinstance(selected, Shape):
            raise TypeError(f"The dim filter {getattr(dims, '__name__', dims)!r} returned "
                            f"{type(selected).__name__} instead of a Shape")
        return selected.names
    raise TypeError(f"Invalid dim filter {dims!r} of type {type(dims).__name__}: expected {_FILTER_FORMS}")


def _resolve_sequence(dims, shape: Shape | None) -> tuple[str, ...]:
    names = []
    for entry in dims:
        names.extend(resolve_dims(entry, shape))
    return tuple(names)


# --- shape_of ---


def shape_of(obj) -> Shape:
    """Shape of a Shape, of an object with a Shape-valued `.shape` (such as a Tensor), or of a Python number.

    Trees (tuples, lists, dicts, dataclasses) are measured by `lazyphi.math.shape`, which builds on this.

    Raises:
        TypeError: `obj` is none of these.
    """
    if isinstance(obj, Shape):
        return obj
    shape = getattr(obj, 'shape', None)
    if isinstance(shape, Shape):
        return shape
    if isinstance(obj, (int, float, complex)):
        return EMPTY_SHAPE
    raise TypeError(f"Cannot determine the Shape of a {type(obj).__module__}.{type(obj).__qualname__}: "
                    f"expected a Shape, an object with a Shape-valued .shape, or a Python number")
