"""Names of a package that load their module on first use (PEP 562), and that `dir()` lists all the same."""

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of the package named `package`, which is being imported.

    Args:
        package: the package's `__name__`.
        modules: each lazily loaded name -> the module holding it (relative to `package`, or absolute), as
            `'module'` (the name is the module's attribute of that name, or, where the module is the package's
            submodule of that name, the module itself) or `'module:attribute'` (the name is another name for it).

    Returns:
        `__getattr__`, which imports a name's module on first use and keeps the value in the package (later uses
        are plain attribute lookups), and `__dir__`, which lists the names the package has so far together with
        the lazy ones (for tab completion in Jupyter and IPython).
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str):
        target = modules.get(name)
        if target is None:
            raise AttributeError(f'module {package!r} has no attribute {name!r}')
        module_name, _, attribute = target.partition(':')
        module = importlib.import_module(module_name, package)
        if attribute:
            value = getattr(module, attribute)
        else:
            value = module if module.__name__ == f'{package}.{name}' else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(modules))

    return __getattr__, __dir__


def by_module(names: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """The table of `lazy_names` from module -> the names it holds (a name `'a=b'` is `a`, another name for `b`)."""
    table = {}
    for module, held in names.items():
        for name in held:
            alias, _, original = name.partition('=')
            table[alias] = f'{module}:{original}' if original else module
    return table
