"""The `lazyphi` command: `info` on the installation, `cache ls/du/rm` on a cache directory, and `run`.

    $ lazyphi info
    $ lazyphi cache ls results/
    $ lazyphi cache rm results/ --older-than 7d --yes
    $ lazyphi run sim:make --set n=64 --properties energy --dims batch --cache-dir results/

Exit status: 0 on success, 1 when the work failed or was not confirmed, 2 for bad arguments (an unknown
command, module, factory, factory parameter, property or cache key, or a `--set` value of a type its
parameter does not want), 130 after Ctrl-C and 143 after SIGTERM (what SLURM sends at a job's time limit):
`run` then stops its workers and keeps the blocks already written, so that running it again resumes.
Importing this module loads neither Dask nor Zarr nor an array library beyond what `import lazyphi` loads;
each command imports what it needs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import platform
import re
import signal
import sys
import threading
import traceback
import types
import typing
from collections.abc import Sequence

import lazyphi

from . import parallel, storage
from .cache import ResultInfo, _age, _size, delete_leftovers, delete_results, list_leftovers, list_results
from .dataclasses import cached_property_names

LOG = logging.getLogger('lazyphi.cli')
FAILED, USAGE = 1, 2
DIM_TYPES = ('batch', 'spatial', 'instance', 'channel', 'dual')
SCHEDULERS = ('threads', 'processes', 'sync')
ARRAY_LIBRARIES = {'numpy': 'numpy', 'torch': 'torch', 'jax': 'jax', 'tensorflow': 'tensorflow'}  # module: backend
_DURATION = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$')
_SECONDS = {'s': 1, 'm': 60, 'min': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400}


class UsageError(Exception):
    """A bad argument found after parsing (unknown module, factory or cache key): exit status 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised in the main thread, so the run stops as on Ctrl-C (workers end, written blocks stay)."""


TERMINATED = 128 + signal.SIGTERM  # the exit status of a process ended by SIGTERM, as shells report it


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `lazyphi` command with `argv` (default: `sys.argv[1:]`); return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    logger = logging.getLogger('lazyphi')
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter('%(levelname)s %(name)s: %(message)s'))
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        return args.command(args)
    except UsageError as err:
        print(f'lazyphi {args.name}: {err}', file=sys.stderr)
        return USAGE
    except Terminated:  # end now: blocks still running in threads are abandoned, as SIGKILL would
        print(f'lazyphi {args.name}: terminated (SIGTERM); blocks already written stay in the cache', file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(TERMINATED)
    except KeyboardInterrupt:
        print(f'lazyphi {args.name}: interrupted', file=sys.stderr)
        return 130
    except Exception as err:
        if args.verbose:
            traceback.print_exc()
        print(f'lazyphi {args.name}: {type(err).__name__}: {_first_line(err)}', file=sys.stderr)
        return FAILED
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


# --- info ---------------------------------------------------------------------------------------------

def info(args: argparse.Namespace) -> int:
    """Print versions of lazyphi, Python and the libraries it uses, and the devices of each array library."""
    print(f'lazyphi      {lazyphi.__version__}')
    print(f'Python       {platform.python_version()} ({sys.executable})')
    print(f'platform     {platform.platform()}')
    print(f'CPUs         {os.cpu_count()}')
    print('array libraries:')
    for module, backend_name in ARRAY_LIBRARIES.items():
        for line in _library_report(module, backend_name):
            print(f'  {line}')
    print('engine:')
    for name, dist in (('Dask', 'dask'), ('distributed', 'distributed'), ('Zarr', 'zarr')):
        print(f'  {name:<12} {_installed_version(dist) or "not installed"}')
    return 0


def _library_report(module: str, backend_name: str) -> list[str]:
    """Lines on one array library: its version, then its lazyphi backend's devices."""
    if importlib.util.find_spec(module) is None:
        return [f'{module:<12} not installed']
    try:
        library = importlib.import_module(module)
        devices = lazyphi.backend.backend_by_name(backend_name).list_devices()
    except Exception as err:  # a broken installation is reported, not fatal to `info`
        LOG.debug('Reporting %s failed', module, exc_info=True)
        return [f'{module:<12} installed, but unusable: {type(err).__name__}: {_first_line(err)}']
    lines = [f'{module:<12} {getattr(library, "__version__", "?")}']
    for d in devices:
        memory = _size(d.memory) if d.memory > 0 else 'memory unknown'
        lines.append(f'  {d.device_type} {d.name!r}, {memory}')
    return lines


