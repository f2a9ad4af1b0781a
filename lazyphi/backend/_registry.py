"""Which backends exist, which one is the default, which one handles a value, and moving values between them.

This module knows backends only through their methods (`name`, `is_tensor`, `catch_all`, ...), so the
`Backend` class can use it (for `with backend:` and for pickling by name) without an import cycle.
"""

from __future__ import annotations

import importlib
import logging
import types
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .._errors import NoBackendFound
from ._precision import precision

if TYPE_CHECKING:
    from ._backend import Backend

ML_LOGGER = logging.getLogger('lazyphi')
"""lazyphi's logger (phiml's name for it): choices of backends are logged at INFO and DEBUG level. lazyphi adds no
handler; configure it with the `logging` module, e.g. `logging.basicConfig(level=logging.INFO)`."""

BACKENDS: list[Backend] = []
"""The registered backends, in the order `choose_backend()` consults them."""

_global_default: Backend | None = None
_context_stack: ContextVar[tuple[Backend, ...]] = ContextVar('lazyphi_backend', default=())
_type_owners: dict[type, Backend] = {}  # type -> the first registered backend that held a value of it natively
_PYTHON_NUMBERS = frozenset({bool, int, float, complex})
_lazy_backends: dict[str, str] = {}  # top-level module of a library -> lazyphi module that registers its backend
_load_hooks: dict[str, list[Callable[[Backend], None]]] = {}  # backend name -> functions to call once it registers


# --- Registration ---

def register_backend(backend: Backend) -> Backend:
    """Adds `backend` to `BACKENDS` so that `choose_backend()` considers it. Catch-all backends stay last."""
    if backend in BACKENDS:
        return backend
    if any(b.name == backend.name for b in BACKENDS):
        raise ValueError(f"A backend named '{backend.name}' is already registered")
    position = len(BACKENDS) if backend.catch_all else next(
        (i for i, b in enumerate(BACKENDS) if b.catch_all), len(BACKENDS))
    BACKENDS.insert(position, backend)
    _type_owners.clear()
    for hook in _load_hooks.pop(backend.name, ()):
        hook(backend)
    return backend


def on_backend_loaded(name: str, hook: Callable[[Backend], None]) -> None:
    """Calls `hook(backend)` once the backend called `name` is registered: now if it already is, else then.

    Lets other layers attach per-library behaviour (such as pytree registration) without importing the library.
    """
    for backend in BACKENDS:
        if backend.name == name:
            hook(backend)
            return
    _load_hooks.setdefault(name, []).append(hook)


