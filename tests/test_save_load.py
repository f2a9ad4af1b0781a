"""`lazyphi.save` / `lazyphi.load`: round trips of trees, laziness, partial loads, atomic writes and damaged files."""

import dataclasses
import enum
import functools
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from backends import BACKEND_NAMES, get_backend

import lazyphi
from lazyphi import math
from lazyphi.backend import convert
from lazyphi.dataclasses import cached_property
from lazyphi.math import ShapeDtype, batch, channel, spatial
from lazyphi.math.kinds import Expanded
from lazyphi.storage import (
    DiskTensor,
    ManifestDamaged,
    ReplacedOnDisk,
    UnknownClassWarning,
    _memory,
    _results,
    _save,
    clear_memory_cache,
    load_cache_as,
)


class Mode(enum.Enum):
    FAST = 'fast'
    SLOW = 'slow'


@dataclasses.dataclass(frozen=True)
class Inner:
    values: math.Tensor
    scale: float = 1.0


@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Inner
    parts: dict
    pair: tuple
    items: list
    name: str = 'outer'
    count: int = 0
    missing: Any = None


@dataclasses.dataclass(frozen=True)
class Config:
    values: math.Tensor
    z: complex
    window: slice
    sizes: tuple
    mode: Mode
    grid: math.Shape
    scalar: Any  # a data field holding a NumPy scalar: saved as a value node
    factor: np.float32
    nested: dict[str, int]
    dtype: lazyphi.backend.DType
    odd: float


@dataclasses.dataclass(frozen=True)
class WithCache:
    x: math.Tensor

    @cached_property
    def doubled(self) -> math.Tensor:
        return self.x * 2

    @functools.cached_property
    def total(self) -> math.Tensor:
        return math.sum(self.x, 'x')


@dataclasses.dataclass
class Validating:
    x: math.Tensor
    calls: int = 0

    def __post_init__(self):
        raise AssertionError('load() must not run __post_init__')


def _tensor(*shape, seed=0):
    rng = np.random.default_rng(seed)
    shape = math.merge_shapes(*shape)
    return math.tensor(rng.standard_normal(shape.sizes).astype(np.float32), shape)


@pytest.fixture
def loads(monkeypatch):
    """The tensors whose data was loaded into memory, in order."""
    seen = []
    monkeypatch.setattr(_memory, '_callbacks', [])
    _memory.on_load_into_memory(seen.append)
    clear_memory_cache()
    yield seen
    clear_memory_cache()


def _outer():
    t = _tensor(batch(b=3), spatial(x=5), channel(vector='x,y'))
    return Outer(Inner(t, 2.5), {'a': t * 2, 'b': {'deep': [1, 2.5, None, 'text', True]}},
                 (t.x[0], 'second', -1), [math.tensor(3.0), None], name='tree', count=7)


def test_round_trip_of_nested_dataclasses_dicts_tuples_lists_and_values(tmp_path, loads):
    obj = _outer()
    lazyphi.save(obj, tmp_path / 'tree')
    loaded = lazyphi.load(tmp_path / 'tree')
    assert type(loaded) is Outer and type(loaded.inner) is Inner
    assert isinstance(loaded.inner.values, DiskTensor) and loaded.inner.scale == 2.5
    assert loaded.parts['b'] == {'deep': [1, 2.5, None, 'text', True]}
    assert type(loaded.pair) is tuple and loaded.pair[1:] == ('second', -1)
    assert type(loaded.items) is list and loaded.items[1] is None
    assert (loaded.name, loaded.count, loaded.missing) == ('tree', 7, None)
    assert not loads, 'load() read data'
    math.assert_close(loaded.inner.values, obj.inner.values)
    math.assert_close(loaded.parts['a'], obj.parts['a'])
    math.assert_close(loaded.pair[0], obj.pair[0])
    assert float(loaded.items[0]) == 3.0
    assert loaded.inner.values.shape == obj.inner.values.shape  # names, types and labels


