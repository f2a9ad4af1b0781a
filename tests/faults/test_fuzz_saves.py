"""Fuzzing save loading: random mutations of a valid save never give values that differ from the saved ones.

Each example copies one valid save, changes one thing in it (a value anywhere in the manifest or in an array's
zarr.json, a chunk file's bytes, a chunk file, a completion record), loads it whole and reads every tensor.
It must give back exactly what was saved, or raise an OSError or ValueError subclass. A second test signs a
mutated manifest with a valid checksum, as a crafted file would be: then the tree may differ from the saved one
(the manifest is its only record), but every tensor must hold exactly the values stored in the array it names.
"""

import dataclasses
import enum
import itertools
import json
import os
import shutil
import warnings

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyphi
from lazyphi import math
from lazyphi.backend import DType
from lazyphi.math import Tensor, batch, channel, spatial
from lazyphi.storage import DiskTensor, _save
from lazyphi.storage._results import manifest_checksum


class Kind(enum.Enum):
    A = 'a'
    B = 'b'


@dataclasses.dataclass(frozen=True)
class Sample:
    field: Tensor
    labels: Tensor
    flags: Tensor
    scalar: Tensor
    kind: Kind = Kind.A
    window: slice | None = None
    grid: math.Shape | None = None
    z: complex = 1 + 2j
    big: float = float('inf')
    dtype: DType | None = None
    counts: tuple = (1, 2.5, 'three', None)


def _tree():
    rng = np.random.default_rng(5)
    field = math.tensor(rng.standard_normal((6, 5, 3)).astype(np.float32), batch(b=6), spatial(x=5), channel(c='r,g,b'))
    labels = math.tensor(rng.integers(-99, 99, (7, 2)), spatial(i=7), channel(k=2))
    flags = math.tensor(rng.random(9) > 0.5, batch(n=9))
    sample = Sample(field, labels, flags, math.tensor(np.float64(2.5)), grid=spatial(x=4), dtype=DType(float, 64),
                    window=slice(1, None, 2))
    return {'sample': sample, 'extra': [math.tensor(np.arange(4, dtype=np.int16), spatial('y')), {'note': 'n'}]}


TREE = _tree()


@pytest.fixture(scope='module')
def template(tmp_path_factory):
    folder = tmp_path_factory.mktemp('fuzz')
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_save, 'CHUNK_BYTES', 64)  # several chunks per tensor
        lazyphi.save(TREE, folder / 'template')
    return folder


_COPIES = itertools.count()


def _copy(template) -> str:
    target = str(template / f'copy{next(_COPIES)}')  # a new path each time: nothing cached from another example
    shutil.copytree(template / 'template', target, symlinks=True)
    return target


def _files(save: str, test) -> list:
    return sorted(os.path.join(root, n) for root, _, names in os.walk(save) for n in names if test(root, n))


def _paths(doc, prefix=()):
    """Every location in a JSON document, as a tuple of keys and indices."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 40, 2 ** 40)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
                    | st.sampled_from(['float64', 'int32', 'bool', 'spatial', 'batch', 'x', 'c']),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=5)


def _nudged(data, value):
    """A value near `value`: numbers moved, strings changed, lists shortened, lengthened or reordered."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return data.draw(st.sampled_from([value + 1, value - 1, value * 2, -value, value // 2, 0, 10 ** 9]))
    if isinstance(value, float):
        return data.draw(st.sampled_from([value + 1, value * 2, -value, 0.0]))
    if isinstance(value, str):
        return data.draw(st.sampled_from([value + 'x', value[:-1], value.upper(), '', '../' + value]))
    if isinstance(value, list) and value:
        return data.draw(st.sampled_from([value[:-1], value + value[-1:], value[::-1], value[1:] + value[:1]]))
    return data.draw(JSON)


