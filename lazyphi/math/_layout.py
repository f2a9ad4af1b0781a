"""`Layout`: a tensor kind holding a tree of Python objects (strings, None, any object, numbers, tensors).

The outer levels of nested lists, tuples, dicts and strings are the layout's dims (`layout(tree, dims)`);
what lies below them are its *leaves*. A dict level labels its dim with its keys. Sizes may differ from
one branch to the next (non-uniform). Selecting, renaming, stacking and expanding act on the tree itself,
so `native()` gives back a tree. Element-wise operations apply to the leaves one by one: numbers and
tensors through the operation itself, other objects through the Python operator (`==` on strings); an
operation that has no meaning for a leaf (`sin` of a str) raises a TypeError naming it. Reductions work on
numeric leaves and, for `any`/`all`, on any leaves (by their truth). Every other operation sees the leaves
in one array: numbers as a numeric array, tensors stacked, other objects as a NumPy object array of the
`OBJECTS` backend.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from numbers import Number

import numpy as np

from .._errors import IncompatibleShapes
from ..backend import NUMPY, OBJECTS, Backend, DType, combine_types, get_precision
from ._dims import parse_dim_spec
from ._format import BROADCAST_FORMATTER
from ._shape import EMPTY_SHAPE, Shape, concat_shapes, merge_shapes, resolve_dims
from ._sizes import size_from_nested
from ._tensor import (
    ABS,
    ADD,
    AND,
    DIV,
    ELEMENTWISE,
    EQUAL,
    EXPAND,
    FLOORDIV,
    GATHER,
    GREATER,
    GREATER_EQUAL,
    INVERT,
    MOD,
    MUL,
    NEGATIVE,
    NOT_EQUAL,
    OR,
    POW,
    REDUCE,
    RENAME,
    RENAME_OP,
    SHIFT_LEFT,
    SHIFT_RIGHT,
    STACK,
    SUB,
    XOR,
    Dense,
    Op,
    Tensor,
    aligned_native,
    auto_cast,
    common_backend,
    dispatch,
    read_only_native,
    scalar,
)

CONTAINERS = (list, tuple, dict, str)
_NUMBERS = (Number, np.number, np.bool_)

# element-wise operations on leaves that are neither numbers nor tensors: the Python operator
_PY_OPERATORS: dict[Op, Callable] = {
    ADD: operator.add, SUB: operator.sub, MUL: operator.mul, DIV: operator.truediv, FLOORDIV: operator.floordiv,
    MOD: operator.mod, POW: operator.pow, EQUAL: operator.eq, NOT_EQUAL: operator.ne, GREATER: operator.gt,
    GREATER_EQUAL: operator.ge, AND: operator.and_, OR: operator.or_, XOR: operator.xor,
    SHIFT_LEFT: operator.lshift, SHIFT_RIGHT: operator.rshift, NEGATIVE: operator.neg, ABS: operator.abs,
    INVERT: operator.invert,
}


# --- the tree ------------------------------------------------------------------------------

def children(node) -> list:
    """The entries of a container level: list and tuple items, dict values, the characters of a str."""
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, CONTAINERS):
        return list(node)
    raise ValueError(f'A layout level must be a list, tuple, dict or str, but found {type(node).__name__} '
                     f'{node!r}; give the layout fewer dims')


def _rebuilt(node, parts: list):
    """A container like `node` (same type; a dict keeps its keys) holding `parts`."""
    if isinstance(node, dict):
        return dict(zip(node.keys(), parts, strict=True))
    if isinstance(node, tuple):
        return tuple(parts)
    if isinstance(node, str) and all(isinstance(p, str) for p in parts):
        return ''.join(parts)
    return list(parts)


def _nodes(node, depth: int) -> Iterator:
    """The nodes `depth` levels below `node`, in order."""
    if depth == 0:
        yield node
    else:
        for child in children(node):
            yield from _nodes(child, depth - 1)


def _nested_sizes(node, depth: int):
    """The number of entries of each node `depth` levels below `node`, nested along the levels above."""
    if depth == 0:
        return len(children(node))
    return tuple(_nested_sizes(child, depth - 1) for child in children(node))


def _map_leaves(fn: Callable, node, depth: int):
    if depth == 0:
        return fn(node)
    return _rebuilt(node, [_map_leaves(fn, child, depth - 1) for child in children(node)])


def tree_dims(obj, dims: Shape) -> Shape:
    """`dims` with the sizes (ints or non-uniform) found in the tree `obj`, and labels.

    Given labels are kept (their number is checked); a dict level without given labels is labelled by its
    keys when every node at that level is a dict with the same keys.
    """
    sizes, labels = [], []
    for k, (name, given_size, given_labels) in enumerate(zip(dims.names, dims.sizes, dims.labels, strict=True)):
        found = size_from_nested(_nested_sizes(obj, k), dims.names[:k])
        if given_labels is not None:
            if found != len(given_labels):
                raise IncompatibleShapes(f'layout(): dim {name!r} has {len(given_labels)} labels {given_labels} but '
                                         f'the tree has {found} entries at that level')
        elif isinstance(given_size, int) and given_size != found:
            raise IncompatibleShapes(f'layout(): dim {name!r} has size {given_size} but the tree has {found} '
                                     f'entries at that level')
        else:
            keys = {tuple(n) if isinstance(n, dict) else None for n in _nodes(obj, k)}
            given_labels = keys.pop() if len(keys) == 1 and None not in keys else None
            if given_labels is not None and not all(isinstance(key, str) for key in given_labels):
                given_labels = None
        sizes.append(found)
        labels.append(given_labels)
    return Shape(tuple(sizes), dims.names, dims.types, tuple(labels))


def _select(node, selections: Sequence):
    """The tree `node` with `selections` (one per level: None, int, slice or tuple of ints) applied."""
    if not selections or all(s is None for s in selections):
        return node
    sel, rest = selections[0], selections[1:]
    if isinstance(sel, int):
        return _select(children(node)[sel], rest)
    if sel is None:
        picked = [_select(child, rest) for child in children(node)]
        return tuple(picked) if isinstance(node, (dict, tuple)) else _rebuilt(node, picked)
    if isinstance(sel, slice):
        picked = node[sel] if isinstance(node, (list, tuple, str)) else tuple(children(node)[sel])
    else:
        picked = [children(node)[i] for i in sel]
    if any(s is not None for s in rest):
        return _rebuilt(picked, [_select(child, rest) for child in children(picked)])
    return picked


# --- the kind ------------------------------------------------------------------------------

def _leaf_dtype(leaf) -> DType:
    if isinstance(leaf, Tensor):
        return leaf.dtype
    if isinstance(leaf, (bool, np.bool_)):
        return DType(bool)
    if isinstance(leaf, np.number):
        return DType.as_dtype(leaf.dtype)
    if isinstance(leaf, int):
        return DType(int, 64)
    if isinstance(leaf, float):
        return DType(float, 64)
    if isinstance(leaf, complex):
        return DType(complex, 128)
    return DType(str) if isinstance(leaf, str) else DType(object)


class Layout(Tensor):
    """A tensor whose values are the leaves of a tree of Python objects; see the module docstring.

    Made by `layout(tree, dims)`, or by `wrap()` for strings, None and lists of non-numbers.
    """

    __slots__ = ('_obj', '_shape', '_stack')
    _kind_priority = 30

    def __init__(self, obj, stack: Shape = EMPTY_SHAPE):
        self._obj = obj
        self._stack = tree_dims(obj, stack)
        inner = [leaf.shape for leaf in self._leaves() if isinstance(leaf, Tensor)]
        inner = merge_shapes(*inner).without(self._stack.names) if inner else EMPTY_SHAPE
        self._shape = concat_shapes(self._stack, inner)

    def _leaves(self) -> Iterator:
        return _nodes(self._obj, self._stack.rank)

    # --- the kind protocol ---
    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> DType:
        dtypes = {_leaf_dtype(leaf) for leaf in self._leaves()}
        if len(dtypes) == 1:
            return dtypes.pop()
        if dtypes and all(d.kind in (bool, int, float, complex) for d in dtypes):
            return combine_types(*dtypes)
        return DType(object)

    @property
    def backend(self) -> Backend:
        return OBJECTS

    @property
    def default_backend(self) -> None:
        return None

    @property
    def device(self) -> None:
        return None

    @property
    def available(self) -> bool:
        return all(leaf.available for leaf in self._leaves() if isinstance(leaf, Tensor))

    def _dense(self) -> Dense:
        """The leaves in one array: numeric for numbers, stacked for tensors, else an object array."""
        if not self._shape.is_uniform:
            raise IncompatibleShapes(f'A layout of non-uniform shape {self._shape} cannot be held in one array; '
                                     f'select along the dims its sizes vary with first')
        leaves = list(self._leaves())
        sizes = self._stack.sizes
        if any(isinstance(leaf, Tensor) for leaf in leaves):
            return self._stacked_leaves(leaves)
        if leaves and all(isinstance(leaf, _NUMBERS) for leaf in leaves):
            array = np.asarray(leaves)
            if array.dtype.kind in 'fc':
                bits = get_precision() * (1 if array.dtype.kind == 'f' else 2)
                array = array.astype(f'{array.dtype.kind}{bits // 8}')
            return Dense(read_only_native(array.reshape(sizes)), self._shape, NUMPY)
        array = np.empty(len(leaves), object)
        for i, leaf in enumerate(leaves):
            array[i] = leaf
        return Dense(read_only_native(array.reshape(sizes)), self._shape, OBJECTS)

    def _stacked_leaves(self, leaves: list) -> Dense:
        if not all(isinstance(leaf, (Tensor, *_NUMBERS)) for leaf in leaves):
            kinds = sorted({type(leaf).__name__ for leaf in leaves if not isinstance(leaf, (Tensor, *_NUMBERS))})
            raise TypeError(f'A layout mixing tensors with {", ".join(kinds)} leaves cannot be held in one array')
        inner = self._shape.without(self._stack.names)
        dense = [(leaf if isinstance(leaf, Tensor) else scalar(leaf))._dense() for leaf in leaves]
        backend = common_backend(dense)
        natives = auto_cast(backend, [backend.broadcast_to(aligned_native(d, inner, backend), inner.sizes)
                                      for d in dense])
        native = backend.reshape(backend.stack(natives, 0), self._stack.sizes + inner.sizes)
        return Dense(native, self._shape, backend)

    def _expand(self, shape: Shape) -> Layout:
        """The layout repeated along the dims of `shape` it lacks, which become its outermost levels."""
        new = shape.without(self._shape.names)
        obj = self._obj
        for size in reversed(new.sizes):
            if not isinstance(size, int):
                raise ValueError(f'A layout can only be expanded by dims of int size, got {new}')
            obj = [obj] * size
        return Layout(obj, concat_shapes(new, self._stack))

    def __reduce__(self):
        return Layout, (self._obj, self._stack)

    # --- access ---
    def native(self, order=None, force_expand: bool = True):
        """The tree; with `order` listing the layout's dims in another order, nested lists in that order."""
        if order is None:
            return self._obj
        names = resolve_dims(order, self._shape)
        if names == self._stack.names:
            return self._obj
        if set(names) != set(self._shape.names):
            raise ValueError(f'Layout.native(): order {names} must list the dims {self._shape.names}')
        return self._dense()._native_in(names).tolist()

    def numpy(self, order=None, force_expand: bool = True):
        return self._dense().numpy(order)

    def item(self):
        return self._single_value('item()')

    def _single_value(self, what: str):
        leaves = list(self._leaves())
        if len(leaves) != 1 or self._shape.volume != 1:
            raise ValueError(f'{what} needs a layout holding one value, but its shape is {self._shape}')
        leaf = leaves[0]
        return leaf._single_value(what) if isinstance(leaf, Tensor) else leaf

    def __iter__(self):
        """Rank 0: the object itself; rank 1: the entries; more dims: all leaves in order."""
        if self._stack.rank == 0:
            return iter([self._obj])
        if self._stack.rank == 1:
            return iter(children(self._obj))
        return self._leaves()

    def __len__(self) -> int:
        if self._stack.rank != 1:
            raise TypeError(f'len() needs a layout with exactly one dim, got {self._shape}')
        return len(children(self._obj))

    def __repr__(self) -> str:
        return repr(self._obj)

    def __format__(self, format_spec: str) -> str:
        formatter = BROADCAST_FORMATTER.get()
        if formatter is not None:
            return formatter.register(self, format_spec)
        return format(self._obj, format_spec) if self._stack.rank == 0 else repr(self._obj)

    # --- operations ---
    @classmethod
    def __handle__(cls, op: Op, tensors: Sequence[Tensor], params: tuple):
        category = op.category
        if category == ELEMENTWISE:
            return _leafwise(op, tensors, params)
        if category == STACK:
            return _stack(tensors, params[0])
        self = tensors[0]
        if type(self) is not Layout:
            return NotImplemented
        if category == GATHER:
            return self._gather(params[0])
        if category == RENAME:
            return self._rename(*params)
        if category == EXPAND:
            return self._expand(params[0])
        if category == REDUCE:
            return self._reduce(op, params)
        return NotImplemented

    def _gather(self, selection: dict) -> Tensor:
        stack_names = self._stack.names
        on_stack = {d: s for d, s in selection.items() if d in stack_names}
        on_leaves = {d: s for d, s in selection.items() if d not in stack_names}
        obj = _select(self._obj, [on_stack.get(n) for n in stack_names])
        stack = self._stack.after_gather(on_stack)
        if on_leaves:
            obj = _map_leaves(lambda leaf: leaf[on_leaves] if isinstance(leaf, Tensor) else leaf, obj, stack.rank)
        if stack.rank == 0 and isinstance(obj, Tensor):
            return obj
        return Layout(obj, stack)

    def _rename(self, old: tuple, new: Shape) -> Layout:
        stack_names = self._stack.names
        in_stack = [i for i, n in enumerate(old) if n in stack_names]
        stack = self._stack.replace(tuple(old[i] for i in in_stack), new[[new.names[i] for i in in_stack]]) \
            if in_stack else self._stack
        others = [i for i, n in enumerate(old) if n not in stack_names]
        obj = self._obj
        if others:
            def rename_leaf(leaf):
                if not isinstance(leaf, Tensor):
                    return leaf
                present = [i for i in others if old[i] in leaf.shape.names]
                if not present:
                    return leaf
                renamed = tuple(old[i] for i in present), new[[new.names[i] for i in present]]
                return dispatch(RENAME_OP, (leaf,), renamed)
            obj = _map_leaves(rename_leaf, obj, self._stack.rank)
        return Layout(obj, stack)

    def _reduce(self, op: Op, params: tuple) -> Tensor:
        leaves = list(self._leaves())
        if op.name in ('any', 'all') and not any(isinstance(leaf, Tensor) for leaf in leaves):
            truth = np.array([bool(leaf) for leaf in leaves], dtype=bool).reshape(self._stack.sizes)
            return dispatch(op, (Dense(truth, self._shape, NUMPY),), params)
        dense = self._dense()
        if dense.backend is OBJECTS:
            raise TypeError(f'{op.name}() needs numbers, but the layout holds {self.dtype} values')
        return dispatch(op, (dense,), params)


