"""`f`: f-strings evaluated once per element of the tensors in them, giving a layout of strings.

`-f-f"run_{seed}/x_{x:.2f}"` with tensors `seed` and `x` is a layout with the dims of both, each entry the
string formatted with the entries of `seed` and `x` at that position. Without tensors in the f-string the
result is the string itself. The leading `-f` switches on collection: while the f-string is evaluated, every
tensor's `__format__` hands itself to the active formatter and leaves a placeholder; `- f"..."` then fills
the placeholders position by position.
"""

from __future__ import annotations

import itertools
import re

from ._format import BROADCAST_FORMATTER
from ._layout import Layout
from ._shape import merge_shapes
from ._tensor import Tensor

_PLACEHOLDER = '\x00{}\x00'
_PLACEHOLDER_PATTERN = re.compile('\x00(\\d+)\x00')


class _Collection:
    """The tensors and format specs of the f-string being evaluated."""

    def __init__(self):
        self.values: list[tuple[Tensor, str]] = []

    def register(self, value: Tensor, spec: str) -> str:
        self.values.append((value, spec))
        return _PLACEHOLDER.format(len(self.values) - 1)


class BroadcastFormatter:
    """Formats an f-string once per element of the tensors in it: `-f-f'{t}'` (see the module docstring)."""

    def __neg__(self) -> BroadcastFormatter:
        BROADCAST_FORMATTER.set(_Collection())
        return self

    def __sub__(self, text: str):
        collection = BROADCAST_FORMATTER.get()
        BROADCAST_FORMATTER.set(None)
        if collection is None:
            raise TypeError("Use the broadcast formatter as -f-f'...': the leading -f starts collecting tensors")
        if not isinstance(text, str):
            raise TypeError(f"-f-<text> needs a str (an f-string), got {type(text).__name__}")
        if not collection.values:
            return text
        pieces = _PLACEHOLDER_PATTERN.split(text)  # literal, index, literal, index, ..., literal
        shape = merge_shapes(*[v.shape for v, _ in collection.values])
        if not shape.is_uniform:
            raise ValueError(f'-f-f"...": the tensors in the f-string have the non-uniform shape {shape}')
        strings = []
        for position in itertools.product(*[range(s) for s in shape.sizes]):
            at = dict(zip(shape.names, position, strict=True))
            strings.append(''.join(piece if i % 2 == 0 else _formatted(collection.values[int(piece)], at)
                                   for i, piece in enumerate(pieces)))
        return Layout(_nested(strings, shape.sizes), shape)


def _formatted(entry: tuple, position: dict) -> str:
    value, spec = entry
    value = value[{d: i for d, i in position.items() if d in value.shape.names}]
    value._single_value('f-string')  # a value that is not at hand (a tracer) raises here instead of printing
    return format(value, spec)


def _nested(flat: list, sizes: tuple):
    """The entries of `flat` (row-major) as nested lists of `sizes`."""
    if not sizes:
        return flat[0]
    step = len(flat) // sizes[0]
    return [_nested(flat[i * step:(i + 1) * step], sizes[1:]) for i in range(sizes[0])]


f = BroadcastFormatter()
"""The broadcast formatter: `-f-f"file_{i}.npz"` formats the f-string for every element of the tensors in it."""
