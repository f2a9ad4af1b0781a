"""Sizes of dims: ints, None (unknown), item labels, and `NonUniform` sizes that vary along other dims."""
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

_SIZE_FORMS = ("an int >= 0, None, a NonUniform, a tensor of sizes (varying along its dims), or item labels as a "
               "str 'a,b' or a tuple of str")


@dataclass(frozen=True)
class NonUniform:
    """Size of a dim whose length varies along other dims.

    Args:
        sizes: nested tuples of ints, the outermost level running along `along[0]`.
        along: names of the dims the size varies along, one per nesting level.
    """
    sizes: tuple
    along: tuple[str, ...]

    def __post_init__(self):
        if not isinstance(self.along, tuple) or not self.along or not all(isinstance(a, str) for a in self.along):
            raise ValueError(f"NonUniform.along must be a non-empty tuple of dim names but got {self.along!r}")
        if not isinstance(self.sizes, tuple) or not all(type(n) is int and n >= 0 for n in size_leaves(self.sizes)):
            raise ValueError(f"NonUniform.sizes must be nested tuples of ints >= 0 but got {self.sizes!r}")

    @property
    def max(self) -> int:
        """Largest size found anywhere."""
        return max(size_leaves(self.sizes))

    @property
    def min(self) -> int:
        """Smallest size found anywhere."""
        return min(size_leaves(self.sizes))

    def __array__(self, dtype=None, copy=None):
        """The sizes as an array with one axis per dim of `along`, for comparing them with values."""
        return np.asarray(self.sizes, dtype=dtype)

    def __int__(self):
        raise TypeError(f"A non-uniform size varies along {', '.join(self.along)} and has no single int value; "
                        f"use .max or .min, or select along {self.along[0]!r} first")

    def __str__(self) -> str:
        leaves = list(size_leaves(self.sizes))
        span = f"{min(leaves)}..{max(leaves)}" if leaves else 'empty'
        return f"{span} along {','.join(self.along)}"


def size_leaves(sizes) -> Iterator[int]:
    if isinstance(sizes, tuple):
        for item in sizes:
            yield from size_leaves(item)
    else:
        yield sizes


def _labels_of(text: str) -> tuple[str, ...]:
    """Item labels from 'a,b' (a trailing comma, as in '0,', makes a single label explicit)."""
    parts = [v.strip() for v in text.split(',')]
    return tuple(parts[:-1] if len(parts) > 1 and not parts[-1] else parts)


def parse_size(value, name: str) -> tuple:
    """Return (size, labels) for a user-given size of dim `name`."""
    if type(value) is int and value >= 0:
        return value, None
    if value is None:
        return None, None
    if isinstance(value, NonUniform):
        return value, None
    if isinstance(value, str) or (isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)):
        labels = _labels_of(value) if isinstance(value, str) else tuple(value)
        if not labels or not all(labels) or len(set(labels)) != len(labels):
            raise ValueError(f"Invalid labels {value!r} for dim {name!r}: labels must be non-empty and distinct")
        return len(labels), labels
    names = getattr(getattr(value, 'shape', None), 'names', None)
    if names is not None and hasattr(value, 'numpy'):  # a tensor of sizes: varying along its dims
        sizes = value.numpy(names).tolist()
        if not names:
            return parse_size(sizes, name)
        if all(type(n) is int and n >= 0 for n in size_leaves(_tuples(sizes))):
            return size_from_nested(_tuples(sizes), tuple(names)), None
    if not isinstance(value, bool) and hasattr(type(value), '__index__'):
        size = operator.index(value)
        if size >= 0:
            return size, None
    raise ValueError(f"Invalid size {value!r} for dim {name!r}: expected {_SIZE_FORMS}")


def _tuples(nested):
    return tuple(_tuples(v) for v in nested) if isinstance(nested, list) else nested


def gather_non_uniform(size: NonUniform, norm: dict) -> 'int | NonUniform':
    """Select the entries of a non-uniform size along the dims it varies along."""
    along = size.along

    def walk(sizes, level):
        if level == len(along):
            return sizes
        sel = norm.get(along[level])
        if type(sel) is int:
            return walk(sizes[sel], level + 1)
        if sel is not None:
            sizes = sizes[sel] if type(sel) is slice else tuple(sizes[i] for i in sel)
        return tuple(walk(s, level + 1) for s in sizes)

    return size_from_nested(walk(size.sizes, 0), tuple(a for a in along if type(norm.get(a)) is not int))


def size_from_nested(sizes, along: tuple[str, ...]) -> 'int | NonUniform':
    """An int if all nested `sizes` agree (or none are left to vary along), else a NonUniform."""
    if not along:
        return sizes
    distinct = set(size_leaves(sizes))
    return distinct.pop() if len(distinct) == 1 else NonUniform(sizes, along)


def map_size_leaves(sizes, fn: Callable[[int], int]):
    return tuple(map_size_leaves(s, fn) for s in sizes) if isinstance(sizes, tuple) else fn(sizes)