def _installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- cache --------------------------------------------------------------------------------------------

def cache_ls(args: argparse.Namespace) -> int:
    """List the results in a cache directory: key, class, config values, properties, size, age, completeness."""
    results = _results(args.path)
    if not results:
        print(f'No results in {args.path}')
        return 0
    rows = [('KEY', 'CLASS', 'CONFIG', 'PROPERTIES', 'SIZE', 'AGE', 'STATE')]
    rows += [(r.key, r.class_name or '?', r.config_text or '-', ','.join(r.properties), _size(r.nbytes),
              _age(r.age_seconds), _state(r)) for r in results]
    _print_table(rows)
    if args.verbose:  # each result in full: where it lies, when it was made, and each array
        for r in results:
            print(f'\n{r.key}\n  path     {os.path.abspath(r.path)}\n'
                  f'  created  {r.created:%Y-%m-%d %H:%M:%S} UTC')
            if r.error:
                print(f'  damaged  {r.error}')
            for name, text in r.arrays.items():
                print(f'  {name}: {text}; {r.completion.get(name, 0.0):.0%} of its chunks written')
    return 0


def cache_du(args: argparse.Namespace) -> int:
    """Print the size of each result in a cache directory, of what killed writers left there, and their total."""
    results = _results(args.path)
    for r in results:
        print(f'{_size(r.nbytes):>10}  {r.key}')
    left = list_leftovers(args.path)
    if left:
        removable = sum(x.removable for x in left)
        print(f'{_size(sum(x.nbytes for x in left)):>10}  {len(left)} hidden leftover{"" if len(left) == 1 else "s"} '
              f'of interrupted writes ({removable} no longer in use, which `lazyphi cache rm` deletes)')
    total = sum(r.nbytes for r in results) + sum(x.nbytes for x in left)
    print(f'{_size(total):>10}  total ({len(results)} result{"" if len(results) == 1 else "s"} in {args.path})')
    return 0


def cache_rm(args: argparse.Namespace) -> int:
    """Delete results from a cache directory, after confirmation on stdin unless `--yes`."""
    results = _results(args.path)
    by_key = {r.key: r for r in results}
    unknown = [k for k in args.keys if k not in by_key]
    if unknown:
        raise UsageError(f'no result {", ".join(map(repr, unknown))} in {args.path}; the results there are '
                         f'{sorted(by_key)}')
    chosen = [by_key[k] for k in dict.fromkeys(args.keys)] if args.keys else results
    if args.older_than is not None:
        chosen = [r for r in chosen if r.age_seconds > args.older_than]
    left = [x for x in list_leftovers(args.path) if x.removable]  # of no result: every rm deletes them
    if not chosen and not left:
        print('Nothing to delete.')
        return 0
    for r in chosen:
        print(f'  {r.key}  {r.class_name or "?"}  {_size(r.nbytes)}  {_age(r.age_seconds)} old')
    for x in left:
        print(f'  {os.path.basename(x.path)}  (left by an interrupted write)  {_size(x.nbytes)}')
    summary = ' and '.join(
        ([f'{len(chosen)} result{"" if len(chosen) == 1 else "s"}'] if chosen else [])
        + ([f'{len(left)} leftover{"" if len(left) == 1 else "s"}'] if left else []))
    size = sum(r.nbytes for r in chosen) + sum(x.nbytes for x in left)
    if not args.yes and not _confirm(f'Delete {summary} ({_size(size)}) from {args.path}? [y/N] '):
        return FAILED
    deleted = delete_results(args.path, [r.key for r in chosen])
    removed = delete_leftovers(args.path, [x.path for x in left])
    print(f'Deleted {len(deleted)} result{"" if len(deleted) == 1 else "s"}'
          + (f' and {len(removed)} leftover{"" if len(removed) == 1 else "s"}.' if removed else '.'))
    return 0


def _confirm(question: str) -> bool:
    """Ask on stdin; no stdin or end of input counts as no, with a hint at `--yes`."""
    print(question, end='', flush=True)
    answer = sys.stdin.readline() if sys.stdin is not None else ''
    if not answer:
        print('\nlazyphi cache rm: no answer (stdin is closed); nothing deleted. Pass --yes to delete without asking.',
              file=sys.stderr)
        return False
    if answer.strip().lower() in ('y', 'yes'):
        return True
    print('Aborted; nothing deleted.', file=sys.stderr)
    return False