def _mutate_json(data, file: str) -> None:
    with open(file) as f:
        doc = json.load(f)
    path = data.draw(st.sampled_from(list(_paths(doc))), label='where')
    how = data.draw(st.sampled_from(['replace', 'delete', 'nudge']), label='how')
    if not path:
        doc = data.draw(JSON) if how == 'replace' else _nudged(data, doc)
    else:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if how == 'delete':
            del parent[key]
        else:
            parent[key] = data.draw(JSON) if how == 'replace' else _nudged(data, parent[key])
    with open(file, 'w') as f:
        json.dump(doc, f)


def _mutate(data, save: str) -> str:
    """Change one thing in `save`; return what was changed."""
    target = data.draw(st.sampled_from(['manifest', 'zarr.json', 'chunk bytes', 'chunk file', 'record']), label='in')
    if target == 'manifest':
        _mutate_json(data, os.path.join(save, 'lazyphi.json'))
    elif target == 'zarr.json':
        arrays = _files(save, lambda root, n: n == 'zarr.json' and os.path.exists(root + '.done'))
        _mutate_json(data, data.draw(st.sampled_from(arrays)))
    elif target == 'record':
        os.remove(data.draw(st.sampled_from(_files(save, lambda root, n: root.endswith('.done')))))
    else:
        chunk = data.draw(st.sampled_from(_files(save, lambda root, n: n == 'c' or n.startswith('c.'))))
        size = os.path.getsize(chunk)
        how = data.draw(st.sampled_from(['flip', 'truncate', 'append', 'delete', 'zero']), label='how')
        if target == 'chunk file' or how == 'delete':
            os.remove(chunk)
        elif how == 'truncate':
            os.truncate(chunk, data.draw(st.integers(0, size - 1)))
        elif how == 'append':
            with open(chunk, 'ab') as f:
                f.write(b'\0' * data.draw(st.integers(1, 8)))
        else:
            position = data.draw(st.integers(0, size - 1))
            with open(chunk, 'r+b') as f:
                f.seek(position)
                old = f.read(1)[0]
                f.seek(position)
                f.write(bytes([0 if how == 'zero' and old else old ^ (1 << data.draw(st.integers(0, 7)))]))
    return target


def _same(a, b) -> bool:
    """Whether two trees hold equal values: tensors by shape (names, sizes, types, labels), dtype and values."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape
                and a.shape.labels == b.shape.labels and a.shape.types == b.shape.types and a.dtype == b.dtype
                and np.array_equal(a.numpy(a.shape.names), b.numpy(a.shape.names)))
    if isinstance(a, DType):  # a dataclass with a cache field: compared as a value
        return type(b) is DType and a == b
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _tensors(tree):
    if isinstance(tree, Tensor):
        yield tree
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from _tensors(v)
    elif isinstance(tree, list | tuple):
        for v in tree:
            yield from _tensors(v)
    elif dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        for f in dataclasses.fields(tree):
            yield from _tensors(getattr(tree, f.name, None))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_save_loads_right_or_raises(template, data):
    save = _copy(template)
    _mutate(data, save)
    try:
        for lazy in (True, False):
            loaded = lazyphi.load(save, lazy=lazy)
            assert _same(TREE, loaded), 'a mutated save loaded other values than were saved'
    except (OSError, ValueError):
        pass
    finally:
        shutil.rmtree(save)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_crafted_manifest_never_reads_other_values_than_stored(template, data):
    save = _copy(template)
    file = os.path.join(save, 'lazyphi.json')
    _mutate_json(data, file)
    with open(file) as f:
        manifest = json.load(f)
    if isinstance(manifest, dict):
        with open(file, 'w') as f:
            json.dump({**manifest, 'checksum': manifest_checksum(manifest)}, f)  # signed as lazyphi signs
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # unknown classes come back as dicts, with a warning
            loaded = lazyphi.load(save, lazy=True)
        for tensor in _tensors(loaded):
            if isinstance(tensor, DiskTensor):
                stored = zarr.open_array(tensor.path, mode='r')[...]
                np.testing.assert_array_equal(tensor.numpy(tensor.shape.names), stored)
    except (OSError, ValueError):
        pass
    except TypeError as err:  # a class the manifest names is no dataclass / enum or lacks its fields
        assert 'Cannot load' in str(err), err
    finally:
        shutil.rmtree(save)