def test_one_manifest_and_one_group_per_node(tmp_path):
    lazyphi.save(_outer(), tmp_path / 'tree')
    root = tmp_path / 'tree'
    assert sorted(os.listdir(root)) == ['inner', 'items', 'lazyphi.json', 'pair', 'parts', 'zarr.json']
    assert not list(root.rglob('lazyphi.json'))[1:]
    manifest = json.loads((root / 'lazyphi.json').read_text())
    assert manifest['format'] == _save.SAVE_FORMAT and manifest['root']['kind'] == 'dataclass'
    assert manifest['root']['class'] == f'{Outer.__module__}:Outer'
    assert json.loads((root / 'parts' / 'zarr.json').read_text())['node_type'] == 'group'
    node = manifest['root']['fields']['inner']['fields']['values']
    assert node['kind'] == 'tensor' and node['array'] == 'inner/values' and node['backend'] == 'numpy'
    assert node['labels'] == [None, None, ['x', 'y']]
    array = json.loads((root / 'inner' / 'values' / 'zarr.json').read_text())
    assert [c['name'] for c in array['codecs']] == ['bytes', 'crc32c']  # uncompressed, checksummed


def test_config_fields_of_every_tagged_type(tmp_path):
    obj = Config(_tensor(spatial(x=4)), 1 - 2j, slice(1, None, 2), (1, (2.5, 'a')), Mode.SLOW,
                 batch(b=2) & channel(vector='x,y'), np.int16(-3), np.float32(0.5), {'$type': 1, 'k': 2},
                 lazyphi.backend.DType(float, 64), float('-inf'))
    lazyphi.save(obj, tmp_path / 'config')
    loaded = lazyphi.load(tmp_path / 'config')
    for f in dataclasses.fields(Config):
        if f.name != 'values':
            got, want = getattr(loaded, f.name), getattr(obj, f.name)
            assert got == want and type(got) is type(want), f.name
    assert loaded.grid.labels == obj.grid.labels and loaded.grid.types == obj.grid.types