def _results(path: str) -> list[ResultInfo]:
    if not os.path.isdir(path):
        raise UsageError(f'no cache directory {path!r}')
    return list_results(path)


def _state(r: ResultInfo) -> str:
    if r.error:
        return f'damaged: {r.error}'
    if r.complete:
        return 'complete'
    return ', '.join(f'{name} {fraction:.0%}' for name, fraction in r.completion.items())


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print('  '.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def workers(text: str) -> int:
    """`--max-workers`: a whole number of at least 1."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f'expected a whole number of workers, at least 1, got {text!r} (to run '
                                         f'everything in this process, one block at a time: --scheduler sync)')
    return count


def duration(text: str) -> float:
    """Seconds in a duration like `7d`, `12h`, `30m`, `45s` or `2w`."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f'{text!r} is not a duration; write a number and a unit, like 7d, 12h, 30m')
    return float(match.group(1)) * _SECONDS[match.group(2)]


# --- run ----------------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    """Build an instance with a factory, compute properties with `parallel_compute`, summarise the results."""
    factory = _factory(args.target)
    values = dict(args.set or [])
    check_arguments(factory, args.target, values)
    LOG.debug('Calling %s(%s)', args.target, ', '.join(f'{k}={v!r}' for k, v in values.items()))
    instance = factory(**values)
    properties = [p.strip() for p in args.properties.split(',') if p.strip()]
    _check_properties(instance, properties)
    dims = getattr(lazyphi.math, args.dims) if args.dims in DIM_TYPES else args.dims
    missing = parallel.missing_dims(dims, lazyphi.math.shape(instance))
    if missing:
        raise UsageError(f'--dims {args.dims} names dims the instance lacks: {", ".join(missing)}; its dims are '
                         f'{", ".join(lazyphi.math.shape(instance).names) or "none"}')
    memory_limit = _bytes(args.memory_limit, '--memory-limit') if args.memory_limit is not None else None
    options = dict(max_workers=args.max_workers, memory_limit=memory_limit, cache_dir=args.cache_dir,
                   compressor=args.compressor)
    if args.chunk_bytes is not None:
        options['chunk_bytes'] = _bytes(args.chunk_bytes, '--chunk-bytes')
    if args.cache_key is not None:
        options['cache_key'] = args.cache_key
    if args.cache_dir is not None:
        _make_cache_dir(args.cache_dir)
    scheduler, client = _scheduler(args.scheduler)
    try:
        with _stopped_by_sigterm():
            print(parallel.plan(instance, properties, dims, **options, scheduler=scheduler), flush=True)
            done = parallel.parallel_compute(instance, properties, dims, **options, scheduler=scheduler,
                                             progress=not args.no_progress)
    finally:
        if client is not None:
            client.close()
    for name in properties:
        print(f'{name}: {_describe(instance.__dict__.get(name))}')
    print(f'Done in {done.elapsed:.2f} s{f"; {done.reuse}" if done.reuse else ""}.')
    return 0


@contextlib.contextmanager
def _stopped_by_sigterm():
    """While inside, SIGTERM raises `Terminated` in the main thread (elsewhere signals cannot be handled).

    Without it SIGTERM would end this process at once: blocks running in its threads are lost alike, but a
    cluster would go on with the run's queued tasks until it noticed the client was gone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise Terminated()
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _factory(target: str):
    """The callable named by `module:factory`, importing the module with the current directory on sys.path."""
    module_name, _, attribute = target.partition(':')
    if not module_name or not attribute:
        raise UsageError(f'expected module:factory (like sim:make), got {target!r}')
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UsageError(f'cannot import module {module_name!r}: {err}') from err
    factory = module
    for part in attribute.split('.'):
        try:
            factory = getattr(factory, part)
        except AttributeError:
            raise UsageError(f'module {module_name!r} has no {attribute!r}') from None
    if not callable(factory):
        raise UsageError(f'{target} is a {type(factory).__name__}, not a callable factory')
    return factory


def check_arguments(factory, target: str, values: dict) -> None:
    """Raise UsageError for a `--set` value the factory does not take, or of a type its parameter does not want.

    The wanted type is the parameter's annotation, else the type of its default (a float parameter takes
    ints too); parameters annotated with other types than Python literals' are not checked.
    """
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a callable without a signature (some builtins): nothing to check against
        return
    by_keyword = {n: p for n, p in parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    hints = _type_hints(factory)
    for name, value in values.items():
        parameter = by_keyword.get(name)
        if parameter is None:
            if takes_any:
                continue
            raise UsageError(f'--set {name}=...: {target} has no parameter {name!r}; its parameters are '
                             f'{", ".join(by_keyword) or "none"}')
        wanted, why = hints.get(name), 'annotation'
        if wanted is None and parameter.default is not parameter.empty and parameter.default is not None:
            wanted, why = type(parameter.default), f'default {parameter.default!r}'
        if wanted is not None and _mismatch(value, wanted):
            hint = (f'to pass the text, quote it: --set "{name}={str(value)!r}"' if wanted is str else
                    f'values are Python literals, e.g. --set {name}={_example(wanted)}')
            raise UsageError(f'--set {name}={value!r}: parameter {name!r} of {target} wants {_type_name(wanted)} '
                             f'(from its {why}), got {type(value).__name__}; {hint}')


_LITERAL_TYPES = (bool, int, float, complex, str, bytes, tuple, list, dict, set, type(None))


def _type_hints(factory) -> dict:
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return typing.get_type_hints(target)
    except (NameError, TypeError, AttributeError, SyntaxError):  # annotations naming what cannot be resolved
        return {}


def _mismatch(value, wanted) -> bool:
    """Whether `value` (a literal or a str) certainly is not of the type `wanted`; unknown types never mismatch."""
    origin = typing.get_origin(wanted)
    if origin in (typing.Union, types.UnionType):
        return all(_mismatch(value, option) for option in typing.get_args(wanted))
    if origin is typing.Literal:
        return value not in typing.get_args(wanted)
    wanted = origin or wanted
    if wanted is float:
        return not isinstance(value, (int, float)) or isinstance(value, bool)
    if wanted is complex:
        return not isinstance(value, (int, float, complex)) or isinstance(value, bool)
    if wanted is int:
        return not isinstance(value, int) or isinstance(value, bool)
    return wanted in _LITERAL_TYPES and not isinstance(value, wanted)


def _type_name(wanted) -> str:
    return getattr(wanted, '__name__', None) if isinstance(wanted, type) else str(wanted).replace('typing.', '')


def _example(wanted) -> str:
    examples = {int: '64', float: '0.5', complex: '1+2j', bool: 'True', str: 'text', list: '[1,2]', tuple: '(1,2)',
                dict: "{'a':1}"}
    return examples.get(typing.get_origin(wanted) or wanted, '...')


def _check_properties(instance, properties: list) -> None:
    """Raise UsageError naming the requested properties the instance's class lacks, and those it has."""
    cls = type(instance)
    known = cached_property_names(cls)
    unknown = [p for p in properties if p not in known]
    if unknown or not properties:
        missing = f'no cached or parallel property {", ".join(map(repr, unknown))}' if unknown else 'nothing to compute'
        raise UsageError(f'--properties: {cls.__qualname__} has {missing}; its properties are '
                         f'{", ".join(known) or "none"}')


