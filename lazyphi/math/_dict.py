"""`Dict`: a dict of tensors (or trees) with arithmetic applied value by value and keys readable as attributes."""

import operator
from collections.abc import Callable


def _each(fn: Callable) -> Callable:
    def apply(self: 'Dict') -> 'Dict':
        return Dict({k: fn(v) for k, v in self.items()})
    return apply


def _pairwise(fn: Callable, reflected: bool = False) -> Callable:
    """`fn` of each value and `other` (its value of the same key if `other` is a Dict)."""
    def apply(self: 'Dict', other) -> 'Dict':
        if isinstance(other, Dict) and set(self) != set(other):
            raise KeyError(f'Dict arithmetic needs the same keys on both sides; only one side has '
                           f'{sorted(set(self) ^ set(other))}')
        result = {}
        for k, v in self.items():
            o = other[k] if isinstance(other, Dict) else other
            result[k] = fn(o, v) if reflected else fn(v, o)
        return Dict(result)
    return apply


class Dict(dict):
    """A dict whose values are tensors or trees: `d.key` reads `d['key']`, and `d1 + d2`, `d * 2`, `-d`, ...
    apply to each value (two Dicts pair their values by key).

    It is a tree node for the shape operations (its values are its data) but has no shape of its own.
    """

    def __value_attrs__(self) -> tuple:
        return tuple(self.keys())

    def __getattr__(self, key: str):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f'Dict has no key {key!r}; its keys are {list(self)}') from None

    def __setattr__(self, key: str, value) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        try:
            del self[key]
        except KeyError:
            raise AttributeError(f'Dict has no key {key!r}; its keys are {list(self)}') from None

    def __copy__(self) -> 'Dict':
        return Dict(self)

    __neg__, __pos__, __invert__, __abs__ = _each(operator.neg), _each(operator.pos), _each(operator.invert), _each(abs)
    __round__ = _each(round)
    __add__, __radd__ = _pairwise(operator.add), _pairwise(operator.add, reflected=True)
    __sub__, __rsub__ = _pairwise(operator.sub), _pairwise(operator.sub, reflected=True)
    __mul__, __rmul__ = _pairwise(operator.mul), _pairwise(operator.mul, reflected=True)
    __truediv__, __rtruediv__ = _pairwise(operator.truediv), _pairwise(operator.truediv, reflected=True)
    __floordiv__, __rfloordiv__ = _pairwise(operator.floordiv), _pairwise(operator.floordiv, reflected=True)
    __mod__, __rmod__ = _pairwise(operator.mod), _pairwise(operator.mod, reflected=True)
    __pow__, __rpow__ = _pairwise(operator.pow), _pairwise(operator.pow, reflected=True)
    __and__, __rand__ = _pairwise(operator.and_), _pairwise(operator.and_, reflected=True)
    __or__, __ror__ = _pairwise(operator.or_), _pairwise(operator.or_, reflected=True)
    __xor__, __rxor__ = _pairwise(operator.xor), _pairwise(operator.xor, reflected=True)