def test_a_config_field_of_another_type_raises_naming_it(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Bad:
        x: math.Tensor
        path: os.PathLike = None

    import pathlib
    with pytest.raises(TypeError, match=r'obj\.path of type pathlib\.PosixPath'):
        lazyphi.save(Bad(_tensor(spatial(x=2)), pathlib.Path('/x')), tmp_path / 'bad')
    assert not os.listdir(tmp_path)
    with pytest.raises(TypeError, match=r"str dict keys.*obj\[0\]"):
        lazyphi.save([{1: 2}], tmp_path / 'bad')


@pytest.mark.parametrize('name', BACKEND_NAMES)
def test_every_backend_round_trips(tmp_path, name):
    backend = get_backend(name)
    t = _tensor(batch(b=2), spatial(x=3), channel(vector='x,y'))
    value = math.wrap(convert(np.array(t.numpy(t.shape.names)), backend), t.shape)
    assert value.backend.name == name
    lazyphi.save({'t': value, 'i': math.cast(value, int)}, tmp_path / name)
    lazy = lazyphi.load(tmp_path / name)
    assert lazy['t'].backend.name == name and lazy['t'].source_backend == name
    np.testing.assert_array_equal(lazy['t'].numpy(t.shape.names), t.numpy(t.shape.names))
    eager = lazyphi.load(tmp_path / name, lazy=False)
    assert not isinstance(eager['t'], DiskTensor) and eager['t'].backend.name == name
    assert eager['i'].dtype == math.cast(value, int).dtype
    with load_cache_as('numpy'):
        assert lazy['t'].backend.name == 'numpy'
        assert lazyphi.load(tmp_path / name, lazy=False)['t'].backend.name == 'numpy'


@pytest.mark.parametrize('name', BACKEND_NAMES)
def test_raw_arrays_in_fields_round_trip_as_arrays_of_their_library(tmp_path, name):
    """A jax_dataclasses-style field holding a library's own array (any number of axes) loads as such an array."""
    backend = get_backend(name)

    @dataclasses.dataclass(frozen=True)
    class Struct:
        image: Any
        label: Any

    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    struct = Struct(convert(values, backend), convert(np.array([1, 2], np.int64), backend))
    lazyphi.save(struct, tmp_path / name)
    for lazy in (True, False):
        loaded = lazyphi.load(tmp_path / name, lazy=lazy)
        assert backend.is_tensor(loaded.image, True) and backend.name == get_backend(name).name
        assert tuple(backend.staticshape(loaded.image)) == (2, 3, 4)
        np.testing.assert_array_equal(backend.numpy(loaded.image), values)
        if name != 'numpy':  # NumPy arrays of at most one axis load as tensors, as math.tensor makes them
            np.testing.assert_array_equal(backend.numpy(loaded.label), [1, 2])
    placeholder = lazyphi.load(tmp_path / name, data=False).image
    assert isinstance(placeholder, ShapeDtype) and placeholder.shape.sizes == (2, 3, 4)


def test_cached_values_are_saved_only_with_include_cache(tmp_path):
    obj = WithCache(_tensor(spatial(x=4)))
    _ = obj.doubled, obj.total
    lazyphi.save(obj, tmp_path / 'plain')
    lazyphi.save(obj, tmp_path / 'cached', include_cache=True)
    assert not {'doubled', 'total'} & set(vars(lazyphi.load(tmp_path / 'plain')))
    loaded = lazyphi.load(tmp_path / 'cached')
    assert isinstance(vars(loaded)['doubled'], DiskTensor) and isinstance(vars(loaded)['total'], DiskTensor)
    math.assert_close(loaded.doubled, obj.doubled)
    math.assert_close(loaded.total, obj.total)


def test_load_runs_no_init_and_reads_nothing_until_used(tmp_path, loads):
    obj = object.__new__(Validating)
    object.__setattr__(obj, 'x', _tensor(batch(b=4), spatial(x=3)))
    object.__setattr__(obj, 'calls', 5)
    lazyphi.save({'v': obj, 'other': _tensor(spatial(y=2))}, tmp_path / 'v')
    loaded = lazyphi.load(tmp_path / 'v')
    assert loaded['v'].calls == 5 and not loads
    part = loaded['v'].x.b[1:3]
    assert isinstance(part, DiskTensor) and not loads
    math.assert_close(part, obj.x.b[1:3])
    assert [t.array_name for t in loads] == ['v/x']


def test_data_false_gives_shape_dtype_placeholders(tmp_path, loads):
    obj = _outer()
    lazyphi.save(obj, tmp_path / 'tree')
    os.remove(tmp_path / 'tree' / 'inner' / 'values' / 'c.0.0.0')  # data=False never reads it
    shapes = lazyphi.load(tmp_path / 'tree', data=False)
    assert shapes.inner.values == ShapeDtype(obj.inner.values.shape, obj.inner.values.dtype)
    assert shapes.inner.values.shape.labels == obj.inner.values.shape.labels
    assert shapes.items[0] == ShapeDtype(math.EMPTY_SHAPE, math.tensor(3.0).dtype) and shapes.count == 7


def test_item_loads_one_subtree(tmp_path):
    obj = _outer()
    lazyphi.save(obj, tmp_path / 'tree')
    math.assert_close(lazyphi.load(tmp_path / 'tree', item='inner.values'), obj.inner.values)
    assert lazyphi.load(tmp_path / 'tree', item='inner.scale') == 2.5
    assert lazyphi.load(tmp_path / 'tree', item='parts.b.deep.3') == 'text'
    assert lazyphi.load(tmp_path / 'tree', item='pair.-1') == -1
    inner = lazyphi.load(tmp_path / 'tree', item='inner', lazy=False)
    assert type(inner) is Inner and not isinstance(inner.values, DiskTensor)
    with pytest.raises(KeyError, match="has no item 'nope'"):
        lazyphi.load(tmp_path / 'tree', item='inner.nope')
    with pytest.raises(KeyError, match="has no item '9'"):
        lazyphi.load(tmp_path / 'tree', item='items.9')


def test_lazy_false_reads_everything_now(tmp_path, loads):
    obj = _outer()
    lazyphi.save(obj, tmp_path / 'tree')
    loaded = lazyphi.load(tmp_path / 'tree', lazy=False)
    assert len(loads) == 4
    assert not isinstance(loaded.inner.values, DiskTensor)
    np.testing.assert_array_equal(loaded.inner.values.numpy('b,x,vector'), obj.inner.values.numpy('b,x,vector'))


def test_existing_path_is_protected_and_overwrite_replaces_it(tmp_path):
    target = tmp_path / 'x'
    lazyphi.save({'a': 1}, target)
    with pytest.raises(FileExistsError, match='overwrite=True'):
        lazyphi.save({'a': 2}, target)
    assert lazyphi.load(target) == {'a': 1}
    lazyphi.save({'a': 2}, target, overwrite=True)
    assert lazyphi.load(target) == {'a': 2}
    assert os.listdir(tmp_path) == ['x']
    (tmp_path / 'mine').mkdir()
    (tmp_path / 'mine' / 'notes.txt').write_text('keep me')
    with pytest.raises(FileExistsError, match='not a lazyphi save'):
        lazyphi.save({'a': 3}, tmp_path / 'mine', overwrite=True)
    assert (tmp_path / 'mine' / 'notes.txt').read_text() == 'keep me'


def test_overwritten_save_is_not_read_stale(tmp_path):
    target = tmp_path / 'x'
    lazyphi.save(math.tensor([1.0, 2.0], spatial('x')), target)
    assert math.sum(lazyphi.load(target), 'x') == 3
    lazyphi.save(math.tensor([5.0, 2.0], spatial('x')), target, overwrite=True)
    assert math.sum(lazyphi.load(target), 'x') == 7


@pytest.mark.parametrize('replacement', ['other values', 'another shape'])
def test_a_tensor_loaded_before_its_save_was_replaced_says_so(tmp_path, replacement):
    target = tmp_path / 'x'
    lazyphi.save(math.tensor([1.0, 2.0], spatial('x')), target)
    old = lazyphi.load(target)
    new = (math.tensor([5.0, 2.0], spatial('x')) if replacement == 'other values' else
           math.tensor([[5.0, 2.0, 7.0]], channel('c'), spatial('x')))
    lazyphi.save(new, target, overwrite=True)
    with pytest.raises(ReplacedOnDisk, match=r'was saved again \(at .*\) after this tensor was loaded from it .* '
                                             r'Load the save again'):
        old.numpy()
    math.assert_close(lazyphi.load(target), new)


def test_interrupted_save_leaves_nothing(tmp_path, monkeypatch):
    written = []
    original = _save._Writer.tensor

    def fail_second(self, t, location, where):
        if written:
            raise KeyboardInterrupt
        written.append(location)
        return original(self, t, location, where)

    monkeypatch.setattr(_save._Writer, 'tensor', fail_second)
    with pytest.raises(KeyboardInterrupt):
        lazyphi.save(_outer(), tmp_path / 'tree')
    assert written and os.listdir(tmp_path) == []
    lazyphi.save({'a': 1}, tmp_path / 'tree')  # an existing save is kept when overwriting it is interrupted
    with pytest.raises(KeyboardInterrupt):
        lazyphi.save(_outer(), tmp_path / 'tree', overwrite=True)
    assert os.listdir(tmp_path) == ['tree'] and lazyphi.load(tmp_path / 'tree') == {'a': 1}


@pytest.mark.parametrize('damage', ['not json', '[]', '{"type": "lazyphi.save", "format": 1}',
                                    'format', 'kind', 'sizes', 'array', 'tag'])
def test_damaged_manifest_raises(tmp_path, damage):
    lazyphi.save(_outer(), tmp_path / 'tree')
    file = tmp_path / 'tree' / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    tensor = manifest['root']['fields']['inner']['fields']['values']
    if damage == 'format':
        manifest['format'] = 99
    elif damage == 'kind':
        manifest['root']['fields']['parts']['kind'] = 'set'
    elif damage == 'sizes':
        tensor['sizes'] = [3, 5]
    elif damage == 'array':
        tensor['array'] = '../../elsewhere'
    elif damage == 'tag':
        manifest['root']['config']['count'] = {'$type': 'complex', 'real': 1}
    text = json.dumps(manifest) if damage in ('format', 'kind', 'sizes', 'array', 'tag') else damage
    file.write_text(text)
    with pytest.raises(ManifestDamaged):
        lazyphi.load(tmp_path / 'tree')


@pytest.mark.parametrize('backend', BACKEND_NAMES)
def test_an_expanded_tensor_is_saved_as_the_values_it_holds_and_loads_expanded(tmp_path, backend):
    with get_backend(backend):
        values = math.random_normal(channel(c=3), spatial(x=8))
    big = math.expand(values, batch(n=10 ** 9))  # 24 billion values, never materialised
    lazyphi.save({'big': big, 'scale': 2}, tmp_path / 'tree')
    stored = sum(f.stat().st_size for f in (tmp_path / 'tree').rglob('*') if f.is_file())
    assert stored < 10_000
    manifest = json.loads((tmp_path / 'tree' / 'lazyphi.json').read_text())
    node = manifest['root']['items']['big']
    assert node['kind'] == 'expanded' and node['sizes'] == list(big.shape.sizes) and node['value']['sizes'] == [3, 8]
    for lazy in (True, False):
        loaded = lazyphi.load(tmp_path / 'tree', lazy=lazy)['big']
        assert type(loaded) is Expanded and loaded.shape == big.shape and loaded.backend.name == backend
        math.assert_close(loaded.n[123_456_789], values)
    assert lazyphi.load(tmp_path / 'tree', data=False)['big'] == ShapeDtype(big.shape, values.dtype)
    assert lazyphi.load(tmp_path / 'tree', item='big').shape == big.shape


def test_a_small_expanded_tensor_is_written_whole_for_readers_of_the_arrays(tmp_path):
    small = math.zeros(spatial(x=3), channel(c='a,b'))
    lazyphi.save({'small': small}, tmp_path / 'tree')
    node = json.loads((tmp_path / 'tree' / 'lazyphi.json').read_text())['root']['items']['small']
    assert node['kind'] == 'tensor' and node['sizes'] == [3, 2]


def test_an_expanded_node_that_does_not_hold_its_values_is_damage(tmp_path):
    lazyphi.save(math.expand(math.range(spatial(x=4)), batch(b=10 ** 7)), tmp_path / 'tree')
    file = tmp_path / 'tree' / 'lazyphi.json'
    original = json.loads(file.read_text())
    for damage, message in [(lambda root: root['value'].update(kind='value', value=1), 'must be a tensor node'),
                            (lambda root: root.update(sizes=[10 ** 7, 5]), 'do not lie within the expanded shape'),
                            (lambda root: root.update(types=['batch', 'nonsense']), 'types must be among')]:
        manifest = json.loads(json.dumps(original))
        damage(manifest['root'])
        manifest['checksum'] = _results.manifest_checksum(manifest)
        file.write_text(json.dumps(manifest))
        with pytest.raises(ManifestDamaged, match=message):
            lazyphi.load(tmp_path / 'tree')


@pytest.mark.parametrize('version', [1, 2])
def test_a_save_of_an_older_format_still_loads(tmp_path, version):
    """Formats 1 and 2 name each chunk's record by its grid position alone (`0.0`, or the records directory itself
    for a 0-d array): such saves are read, without checking that each chunk file belongs where it lies."""
    lazyphi.save(_outer(), tmp_path / 'tree')
    file = tmp_path / 'tree' / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    manifest['format'] = version
    manifest['checksum'] = _results.manifest_checksum(manifest)
    file.write_text(json.dumps(manifest))
    for records in (tmp_path / 'tree').rglob('*.done'):
        for record in records.iterdir():
            if not record.name.startswith('.'):
                untagged = record.name.rpartition('.')[0]
                record.rename(records / untagged) if untagged else record.unlink()
    loaded = lazyphi.load(tmp_path / 'tree')
    np.testing.assert_array_equal(loaded.inner.values.numpy('b,x,vector'), _outer().inner.values.numpy('b,x,vector'))
    assert loaded.items[0].numpy() == 3.0


def test_missing_save_and_cache_result(tmp_path):
    with pytest.raises(FileNotFoundError):
        lazyphi.load(tmp_path / 'none')
    (tmp_path / 'empty').mkdir()
    with pytest.raises(ManifestDamaged, match=r'no lazyphi\.json'):
        lazyphi.load(tmp_path / 'empty')


def test_an_unknown_class_loads_as_a_dict_with_a_warning_naming_it(tmp_path):
    lazyphi.save(_outer(), tmp_path / 'tree')
    file = tmp_path / 'tree' / 'lazyphi.json'
    manifest = json.loads(file.read_text())
    manifest['root']['fields']['inner']['class'] = 'nowhere.module:Gone'
    manifest['checksum'] = _results.manifest_checksum(manifest)
    file.write_text(json.dumps(manifest))
    with pytest.warns(UnknownClassWarning, match=r"obj\.inner: 'nowhere.module:Gone' is in no module"):
        loaded = lazyphi.load(tmp_path / 'tree')
    assert type(loaded) is Outer and set(loaded.inner) == {'values', 'scale'} and loaded.inner['scale'] == 2.5


def test_local_classes_are_found_in_the_saving_process(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Local:
        x: math.Tensor

    lazyphi.save(Local(_tensor(spatial(x=2))), tmp_path / 'local')
    assert type(lazyphi.load(tmp_path / 'local')) is Local


def test_saving_a_disk_tensor_copies_chunk_by_chunk(tmp_path, monkeypatch, loads):
    monkeypatch.setattr(_save, 'CHUNK_BYTES', 64)  # 16 float32 per chunk
    t = _tensor(spatial(x=100), channel(c=4))  # 4 items of x per chunk: 25 chunks
    lazyphi.save({'t': t}, tmp_path / 'first')
    reads = []
    original = _save.read_selection
    monkeypatch.setattr(_save, 'read_selection', lambda info, sel: reads.append(sel) or original(info, sel))
    lazyphi.save(lazyphi.load(tmp_path / 'first'), tmp_path / 'second')
    assert len(reads) == 25 and all(len(sel[0]) == 4 for sel in reads) and not loads
    view = lazyphi.load(tmp_path / 'first', item='t').x[10:50:3].c[1]  # a view: strided, one axis dropped
    lazyphi.save(view, tmp_path / 'view')
    assert not loads
    math.assert_close(lazyphi.load(tmp_path / 'second', item='t'), t)
    math.assert_close(lazyphi.load(tmp_path / 'view'), t.x[10:50:3].c[1])


def test_dict_keys_that_are_no_file_names(tmp_path):
    obj = {'a/b': math.tensor(1.0), '.hidden': math.tensor(2.0), '_0': math.tensor(3.0), 'lazyphi.json': 4}
    lazyphi.save(obj, tmp_path / 'keys')
    loaded = lazyphi.load(tmp_path / 'keys', lazy=False)
    assert list(loaded) == list(obj) and loaded['lazyphi.json'] == 4
    assert [float(loaded[k]) for k in list(obj)[:3]] == [1.0, 2.0, 3.0]


def test_save_and_load_are_lazy_attributes():
    assert lazyphi.save is _save.save and lazyphi.load is _save.load
    with pytest.raises(AttributeError):
        _ = lazyphi.no_such_name


_MAIN_SCRIPT = '''
import dataclasses, sys
import lazyphi
from lazyphi import math
from lazyphi.backend import convert

if sys.argv[1] == 'save':
    @dataclasses.dataclass(frozen=True)
    class Model:
        w: math.Tensor
        label: str

    lazyphi.save(Model(math.tensor([1.0, 2.0], math.spatial('x')), 'm'), sys.argv[2])
    loaded = lazyphi.load(sys.argv[2])
    assert type(loaded) is Model and loaded.label == 'm', loaded
    print('ok')
else:
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loaded = lazyphi.load(sys.argv[2])
    print(type(loaded).__name__, sorted(loaded), caught[0].message)
'''


def test_class_defined_in_main(tmp_path):
    script = tmp_path / 'script.py'
    script.write_text(textwrap.dedent(_MAIN_SCRIPT))
    target = str(tmp_path / 'model')

    def run(mode):
        return subprocess.run([sys.executable, str(script), mode, target], check=True, capture_output=True,
                              text=True).stdout

    assert run('save').strip() == 'ok'
    message = run('load')
    assert message.startswith("dict ['label', 'w'] lazyphi.load found no class for obj: '__main__:Model'")
