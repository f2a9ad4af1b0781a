"""Crafted manifests and hostile trees raise clear errors at once: no RecursionError, no hang.

Item 7 of issue #18: a manifest nested 5,000 levels deep raised RecursionError; sizes [10**9, 1] with
one-element chunks hung `load(lazy=False)` and `.numpy()`; saving a list that contains itself raised only
after 46-71 s.
"""

import dataclasses
import json
import os
import time

import numpy as np
import pytest

import lazyphi
from lazyphi import math
from lazyphi.math import spatial
from lazyphi.storage import ChunkMissing, ManifestDamaged
from lazyphi.storage._results import manifest_checksum
from lazyphi.storage._tagged import MAX_DEPTH


def _nested_node(depth: int) -> str:
    """The JSON text of a node: `depth` lists inside one another around a value (json.dumps would recurse)."""
    return '{"kind": "list", "group": "", "items": [' * depth + '{"kind": "value", "value": 1}' + ']}' * depth


def _nested_value(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def _write(path, root: str) -> None:
    os.makedirs(path)
    with open(os.path.join(path, 'lazyphi.json'), 'w') as f:
        f.write('{"format": 1, "type": "lazyphi.save", "id": "x", "created": "2025-01-01T00:00:00+00:00", '
                f'"root": {root}}}')


@pytest.mark.parametrize('depth', [MAX_DEPTH + 1, 900, 5_000, 100_000])
@pytest.mark.parametrize('where', ['tree', 'value'])
def test_a_deeply_nested_manifest_is_damaged(tmp_path, depth, where):
    value = '[' * depth + '1' + ']' * depth
    root = _nested_node(depth) if where == 'tree' else '{"kind": "value", "value": ' + value + '}'
    _write(tmp_path / 'deep', root)
    with pytest.raises(ManifestDamaged, match='nested'):
        lazyphi.load(tmp_path / 'deep')


def test_nesting_up_to_the_limit_loads(tmp_path):
    _write(tmp_path / 'deep', _nested_node(MAX_DEPTH - 1))
    loaded = lazyphi.load(tmp_path / 'deep')
    for _ in range(MAX_DEPTH - 1):
        (loaded,) = loaded
    assert loaded == 1


@pytest.mark.parametrize('lazy', [True, False])
def test_a_huge_array_with_tiny_chunks_fails_at_once(tmp_path, lazy):
    """Manifest and zarr.json agree on 10**9 one-element chunks, of which one exists."""
    lazyphi.save(math.tensor(np.arange(3.0), spatial('x')), tmp_path / 'save')
    manifest_file = tmp_path / 'save' / 'lazyphi.json'
    manifest = json.loads(manifest_file.read_text())
    tensor = manifest['root']
    tensor['dims'], tensor['types'], tensor['labels'] = ['x', 'y'], ['spatial', 'spatial'], [None, None]
    tensor['sizes'], tensor['chunks'] = [10 ** 9, 1], [1, 1]
    manifest['checksum'] = manifest_checksum(manifest)  # crafted: signed as lazyphi signs
    manifest_file.write_text(json.dumps(manifest))
    zarr_file = tmp_path / 'save' / 'tensor' / 'zarr.json'
    meta = json.loads(zarr_file.read_text())
    meta['shape'], meta['chunk_grid']['configuration']['chunk_shape'] = [10 ** 9, 1], [1, 1]
    meta['dimension_names'] = ['x', 'y']
    zarr_file.write_text(json.dumps(meta))
    started = time.monotonic()
    with pytest.raises(ChunkMissing, match=r'Chunk 0\.0 \(and 999999999 more'):
        loaded = lazyphi.load(tmp_path / 'save', lazy=lazy)
        loaded.numpy('x,y')
    assert time.monotonic() - started < 60  # it took hours


def test_saving_a_list_that_contains_itself_raises_at_once(tmp_path):
    loop = [math.tensor(1.0)]
    loop.append(loop)
    with pytest.raises(ValueError, match=r'obj\[1\] contains itself'):
        lazyphi.save(loop, tmp_path / 'loop')
    assert not os.path.exists(tmp_path / 'loop') and os.listdir(tmp_path) == []
    d = {'a': 1}
    d['b'] = {'c': d}
    with pytest.raises(ValueError, match=r"obj\['b'\]\['c'\] contains itself"):
        lazyphi.save(d, tmp_path / 'dict')


@dataclasses.dataclass
class Node:
    child: object
    config: list = dataclasses.field(default_factory=list)


def test_dataclasses_and_config_values_that_contain_themselves_raise(tmp_path):
    node = Node(None)
    node.child = {'again': node}
    with pytest.raises(ValueError, match=r"obj\.child\['again'\] contains itself"):
        lazyphi.save(node, tmp_path / 'node')
    config = []
    config.append(config)
    with pytest.raises(ValueError, match=r'obj\.config\[0\] contains itself'):
        lazyphi.save(Node(math.tensor(1.0), config), tmp_path / 'config')


def test_the_same_value_twice_is_no_cycle(tmp_path):
    shared = [1, 2]
    t = math.tensor(2.0)
    lazyphi.save({'a': shared, 'b': shared, 't': t, 'u': t}, tmp_path / 'twice')
    loaded = lazyphi.load(tmp_path / 'twice', lazy=False)
    assert loaded['a'] == loaded['b'] == [1, 2] and float(loaded['u']) == 2.0


@pytest.mark.parametrize('where', ['tree', 'value'])
def test_saving_a_tree_nested_too_deeply_raises(tmp_path, where):
    deep = _nested_value(MAX_DEPTH + 5)
    value = deep if where == 'tree' else Node(None, deep)
    with pytest.raises(ValueError, match=f'nested more than {MAX_DEPTH}'):
        lazyphi.save(value, tmp_path / 'deep')
    assert os.listdir(tmp_path) == []


def test_a_deeply_nested_cache_manifest_is_damaged(tmp_path):
    from lazyphi import cache

    (tmp_path / 'key').mkdir()
    (tmp_path / 'key' / 'lazyphi.json').write_text('{"arrays": ' + '[' * 100_000 + ']' * 100_000 + '}')
    (info,) = cache.list_results(str(tmp_path))
    assert not info.complete and 'cannot be read' in info.error


@pytest.mark.parametrize('dims', [None, 5, 'x'])
def test_a_scalar_with_malformed_dims_is_damaged(tmp_path, dims):
    """Found by the fuzz test: a 0-d tensor's dims were not checked to be a list."""
    lazyphi.save({'s': math.tensor(2.5)}, tmp_path / 'save')
    file = tmp_path / 'save' / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    manifest['root']['items']['s']['dims'] = dims
    manifest['checksum'] = manifest_checksum(manifest)
    file.write_text(json.dumps(manifest))
    with pytest.raises(ManifestDamaged, match='dims'):
        lazyphi.load(tmp_path / 'save')


@pytest.mark.parametrize('name', ['t', 's'])
@pytest.mark.parametrize('dtype', [None, 5, ['float32']])
def test_a_tensor_whose_dtype_is_no_name_is_damaged(tmp_path, name, dtype):
    """Found by the fuzz test: DType.as_dtype passes None through, which the entry check then did not catch."""
    lazyphi.save({'t': math.tensor(np.arange(3.0), spatial('x')), 's': math.tensor(1.5)}, tmp_path / 'save')
    file = tmp_path / 'save' / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    manifest['root']['items'][name]['dtype'] = dtype
    manifest['checksum'] = manifest_checksum(manifest)
    file.write_text(json.dumps(manifest))
    with pytest.raises(ManifestDamaged, match='dtype'):
        lazyphi.load(tmp_path / 'save')
