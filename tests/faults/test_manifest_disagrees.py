"""A manifest that disagrees with the Zarr metadata of its arrays raises ManifestDamaged naming both values.

Item 3 of issue #18: a manifest saying float64 for a float32 array returned bytes never read from disk; int32,
halved sizes, swapped dims and another chunk size returned wrong values too. Symbolic links inside a store
are not followed out of it (item 9).
"""

import json
import os

import numpy as np
import pytest

import lazyphi
from lazyphi import math
from lazyphi.backend import DType
from lazyphi.math import batch, spatial
from lazyphi.storage import ChunkDamaged, ManifestDamaged, disk_tensor
from lazyphi.storage._results import ArraySpec, manifest_checksum
from lazyphi.storage._write import prepare_result, write_block

VALUES = np.random.default_rng(2).standard_normal((8, 6, 4)).astype(np.float32)
SHAPE = batch(example=8) & spatial(x=6, y=4)


class Result:
    """The class whose property the test result stands for."""


def _entry_change(entry: dict, change: str) -> str:
    """Apply `change` to a manifest's array entry; return what the error must name."""
    if change == 'float64':
        entry['dtype'] = 'float64'
        return 'float64.*float32'
    if change == 'int32':
        entry['dtype'] = 'int32'
        return 'int32.*float32'
    if change == 'halved sizes':
        entry['sizes'] = [4, 6, 4]
        return r'\[4, 6, 4\].*\[8, 6, 4\]'
    if change == 'swapped dims':
        entry['dims'] = ['example', 'y', 'x']
        entry['sizes'] = [8, 4, 6]
        entry['chunks'] = [entry['chunks'][0], 4, 6]
        return r"\[8, 4, 6\].*\[8, 6, 4\]"
    if change == 'renamed dims':
        entry['dims'] = ['example', 'y', 'x']
        return r"\['example', 'y', 'x'\].*\['example', 'x', 'y'\]"
    entry['chunks'] = [4, 6, 4]
    return r'\[4, 6, 4\].*\[2, 6, 4\]'


CHANGES = ['float64', 'int32', 'halved sizes', 'swapped dims', 'renamed dims', 'chunk size']


@pytest.mark.parametrize('compressor', [None, 'zstd'])
@pytest.mark.parametrize('change', CHANGES)
def test_a_cache_manifest_disagreeing_with_zarr_raises(tmp_path, change, compressor):
    spec = ArraySpec(SHAPE, DType(float, 32), 'numpy', 'example', 2, compressor)
    group = prepare_result(str(tmp_path), 'key', Result, {'values': spec})
    write_block(group, 'values', math.tensor(VALUES, SHAPE), 'example', 0, 8)
    file = os.path.join(group, 'lazyphi.json')
    with open(file) as f:
        manifest = json.load(f)
    named = _entry_change(manifest['arrays']['values'], change)
    with open(file, 'w') as f:
        json.dump({**manifest, 'checksum': manifest_checksum(manifest)}, f)  # crafted: signed
    tensor = disk_tensor(group, 'values')
    with pytest.raises(ManifestDamaged, match=named) as error:
        tensor.numpy(tensor.shape.names)
    assert group in str(error.value) and 'values' in str(error.value)
    with pytest.raises(ManifestDamaged, match=named):  # nor is a block written into it
        write_block(group, 'values', math.zeros(tensor.shape.with_sizes(batch(example=2))), 'example', 0, 2)


@pytest.mark.parametrize('change', CHANGES)
def test_a_save_manifest_disagreeing_with_zarr_raises(tmp_path, change, monkeypatch):
    from lazyphi.storage import _save

    monkeypatch.setattr(_save, 'CHUNK_BYTES', 2 * 6 * 4 * 4)  # chunks of 2 examples
    lazyphi.save({'t': math.tensor(VALUES, SHAPE)}, tmp_path / 'save')
    file = tmp_path / 'save' / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    named = _entry_change(manifest['root']['items']['t'], change)
    file.write_text(json.dumps({**manifest, 'checksum': manifest_checksum(manifest)}))
    for lazy in (True, False):
        with pytest.raises(ManifestDamaged, match=named):
            loaded = lazyphi.load(tmp_path / 'save', lazy=lazy)['t']
            loaded.numpy(loaded.shape.names)


@pytest.mark.parametrize('change', ['big endian', 'codec order', 'no bytes codec', 'transformer', 'group'])
def test_zarr_metadata_lazyphi_never_writes_raises(tmp_path, change):
    lazyphi.save({'t': math.tensor(VALUES, SHAPE)}, tmp_path / 'save')
    file = tmp_path / 'save' / 't' / 'zarr.json'
    meta = json.loads(file.read_text())
    if change == 'big endian':  # Zarr would read the bytes swapped
        meta['codecs'][0]['configuration']['endian'] = 'big'
    elif change == 'codec order':
        meta['codecs'] = meta['codecs'][::-1]
    elif change == 'no bytes codec':
        meta['codecs'] = meta['codecs'][1:]
    elif change == 'transformer':
        meta['storage_transformers'] = [{'name': 'sharding'}]
    else:
        meta['node_type'] = 'group'
    file.write_text(json.dumps(meta))
    with pytest.raises(ManifestDamaged, match='which lazyphi never writes'):
        lazyphi.load(tmp_path / 'save', lazy=False)


def test_symbolic_links_inside_a_save_are_not_followed_out_of_it(tmp_path):
    lazyphi.save({'t': math.tensor(VALUES, SHAPE), 'u': math.tensor(VALUES + 1, SHAPE)}, tmp_path / 'save')
    lazyphi.save({'t': math.tensor(VALUES * 0, SHAPE)}, tmp_path / 'outside')
    target = tmp_path / 'save' / 't'
    os.rename(target, tmp_path / 'moved')
    os.symlink(tmp_path / 'outside' / 't', target)  # the array directory leads out of the save
    with pytest.raises(ChunkDamaged, match='outside'):
        lazyphi.load(tmp_path / 'save', lazy=False)
    chunk = tmp_path / 'save' / 'u' / 'c.0.0.0'
    os.rename(chunk, tmp_path / 'moved-chunk')
    os.symlink(tmp_path / 'moved-chunk', chunk)  # one chunk file leads out of it
    with pytest.raises(ChunkDamaged, match='u'):
        lazyphi.load(tmp_path / 'save', item='u', lazy=False)


def test_a_manifest_changed_after_writing_fails_its_checksum(tmp_path):
    lazyphi.save({'t': math.tensor(VALUES, SHAPE), 'count': 7}, tmp_path / 'save')
    file = tmp_path / 'save' / 'lazyphi.json'
    file.write_text(file.read_text().replace('"value": 7', '"value": 8'))
    with pytest.raises(ManifestDamaged, match='checksum'):
        lazyphi.load(tmp_path / 'save')
