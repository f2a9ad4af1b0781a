"""What a disk cache (`cache_dir`) holds, and deleting from it.

Each result of `parallel_compute(..., cache_dir=...)` is a directory named by its key. This module
reads the results' manifests and walks their files; it loads no Zarr and no array data, so listing a
large cache is quick.

    >>> from lazyphi import cache
    >>> for r in cache.list_results('results/'):
    ...     print(r)
    >>> cache.delete_results('results/', older_than=7 * 24 * 3600)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ._errors import ManifestDamaged, ResultNotFound
from .storage import ArraySpec, completion, delete_group, leftovers, read_manifest, remove_entry, result_groups

__all__ = ['Leftover', 'ResultInfo', 'ResultNotFound', 'delete_leftovers', 'delete_result', 'delete_results',
           'list_leftovers', 'list_results']


@dataclass(frozen=True)
class ResultInfo:
    """One result in a disk cache.

    Attributes:
        key: the result's deterministic key, also its directory name.
        path: the result's directory.
        class_name: `module:QualName` of the class whose properties it holds (None if the manifest is damaged).
        properties: names of the stored arrays (property outputs).
        nbytes: total size of its files.
        created: when it was first prepared (UTC).
        age_seconds: seconds since `created`, when listed.
        complete: every chunk of every array is written.
        completion: fraction of complete chunks per array.
        error: why the manifest cannot be read, or None. Such a result can only be deleted.
        config: the instance's config values (by their repr) the result was computed with: results that differ
            only in config values tell apart by these. Empty for results written before lazyphi recorded them.
        arrays: each stored array's shape, dtype and chunking in words, like
            `(sampleᵇ=64, xˢ=128) float32, chunks of 4 along 'sample'` (empty when the manifest is damaged).
    """

    key: str
    path: str
    class_name: str | None
    properties: tuple[str, ...]
    nbytes: int
    created: datetime
    age_seconds: float
    complete: bool
    completion: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        if self.error:
            state = f'damaged: {self.error}'
        elif self.complete:
            state = 'complete'
        else:
            state = 'incomplete (' + ', '.join(f'{n} {f:.0%}' for n, f in self.completion.items()) + ')'
        config = f'  ({self.config_text})' if self.config else ''
        return (f'{self.key}  {self.class_name or "?"}{config}  [{", ".join(self.properties)}]  {_size(self.nbytes)}  '
                f'{_age(self.age_seconds)} old  {state}')

    @property
    def config_text(self) -> str:
        """The config values as `name=value, ...`."""
        return ', '.join(f'{name}={value}' for name, value in self.config.items())


def list_results(cache_dir: str) -> list[ResultInfo]:
    """Every result in `cache_dir`, oldest first; a directory without results gives an empty list.

    Raises:
        FileNotFoundError: `cache_dir` does not exist.
    """
    now = datetime.now(UTC)
    infos = [_info(key, path, now) for key, path in result_groups(cache_dir).items()]
    return sorted(infos, key=lambda r: (r.created, r.key))


def delete_result(cache_dir: str, key: str) -> None:
    """Delete the result `key` from `cache_dir`.

    Raises:
        ResultNotFound: (a KeyError) no such result; the message lists the keys there.
        FileNotFoundError: `cache_dir` does not exist.
    """
    groups = result_groups(cache_dir)
    if key not in groups:
        raise _not_found(cache_dir, key, groups)
    delete_group(groups[key])


def delete_results(cache_dir: str, keys: Iterable[str] | None = None,
                   older_than: float | timedelta | None = None) -> list[str]:
    """Delete the results `keys` (all when None) of `cache_dir` that are older than `older_than` (if given).

    Args:
        cache_dir: the cache directory.
        keys: the keys to delete; every one must exist (checked before anything is deleted).
        older_than: seconds, or a `timedelta`; only results created longer ago than this go.

    Returns:
        The keys deleted.

    Raises:
        ResultNotFound: (a KeyError) a key is not in `cache_dir`.
        FileNotFoundError: `cache_dir` does not exist.
    """
    groups = result_groups(cache_dir)
    if isinstance(keys, str):
        keys = [keys]
    keys = None if keys is None else list(keys) if isinstance(keys, Iterable) else keys
    if keys is not None and not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
        raise TypeError(f'delete_results(keys=...) takes result keys (str) or None for all, got {keys!r:.100}')
    limit = None if older_than is None else _seconds(older_than)
    chosen = list(groups) if keys is None else list(dict.fromkeys(keys))
    for key in chosen:
        if key not in groups:
            raise _not_found(cache_dir, key, groups)
    if limit is not None:
        now = datetime.now(UTC)
        chosen = [k for k in chosen if (now - _created(groups[k])[0]).total_seconds() > limit]
    for key in chosen:
        delete_group(groups[key])
    return chosen


@dataclass(frozen=True)
class Leftover:
    """A hidden entry of a cache directory that a writer leaves while it works, and a killed one for good.

    Attributes:
        path: the entry: `.<name>.<hex>.partial`, a result or save being built or a result being deleted, or
            `.<name>.<hex>.replaced`, an old save moved away by `save(overwrite=True)`.
        nbytes: total size of its files.
        removable: whether deleting it now is safe: its writer is gone (or it is untouched for a minute), and
            an old save is replaced by the save now at its name.
    """

    path: str
    nbytes: int
    removable: bool


def list_leftovers(cache_dir: str) -> list[Leftover]:
    """What writers left in `cache_dir` besides results (see `Leftover`), by path.

    Raises:
        FileNotFoundError: `cache_dir` does not exist.
    """
    result_groups(cache_dir)  # the errors for a missing directory or a file
    return [Leftover(path, _tree_bytes(path), removable) for path, removable in sorted(leftovers(cache_dir).items())]


def delete_leftovers(cache_dir: str, paths: Iterable[str] | None = None) -> list[str]:
    """Delete the leftovers of `cache_dir` that are safe to delete now (`Leftover.removable`); returns their paths.

    Args:
        paths: only these of them (as `list_leftovers` gives them); None: all.
    """
    chosen = None if paths is None else set(paths)
    removed = []
    for leftover in list_leftovers(cache_dir):
        if leftover.removable and (chosen is None or leftover.path in chosen):
            remove_entry(leftover.path)
            removed.append(leftover.path)
    return removed


def _seconds(older_than) -> float:
    """`older_than` as seconds; TypeError / ValueError unless it is a number or timedelta >= 0."""
    if isinstance(older_than, timedelta):
        seconds = older_than.total_seconds()
    elif isinstance(older_than, int | float) and not isinstance(older_than, bool):
        seconds = float(older_than)
    else:
        raise TypeError(f'delete_results(older_than=...) takes seconds (int or float) or a timedelta, got '
                        f'{older_than!r:.100}')
    if not seconds >= 0 or seconds == float('inf'):
        raise ValueError(f'delete_results(older_than=...) takes a finite age >= 0, got {older_than!r}')
    return seconds


def _not_found(cache_dir: str, key: str, groups: dict) -> ResultNotFound:
    return ResultNotFound(f'No result {key!r} in cache_dir {cache_dir!r}; the results there are {sorted(groups)}')


def _created(group: str) -> tuple[datetime, dict | None, str | None]:
    """(creation time, manifest, error): the manifest's time, or the manifest file's when it is damaged."""
    try:
        manifest = read_manifest(group)
    except ManifestDamaged as err:
        stamp = os.stat(os.path.join(group, 'lazyphi.json')).st_mtime
        return datetime.fromtimestamp(stamp, UTC), None, str(err)
    return datetime.fromisoformat(manifest['created']), manifest, None


def _info(key: str, path: str, now: datetime) -> ResultInfo:
    created, manifest, error = _created(path)
    age = (now - created).total_seconds()
    size = _tree_bytes(path)
    if manifest is None:
        return ResultInfo(key, path, None, (), size, created, age, False, {}, error)
    fractions = completion(path, manifest)
    config = manifest.get('config')
    arrays = {}
    for name, entry in manifest['arrays'].items():
        spec = ArraySpec.from_manifest(entry)
        arrays[name] = f'{spec.shape} {spec.dtype}, chunks of {spec.chunk} along {spec.block_dim!r}'
    return ResultInfo(key, path, manifest['class'], tuple(manifest['arrays']), size, created, age,
                      all(f == 1.0 for f in fractions.values()), fractions,
                      config={str(k): str(v) for k, v in config.items()} if isinstance(config, dict) else {},
                      arrays=arrays)


def _tree_bytes(path: str) -> int:
    if os.path.islink(path) or not os.path.isdir(path):
        return os.lstat(path).st_size
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # a temporary file renamed meanwhile
                continue
    return total


def _size(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if value < 1024 or unit == 'TiB':
            break
        value /= 1024
    return f'{nbytes} B' if unit == 'B' else f'{value:.1f} {unit}'


def _age(seconds: float) -> str:
    for unit, length in (('d', 86400), ('h', 3600), ('min', 60)):
        if seconds >= length:
            return f'{seconds / length:.1f} {unit}'
    return f'{seconds:.0f} s'
