"""The cached properties of a class and the values an instance holds for them.

The descriptor (`cached_property`, without a class-wide lock) and the test for either kind of
cached property live in `lazyphi.math._properties`, where the tree functions need them;
everything in `lazyphi.dataclasses` treats `functools.cached_property` and lazyphi's alike.
"""

from typing import Any

from ..math.kinds import cached_property_names, class_attribute


def cached_properties(cls: type) -> dict[str, Any]:
    """The cached properties of a class, inherited ones included, by attribute name.

    A name counts only if the class attribute found first along the MRO is a cached property:
    a subclass that overrides it with something else has no cached property of that name.
    Classes are inspected once; do not add cached properties to a class after using it.

    Args:
        cls: a class, or an instance whose class to inspect.

    Returns:
        {name: descriptor}, the class's own first, then those of its bases along the MRO.
    """
    if not isinstance(cls, type):
        cls = type(cls)
    return {name: class_attribute(cls, name)[1] for name in cached_property_names(cls)}


def cached_values(obj) -> dict[str, Any]:
    """The values `obj` currently holds for its cached properties, by name (nothing is computed).

    Args:
        obj: any instance; one without `__dict__` has none.
    """
    cache = getattr(obj, '__dict__', None)
    if not cache:
        return {}
    return {name: cache[name] for name in cached_property_names(type(obj)) if name in cache}