def _leafwise(op: Op, tensors: Sequence[Tensor], params: tuple) -> Tensor:
    """`op` applied leaf by leaf: along the dims of the first layout, the other operands are sliced likewise."""
    lead = next(t for t in tensors if type(t) is Layout)
    names = lead._stack.names

    def walk(operands: list, node, level: int):
        if level == len(names):
            return _leaf_result(op, [_leaf_of(o) for o in operands], params)
        dim = names[level]
        parts = []
        for i, child in enumerate(children(node)):
            parts.append(walk([_child(o, dim, i) for o in operands], child, level + 1))
        return _rebuilt(node, parts)

    operands = [(t._obj, t._stack) if type(t) is Layout else t for t in tensors]
    return Layout(walk(operands, lead._obj, 0), lead._stack)


def _child(operand, dim: str, i: int):
    """Entry `i` along `dim` of an operand: a layout's tree (with its remaining dims) or a tensor."""
    if isinstance(operand, tuple):
        obj, stack = operand
        if stack.names and stack.names[0] == dim:
            return children(obj)[i], stack[1:]
        if dim not in stack.names:
            return operand
        operand = Layout(obj, stack)  # its levels run in another order: select like a tensor
    if isinstance(operand, Tensor) and dim in operand.shape.names:
        operand = operand[{dim: i}]
        return (operand._obj, operand._stack) if type(operand) is Layout else operand
    return operand