def _make_cache_dir(path: str) -> None:
    """Create `--cache-dir` if missing, so that a path that cannot hold results stops the run before its plan."""
    try:
        storage.check_cache_dir(path, "--cache-dir")
        os.makedirs(path, exist_ok=True)
    except (ValueError, OSError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UsageError(f'--cache-dir {path!r} cannot hold results: {reason}') from err
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f'--cache-dir {path!r} cannot hold results: this user may not write there')


def _scheduler(name: str | None):
    """(scheduler for parallel_compute, client to close afterwards); an address connects a distributed client."""
    if name is None or name in SCHEDULERS:
        return name, None
    if '://' in name or re.fullmatch(r'[\w.-]+:\d+', name):
        from distributed import Client

        LOG.debug('Connecting to the Dask scheduler at %s', name)
        client = Client(name)
        return client, client
    raise UsageError(f'--scheduler must be one of {", ".join(SCHEDULERS)} or an address like tcp://host:8786, '
                     f'got {name!r}')


def _bytes(text: str, option: str) -> int:
    from dask.utils import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as err:
        raise UsageError(f'{option}: {err}') from err


def _describe(value) -> str:
    """One line on a computed value: shape, dtype and whether it lies in memory or on disk."""
    if value is None:
        return 'not stored in the instance'
    if not isinstance(value, lazyphi.math.Tensor):
        return f'{type(value).__name__}, in memory'
    where = 'on disk' if isinstance(value, storage.DiskTensor) else 'in memory'
    return f'{value.shape}, {value.dtype}, {where}'


