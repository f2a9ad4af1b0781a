"""Names of a package that load their module on first use (PEP 562), and that `dir()` lists all the same."""

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_names(package: str, modules: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of the package named `package`, which is being imported.

    Args:
        package: the package's `__name__`.
        modules: each lazily loaded name -> the module holding it (relative to `package`, or absolute).

    Returns:
        `__getattr__`, which imports a name's module on first use, and `__dir__`, which lists the names the
        package has so far together with the lazy ones (for tab completion in Jupyter and IPython).
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str):
        module = modules.get(name)
        if module is None:
            raise AttributeError(f'module {package!r} has no attribute {name!r}')
        return getattr(importlib.import_module(module, package), name)

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(modules))

    return __getattr__, __dir__