def _leaf_of(operand):
    if isinstance(operand, tuple):
        obj, stack = operand
        if stack:
            raise IncompatibleShapes(f'Element-wise operations need layouts whose dims line up; a layout keeps the '
                                     f'dims {stack.names} that the first layout lacks')
        return obj
    if type(operand) is Layout and operand._stack.rank == 0:
        return operand._obj
    return operand


def _leaf_result(op: Op, leaves: list, params: tuple):
    """`op` on one set of leaves: numbers and tensors through the operation, other objects by Python operator."""
    if all(isinstance(leaf, (Tensor, *_NUMBERS)) for leaf in leaves):
        result = dispatch(op, [leaf if isinstance(leaf, Tensor) else scalar(leaf) for leaf in leaves], params)
        if any(isinstance(leaf, Tensor) for leaf in leaves):
            return result
        return result.backend.numpy(result.native()).item()  # numbers in, a Python number out
    python_operator = _PY_OPERATORS.get(op)
    leaves = [leaf.item() if isinstance(leaf, Tensor) and leaf.shape.volume == 1 else leaf
              for leaf in leaves]  # a number next to an object: the Python operator decides
    kinds = ', '.join(type(leaf).__name__ for leaf in leaves)
    if python_operator is None or params or any(isinstance(leaf, Tensor) for leaf in leaves):
        raise TypeError(f'{op.name} is not defined for layout values of type {kinds}; it needs numbers or tensors')
    try:
        return python_operator(*leaves)
    except TypeError as err:
        raise TypeError(f'{op.name} is not defined for layout values of type {kinds}: {err}') from err


