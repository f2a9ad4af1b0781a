"""Checking the arguments users give the storage layer: byte sizes and cache directories.

Nothing here touches the disk beyond `os.stat`; `lazyphi.parallel.plan` calls these for `memory_limit`
and `cache_dir`.
"""

from __future__ import annotations

import math
import os
import re

# units of byte sizes as Dask writes them: decimal (kB, MB, ...) and binary (KiB, MiB, ...), any case
_UNITS = {'': 1, 'b': 1, 'k': 10 ** 3, 'kb': 10 ** 3, 'm': 10 ** 6, 'mb': 10 ** 6, 'g': 10 ** 9, 'gb': 10 ** 9,
          't': 10 ** 12, 'tb': 10 ** 12, 'p': 10 ** 15, 'pb': 10 ** 15, 'ki': 2 ** 10, 'kib': 2 ** 10,
          'mi': 2 ** 20, 'mib': 2 ** 20, 'gi': 2 ** 30, 'gib': 2 ** 30, 'ti': 2 ** 40, 'tib': 2 ** 40,
          'pi': 2 ** 50, 'pib': 2 ** 50}
_SIZE = re.compile(r'\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?|[0-9]+\.)?\s*([a-z]*)\s*', re.IGNORECASE)


def parse_bytes(value, what: str = 'memory_limit') -> int:
    """A number of bytes from an int, a float or a string like '1GiB', '500 MB', '2e9' or '128kB'.

    Args:
        value: the size. Units as Dask writes them: B, kB/MB/GB/TB/PB (powers of 1000), KiB/MiB/GiB/TiB/PiB
            (powers of 1024), any case; a bare unit means one of it. Floats are rounded down.
        what: the argument's name, for messages.

    Raises:
        TypeError: not an int, float or str (bool is not a size).
        ValueError: negative, not finite, or a string that is no size.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"{what} must be a number of bytes (int or float) or a string like '1GiB' or '500MB', "
                        f'got {value!r:.100} of type {type(value).__name__}')
    number = value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS or (not match.group(1) and not unit):
            raise ValueError(f"{what} must be a size like '1GiB', '500MB', '2e9' or '128 kB' (units B, kB, MB, GB, TB, "
                             f'PB, KiB, MiB, GiB, TiB, PiB), got {value!r:.100}')
        number = float(match.group(1) or 1) * _UNITS[unit]
    if not math.isfinite(number) or number < 0:
        raise ValueError(f'{what} must be a finite number of bytes >= 0, got {value!r:.100}')
    return int(number)


def check_cache_dir(value, what: str = 'cache_dir') -> str:
    """`value` as the absolute path of a cache directory (it need not exist yet).

    Raises:
        TypeError: not a str or path-like.
        ValueError: empty (which would mean the working directory), or an existing file.
    """
    if isinstance(value, bytes) or not isinstance(value, str | os.PathLike):
        raise TypeError(f"{what} must be a directory path (str or os.PathLike), like 'results/', got {value!r:.100}")
    path = os.fspath(value)
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{what} must name a directory, got {value!r}; to use the working directory say '.'")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f'{what} {path!r} is a file; it must be a directory (it is created if missing)')
    return os.path.abspath(path)
