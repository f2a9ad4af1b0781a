"""Class attributes and cached properties: the one MRO lookup and the one test for "is this a cached property".

`cached_property` is lazyphi's descriptor: like `functools.cached_property`, but Python 3.11's
takes one `RLock` per descriptor, that is per class attribute, so computing a property of one
instance blocks every other instance of the class (3.12 dropped the lock: two threads may both
compute). This one locks per instance and property while computing: two threads asking one
instance compute it once, and other instances never wait.

Both kinds store the value in the instance's `__dict__` under the property's name and are
non-data descriptors, so a cached value is read back by plain attribute lookup and frozen
dataclasses can cache too. Every layer (the tree functions here, `lazyphi.dataclasses`,
`lazyphi.storage`, `lazyphi.parallel`) recognises both through `is_cached_property` and
`cached_property_names`, which live here because the tree functions, the lowest users, need them.
"""

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any


class cached_property:
    """Decorator turning a method of one argument into a property computed once per instance.

    The value is stored in the instance `__dict__`; delete the attribute to have it recomputed.
    While it is computed, a lock of that instance and property alone is held: another thread
    asking for it waits for the value, while instances of one class compute in parallel.

    Args:
        func: the method computing the value from the instance.
    """

    def __init__(self, func: Callable[[Any], Any]):
        if not callable(func):
            raise TypeError(f"cached_property decorates a method, but got {func!r} of type {type(func).__name__}")
        self.func = func
        self.attrname: str | None = None
        self.__doc__ = func.__doc__
        self.__module__ = getattr(func, '__module__', None)

    def __set_name__(self, owner: type, name: str) -> None:
        if self.attrname is None:
            self.attrname = name
        elif name != self.attrname:
            raise TypeError(f"One cached_property cannot serve two names, but it is assigned to both "
                            f"{self.attrname!r} and {name!r} (in {owner.__qualname__}). Decorate a second method "
                            f"instead of reusing the descriptor.")

    def __get__(self, instance, owner: type | None = None):
        if instance is None:
            return self
        name = self.attrname
        if name is None:
            raise TypeError(f"This cached_property of {self.func!r} was never given a name: define it in a class "
                            f"body so that Python calls __set_name__ on it.")
        try:
            cache = instance.__dict__
        except AttributeError:
            raise TypeError(f"{type(instance).__qualname__} instances have no __dict__ to cache the property "
                            f"{name!r} in: the class defines __slots__. Add '__dict__' to __slots__, or use "
                            f"@dataclass(slots=False).") from None
        try:
            return cache[name]
        except KeyError:
            pass
        key = (id(instance), name)
        with _COMPUTING_GUARD:
            entry = _COMPUTING.get(key)
            if entry is None:
                entry = _COMPUTING[key] = [threading.RLock(), 0]  # the lock, and how many threads use it
            entry[1] += 1
        try:
            with entry[0]:
                try:
                    return cache[name]  # another thread computed it meanwhile
                except KeyError:
                    pass
                value = self.func(instance)
                cache[name] = value
                return value
        finally:
            with _COMPUTING_GUARD:
                entry[1] -= 1
                if not entry[1]:
                    del _COMPUTING[key]

    def __repr__(self) -> str:
        return f"<cached_property {self.attrname or getattr(self.func, '__qualname__', self.func)!r}>"


# (id of an instance, property name) -> [lock, threads using it], while some thread computes that property; the
# instance lives while its entry exists (the threads hold it), so its id cannot be reused meanwhile
_COMPUTING: dict[tuple[int, str], list] = {}
_COMPUTING_GUARD = threading.Lock()

CACHED_PROPERTY_TYPES = (functools.cached_property, cached_property)

# class -> names of its cached properties; names, not descriptors: a descriptor's function may refer back to
# the class (the `__class__` cell of super()), which would keep a weakly keyed class alive forever
_NAMES_BY_CLASS: 'weakref.WeakKeyDictionary[type, tuple[str, ...]]' = weakref.WeakKeyDictionary()


def class_attribute(cls: type, name: str, after: type | None = None) -> tuple[type | None, Any]:
    """(defining class, value) of the class attribute `name` found first along the MRO of `cls`.

    Args:
        cls: the class to look in.
        name: the attribute name.
        after: start the search past this class of the MRO (as `super()` does).

    Returns:
        (None, None) when no class along the MRO defines `name`.
    """
    mro = cls.__mro__
    if after is not None and after in mro:
        mro = mro[mro.index(after) + 1:]
    for klass in mro:
        namespace = vars(klass)
        if name in namespace:
            return klass, namespace[name]
    return None, None


def is_cached_property(value) -> bool:
    """Whether `value` (a class attribute) is a `functools.cached_property` or a lazyphi `cached_property`."""
    return isinstance(value, CACHED_PROPERTY_TYPES)


def cached_property_names(cls: type) -> tuple[str, ...]:
    """Names of the cached properties of a class, the class's own first, then its bases'; found once per class.

    A name counts only if the class attribute found first along the MRO is a cached property: a
    subclass that overrides it with something else has no cached property of that name.
    """
    names = _NAMES_BY_CLASS.get(cls)
    if names is None:
        found, seen = [], set()
        for klass in cls.__mro__:
            for name, value in vars(klass).items():
                if name not in seen:
                    seen.add(name)
                    if is_cached_property(value):
                        found.append(name)
        names = _NAMES_BY_CLASS[cls] = tuple(found)
    return names