def seed_backends(seed: int | None) -> None:
    """Seeds the random generators of every backend: those registered now, and the others once they load.

    None seeds them from the system's entropy.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f'A seed is an int or None, got {seed!r}')
    for backend in BACKENDS:
        if backend.supports('seed'):  # not the backend of plain Python objects, which draws nothing
            backend.seed(seed)
    loaded = {backend.name for backend in BACKENDS}
    for name in _lazy_backends:
        if name not in loaded:
            hooks = _load_hooks.setdefault(name, [])
            hooks[:] = [h for h in hooks if not isinstance(h, _Seeding)]  # the latest seed replaces an earlier one
            hooks.append(_Seeding(seed))


class _Seeding:
    """A load hook seeding the backend with `seed`, recognised so that a later `seed_backends` replaces it."""

    def __init__(self, seed: int | None):
        self.seed = seed

    def __call__(self, backend: Backend) -> None:
        backend.seed(self.seed)


def register_lazy_backend(module_prefix: str, import_path: str) -> None:
    """Declares that values of the library `module_prefix` are handled by the backend module `import_path`.

    The module is imported (and must register its backend) the first time `choose_backend()` sees a value
    whose type comes from `module_prefix`, or when `set_global_default_backend(module_prefix)` is called.
    """
    _lazy_backends[module_prefix] = import_path


register_lazy_backend('torch', 'lazyphi.backend.torch')
register_lazy_backend('jax', 'lazyphi.backend.jax')
register_lazy_backend('jaxlib', 'lazyphi.backend.jax')
register_lazy_backend('tensorflow', 'lazyphi.backend.tensorflow')


def _import_lazy_backend(import_path: str) -> None:
    ML_LOGGER.debug("Importing the backend module %s", import_path)
    importlib.import_module(import_path)
    for prefix in [p for p, path in _lazy_backends.items() if path == import_path]:
        del _lazy_backends[prefix]


def _known_names() -> list[str]:
    return sorted({b.name for b in BACKENDS} | set(_lazy_backends))


def backend_by_name(name: str | types.ModuleType) -> Backend:
    """Returns the registered backend called `name`, importing a lazily registered one if needed.

    `name` may also be the library's module (`torch`, `jax.numpy`, `numpy`, `tensorflow`): its top-level
    package names the backend.

    Raises:
        ValueError: if no backend of that name is registered or can be imported.
    """
    if isinstance(name, types.ModuleType):
        name = name.__name__.partition('.')[0]
    key = name.lower()
    for backend in BACKENDS:
        if backend.name == key:
            return backend
    import_path = _lazy_backends.get(key)
    if import_path is not None:
        try:
            _import_lazy_backend(import_path)
        except ImportError as err:
            raise ValueError(f"Backend {name!r} needs the module '{import_path}', which could not be imported "
                             f"({err}). Known backend names: {_known_names()}") from err
        for backend in BACKENDS:
            if backend.name == key:
                return backend
    raise ValueError(f"Unknown backend {name!r}. Known backend names: {_known_names()}")


# --- The default backend ---

def default_backend() -> Backend:
    """The backend of the innermost `with backend:` block, else the global default (NumPy unless changed)."""
    stack = _context_stack.get()
    return stack[-1] if stack else _global_default


def context_backend() -> Backend | None:
    """The backend of the innermost `with backend:` block of this thread or task, or `None` outside of one."""
    stack = _context_stack.get()
    return stack[-1] if stack else None


def enter_context(backend: Backend) -> None:
    """Makes `backend` the default of the current thread or task until `exit_context(backend)` (`with backend:`)."""
    _context_stack.set((*_context_stack.get(), backend))


def exit_context(backend: Backend) -> None:
    """Ends the innermost `enter_context(backend)`."""
    stack = _context_stack.get()
    if not stack or stack[-1] is not backend:
        raise RuntimeError(f"'with {backend.name}:' blocks must be exited in the reverse order they were entered")
    _context_stack.set(stack[:-1])


def set_global_default_backend(backend: str | Backend) -> Backend:
    """Sets the backend `choose_backend()` prefers wherever no `with backend:` block is active.

    Args:
        backend: A `Backend` or a name: `'numpy'`, `'torch'`, `'jax'`, `'tensorflow'`.

    Returns:
        The backend now set.

    Raises:
        ValueError: for a name that names no backend, or one whose module cannot be imported.
        TypeError: for a value that is neither a backend nor a name.
    """
    global _global_default
    if isinstance(backend, str):
        backend = backend_by_name(backend)
    elif not callable(getattr(backend, 'is_tensor', None)) or not isinstance(getattr(backend, 'name', None), str):
        raise TypeError(f"Expected a Backend or a backend name but got {type(backend).__name__}")
    if backend is not _global_default:
        ML_LOGGER.info("lazyphi's default backend is now %s", backend.name)
    _global_default = backend
    return backend


# --- Choosing the backend for values ---

def choose_backend(*values: Any, prefer_default: bool = False) -> Backend:
    """Selects the backend to operate on `values`.

    The backends holding some of the values natively are the candidates (the default backend first, then in
    registration order); the first that accepts all values wins. Values no backend holds natively (Python
    numbers, lists) go to the default backend if `prefer_default`, else to the first registered backend that
    accepts them all (NumPy). With `prefer_default`, the default backend also wins whenever it accepts all
    values. The first value of a library registered with `register_lazy_backend()` imports its backend.

    The choice depends on the values and the default backend only: choosing never changes later choices.

    Raises:
        NoBackendFound: if no backend accepts some value (the message names its type), or if values of
            different libraries are mixed that no single backend accepts together (it names the libraries).
    """
    # Fast path: all values are of types one backend held natively before (e.g. NumPy arrays), or Python
    # numbers, which every backend accepts and none holds natively, so they cannot change the choice.
    owner = None
    for value in values:
        value_type = type(value)
        if value_type in _PYTHON_NUMBERS:
            continue
        backend = _type_owners.get(value_type)
        if backend is None or (owner is not None and backend is not owner) or not backend.is_tensor(value, True):
            break
        owner = backend
    else:
        if owner is None and BACKENDS:  # only numbers: the slow path would pick one of these
            return default_backend() if prefer_default else BACKENDS[0]
        if not prefer_default or owner is default_backend():
            return owner
    return _choose_backend_slowly(values, prefer_default)


def _choose_backend_slowly(values: tuple, prefer_default: bool) -> Backend:
    if _lazy_backends:
        _import_backends_for(values)
    default = default_backend()
    if prefer_default and _accepts_all(default, values):
        return default
    owners = list(dict.fromkeys(owner for owner in map(_owner_of, values) if owner is not None))
    if owners:
        for backend in sorted(owners, key=lambda b: b is not default):
            if _accepts_all(backend, values):
                return backend
    else:
        for backend in BACKENDS:
            if _accepts_all(backend, values):
                return backend
    unknown = [v for v in values if not any(backend.is_tensor(v) for backend in BACKENDS)]
    if unknown:
        raise NoBackendFound(f"No registered backend accepts values of type {_type_names(unknown)}. "
                             f"Registered backends: {[b.name for b in BACKENDS]}")
    held = {backend.name: _type_names([v for v in values if _owner_of(v) is backend]) for backend in owners}
    libraries = ', '.join(f"{name} ({', '.join(types)})" for name, types in held.items())
    raise NoBackendFound(f"Values of different libraries cannot be combined: {libraries}. No single backend "
                         f"accepts all of them; convert them to one backend first, e.g. convert(value, "
                         f"'{owners[0].name}')")


def _owner_of(value: Any) -> Backend | None:
    """The first registered backend holding `value` natively; `None` for numbers, lists and unknown values."""
    if type(value) in _PYTHON_NUMBERS:
        return None
    cached = _type_owners.get(type(value))
    if cached is not None and cached.is_tensor(value, True):
        return cached
    for backend in BACKENDS:
        if backend.is_tensor(value, True):
            _type_owners[type(value)] = backend
            return backend
    return None


def _import_backends_for(values: tuple) -> None:
    for value in values:
        module = type(value).__module__
        import_path = _lazy_backends.get(module.partition('.')[0])
        if import_path is not None:
            try:
                _import_lazy_backend(import_path)
            except ImportError as err:
                raise NoBackendFound(f"Values of type '{type(value).__name__}' (module '{module}') need the backend "
                                     f"module '{import_path}', which could not be imported: {err}") from err


def _accepts_all(backend: Backend, values: tuple) -> bool:
    return all(backend.is_tensor(v) for v in values)


def _type_names(values: Sequence) -> list[str]:
    return list(dict.fromkeys(type(v).__name__ for v in values))


# --- Moving values between backends ---

def as_backend(backend: Backend | str | types.ModuleType | None) -> Backend:
    """`backend` itself, the backend of a name or library module (see `backend_by_name`), or the default for None.

    Raises:
        TypeError: `backend` is none of these.
        ValueError: no backend has that name.
    """
    if backend is None:
        return default_backend()
    if isinstance(backend, (str, types.ModuleType)):
        return backend_by_name(backend)
    if isinstance(backend, type) or not isinstance(getattr(backend, 'name', None), str) \
            or not callable(getattr(backend, 'is_tensor', None)):  # Backend is imported for type checks only
        raise TypeError(f'Expected a Backend, a backend name like "torch" or a library module, got {backend!r}')
    return backend


def convert(native: Any, backend: Backend | str | None = None, use_dlpack: bool = True) -> Any:
    """Converts a native tensor to the native format of `backend` (the default backend if `None`; a Backend, a name
    like 'torch', or the library's module).

    Values `backend` already holds natively come back unchanged. Where both backends support DLPack and
    `use_dlpack` is set, the data is shared without copying; otherwise it passes through a NumPy array
    (which the target library copies or wraps, as it does). Either way the dtype is kept (not changed
    to the current precision). Gradients do not flow through the conversion.
    """
    target = as_backend(backend)
    if target.is_tensor(native, True):
        return native
    source = choose_backend(native)
    if source is target:
        return native
    if use_dlpack and source.supports('to_dlpack') and target.supports('from_dlpack'):
        try:
            return target.from_dlpack(source.to_dlpack(native))
        except (BufferError, RuntimeError):  # e.g. data on a device the target library cannot reach
            pass
    array = source.numpy(native)
    kind = array.dtype.kind
    bits = array.dtype.itemsize * 8 // (2 if kind == 'c' else 1)
    if kind in 'fc' and bits in (16, 32, 64):  # as_tensor makes floats of the current precision: make it theirs
        with precision(bits):
            return target.as_tensor(array)
    return target.as_tensor(array)
