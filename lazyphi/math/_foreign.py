"""Values of other libraries that `tensor()` turns into Tensors through a converter: xarray, dask.

A converter is registered for the top-level module of the values' types, as an import path
`'package.module:function'` that is imported the first time such a value reaches `tensor()`, so
that `import lazyphi` imports none of these libraries (a value of one means it is imported already).
`converter(data, dims)` receives the dims given to `tensor()` (possibly none) and returns a Tensor, or
NotImplemented for values of the library it does not convert (`tensor()` then goes on as without it).

Registered here: `xarray` (`lazyphi.math._xarray`), `scipy` (sparse matrices, `lazyphi.math._sparse`: NumPy
tensors, which `tensor()` puts on the default backend as it does NumPy arrays). `lazyphi.parallel` registers
`dask`: a dask array becomes a lazy tensor kind that needs Dask, which only that layer may import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

_converters: dict[str, str | Callable] = {}  # top-level module -> converter, or its import path until first used
_on_host: set[str] = set()  # top-level modules whose converter gives NumPy tensors that tensor() converts


def register_tensor_source(module_prefix: str, converter: str | Callable, on_host: bool = False) -> None:
    """Let `tensor()` convert values whose type is defined in the module `module_prefix` (or a submodule).

    Args:
        module_prefix: the top-level module name, like `'xarray'`.
        converter: `converter(data, dims: Shape) -> Tensor`, or its import path `'package.module:function'`,
            imported the first time a value of that library is converted.
        on_host: the converter gives NumPy tensors, which `tensor()` (but not `wrap()`) then puts on the default
            backend, as it does NumPy arrays.
    """
    if not isinstance(module_prefix, str) or not module_prefix.isidentifier():
        raise ValueError(f'register_tensor_source() needs a top-level module name like "xarray", got {module_prefix!r}')
    if not callable(converter) and not (isinstance(converter, str) and ':' in converter):
        raise TypeError(f'register_tensor_source() needs a function or an import path "package.module:function", '
                        f'got {converter!r}')
    _converters[module_prefix] = converter
    if on_host:
        _on_host.add(module_prefix)
    else:
        _on_host.discard(module_prefix)


def tensor_source(data) -> Callable | None:
    """The converter registered for the library that defines `type(data)`, or None."""
    converter = _converters.get(type(data).__module__.partition('.')[0])
    if isinstance(converter, str):
        prefix = type(data).__module__.partition('.')[0]
        module, _, name = converter.partition(':')
        converter = _converters[prefix] = getattr(importlib.import_module(module), name)
    return converter


def gives_host_values(data) -> bool:
    """Whether the converter for `data` was registered with `on_host` (see `register_tensor_source`)."""
    return type(data).__module__.partition('.')[0] in _on_host


register_tensor_source('xarray', 'lazyphi.math._xarray:from_xarray')
register_tensor_source('scipy', 'lazyphi.math._sparse:from_scipy', on_host=True)  # sparse matrices only