def assignment(text: str) -> tuple[str, object]:
    """`name=value` as (name, value), the value a Python literal where it parses as one, else the string."""
    name, equals, raw = text.partition('=')
    if not equals or not name.strip().isidentifier():
        raise argparse.ArgumentTypeError(f'expected name=value, got {text!r}')
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = raw
    return name.strip(), value


# --- parser -------------------------------------------------------------------------------------------

def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else '(no message)'


def _parser() -> argparse.ArgumentParser:
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument('-v', '--verbose', action='store_true', default=argparse.SUPPRESS,
                         help='log at DEBUG level and show full tracebacks')
    parser = argparse.ArgumentParser(prog='lazyphi', description='Inspect lazyphi, its disk caches, and run jobs.')
    parser.add_argument('-v', '--verbose', action='store_true', help='log at DEBUG level and show full tracebacks')
    parser.add_argument('--version', action='version', version=f'lazyphi {lazyphi.__version__}')
    commands = parser.add_subparsers(title='commands', required=True, metavar='COMMAND')

    p = commands.add_parser('info', parents=[verbose], help='versions, array libraries and their devices')
    p.set_defaults(command=info, name='info')

    cache = commands.add_parser('cache', help='list, measure or delete results in a cache directory')
    actions = cache.add_subparsers(title='actions', required=True, metavar='ACTION')
    p = actions.add_parser('ls', parents=[verbose], help='list the results (-v: each one in full)')
    p.add_argument('path', help='the cache directory (cache_dir of parallel_compute)')
    p.set_defaults(command=cache_ls, name='cache ls')
    p = actions.add_parser('du', parents=[verbose], help='total size and size per result')
    p.add_argument('path', help='the cache directory')
    p.set_defaults(command=cache_du, name='cache du')
    p = actions.add_parser('rm', parents=[verbose], help='delete results (all, or KEYs), after confirmation')
    p.add_argument('path', help='the cache directory')
    p.add_argument('keys', nargs='*', metavar='KEY', help='results to delete (default: all)')
    p.add_argument('--older-than', type=duration, metavar='DURATION',
                   help='only results created longer ago than this, like 7d, 12h, 30m')
    p.add_argument('-y', '--yes', action='store_true', help='delete without asking')
    p.set_defaults(command=cache_rm, name='cache rm')

    p = commands.add_parser('run', parents=[verbose], help='compute properties of an instance with parallel_compute')
    p.add_argument('target', metavar='module:factory', help='a callable returning the instance, like sim:make')
    p.add_argument('--set', action='append', type=assignment, metavar='NAME=VALUE',
                   help='a keyword argument of the factory; VALUE is a Python literal, else a string (repeatable)')
    p.add_argument('--properties', required=True, metavar='A,B', help='the properties to compute, comma-separated')
    p.add_argument('--dims', default='batch', metavar='DIMS',
                   help=f'parallel dims: comma-separated names, or one of {", ".join(DIM_TYPES)} (default: batch)')
    p.add_argument('--scheduler', metavar='ADDRESS|' + '|'.join(SCHEDULERS),
                   help='a distributed scheduler address (tcp://host:8786) or a local scheduler '
                        "(default: Dask's configured scheduler, dask.config.set(scheduler=...), else threads)")
    p.add_argument('--cache-dir', metavar='DIR', help='write results to this disk cache')
    p.add_argument('--max-workers', type=workers, metavar='N',
                   help='number of parallel workers, at least 1 (default: one per CPU, or the cluster\'s threads)')
    p.add_argument('--memory-limit', metavar='BYTES',
                   help='bytes of results to hold in memory, like 4e9 or 4GiB; the rest goes to --cache-dir')
    p.add_argument('--chunk-bytes', metavar='BYTES', help='size of one disk-cache chunk, like 32MiB (default 16MiB)')
    p.add_argument('--compressor', choices=['zstd'], help='compress new disk-cache results (default: uncompressed)')
    p.add_argument('--cache-key', metavar='TEXT',
                   help='made part of the results\' key: what they depend on that the key cannot see, like an '
                        'environment variable or a data file\'s version')
    p.add_argument('--no-progress', action='store_true', help='show no progress bar')
    p.set_defaults(command=run, name='run')
    return parser