def _stack(values: Sequence[Tensor], dim: Shape) -> Layout:
    """Layouts (and other tensors, as trees of their values) stacked along `dim` as a new outermost level."""
    inner = next(v._stack for v in values if type(v) is Layout)
    objs = []
    for v in values:
        if type(v) is Layout:
            if v._stack.names != inner.names:
                raise IncompatibleShapes(f'Cannot stack layouts of dims {inner.names} and {v._stack.names}')
            objs.append(v._obj)
        elif v.shape.rank == 0 and not inner:
            objs.append(v)
        elif set(v.shape.names) <= set(inner.names):
            objs.append(v.numpy(inner.only(v.shape.names).names).tolist() if v.shape.rank else v.item())
        else:
            raise IncompatibleShapes(f'Cannot stack a tensor of shape {v.shape} with layouts of dims {inner.names}')
    return Layout(objs, concat_shapes(dim, inner))


def layout(objects, *shape) -> Tensor:
    """A tensor whose values are the leaves of the tree `objects` (lists, tuples, dicts, strings), for any objects.

    Each dim in `shape` is one level of the tree, outermost first; their sizes are read from the tree, dict
    keys become labels. Below the last level are the leaves: any Python objects, numbers or tensors.
    `layout(tree, dims).native()` is `tree`.

    Example: `layout({'a': 'text', 'b': [0, 1]}, channel('dict,inner')).dict['a'].inner[1].native()` is `'e'`.

    Args:
        objects: the tree; with no dims, the object itself (a tensor of rank 0).
        *shape: Shapes or dim specs ('letters:c'), one dim per tree level.
    """
    dims = concat_shapes(*[parse_dim_spec(s) if isinstance(s, str) else s for s in shape]) if shape \
        else EMPTY_SHAPE
    if isinstance(objects, Layout):
        if dims and dims.names != objects._stack.names:
            raise ValueError(f'layout(): the layout already has the dims {objects._stack}, not {dims}')
        return objects
    return Layout(objects, dims)



def is_none(x) -> bool:
    """Whether `x` is None, or a layout holding None (`wrap(None)`)."""
    return x is None or (isinstance(x, Layout) and x._obj is None)


def object_dims(value) -> Shape:
    """The dims along which a layout arranges its objects (not those of the tensors inside); empty for other values."""
    return value._stack if isinstance(value, Layout) else EMPTY_SHAPE
