"""HTML views for notebooks: every tensor kind and dataclass instances, without loading or computing anything."""

import dataclasses
import html
import re
from typing import ClassVar

import numpy as np
import pytest
from backends import BACKEND_NAMES, get_backend

import lazyphi
from lazyphi import math
from lazyphi.dataclasses import cached_property, dataclass_html, sliceable
from lazyphi.math import Tensor, batch, channel, spatial
from lazyphi.math import _html as tensor_html_module
from lazyphi.math.kinds import Trace, tracer_for
from lazyphi.storage import _memory, clear_memory_cache


def _text(page: str) -> str:
    """The visible text of an HTML fragment: tags and the style block removed, entities decoded."""
    page = re.sub(r'<style>.*?</style>', '', page, flags=re.S)
    return ' '.join(html.unescape(re.sub(r'<[^>]+>', ' ', page)).split())


def _cells(page: str) -> list[str]:
    return [html.unescape(re.sub(r'<[^>]+>', '', c)).strip() for c in re.findall(r'<t[dh][^>]*>(.*?)</t[dh]>', page)]


@pytest.mark.parametrize('backend_name', BACKEND_NAMES)
def test_a_dense_tensor_shows_dims_dtype_backend_values_and_statistics(backend_name):
    backend = get_backend(backend_name)
    data = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    t = math.wrap(backend.as_tensor(data), batch('run'), spatial('x'), channel(vector='u,v'))
    page = t._repr_html_()
    cells = _cells(page)
    assert cells[:4] == ['dim', 'type', 'size', 'labels']
    assert cells[4:8] == ['runᵇ', 'batch', '2', '']
    assert cells[8:12] == ['xˢ', 'spatial', '3', '']
    assert cells[12:16] == ['vectorᶜ', 'channel', '2', 'u, v']
    text = _text(page)
    assert 'Dense' in text and 'float32' in text and f'on {backend_name}' in text and '12 elements' in text
    assert '0 1 2 3 4 5 6 7 …' in text  # the leading values, in the shape's order
    assert '5.5 ± 3.452 (0 … 11)' in text
    assert repr(t) == f'{t.shape} float32 5.5 ± 3.45 (0...11)'  # the plain-text repr is unchanged


def test_non_finite_values_integers_bools_and_scalars():
    floats = math.tensor(np.array([1.0, np.nan, np.inf, 3.0], np.float32), batch('b'))
    assert '2 ± 1 (1 … 3), 2 not finite' in _text(floats._repr_html_())
    ints = math.tensor(np.array([4, 5, 6]), spatial('x'))
    assert '4 5 6' in _text(ints._repr_html_()) and 'int64' in _text(ints._repr_html_())
    bools = math.tensor(np.array([True, False, True]), spatial('x'))
    assert '2 of 3 true' in _text(bools._repr_html_())
    scalar = math.tensor(2.5)
    assert 'no dims (a scalar)' in _text(scalar._repr_html_()) and '2.5' in _text(scalar._repr_html_())


def test_lazy_kinds_say_what_they_are():
    ones = math.ones(batch(b=1000), spatial(x=3))
    text = _text(ones._repr_html_())
    assert 'Expanded' in text and '3,000 elements' in text and '1 ± 0 (1 … 1)' in text
    stacked = math.stack([math.zeros(spatial(x=2)), math.ones(spatial(x=3))], batch('b'))
    text = _text(stacked._repr_html_())
    assert 'Stacked' in text and 'non-uniform' in text and '2..3 along b' in text
    assert 'values (part by part along b) 0 0 1 1 1' in text and '0.6 ± 0.4899 (0 … 1)' in text
    assert 'not previewed' not in text


def test_large_tensors_are_not_copied_for_a_preview(monkeypatch):
    monkeypatch.setattr(tensor_html_module, 'PREVIEW_LIMIT', 10)
    t = math.zeros(batch(b=4), spatial(x=4))
    text = _text(t._repr_html_())
    assert 'not previewed: more than 10 elements' in text and '±' not in text


@pytest.fixture
def loaded():
    """Disk-backed tensors loaded into memory while the test runs."""
    seen = []
    clear_memory_cache()
    _memory.on_load_into_memory(seen.append)
    yield seen
    with _memory._callbacks_lock:
        _memory._callbacks.remove(seen.append)


def test_a_disk_backed_tensor_shows_where_it_lies_and_loads_nothing(tmp_path, loaded):
    path = str(tmp_path / 'saved')
    lazyphi.save({'t': math.tensor(np.arange(6.0, dtype=np.float32), spatial('x'))}, path)
    t = lazyphi.load(path)['t']
    text = _text(t._repr_html_())
    assert loaded == []
    assert 'DiskTensor' in text and 'stored in' in text and t.path in text and 'chunks' in text
    assert 'not in memory (shown once loaded)' in text and '±' not in text
    part = t.x[2:5]
    assert 'selection x=2:5' in _text(part._repr_html_()) and loaded == []
    part.numpy()  # now its values are in memory, and shown
    assert len(loaded) == 1 and '2 3 4' in _text(part._repr_html_()) and len(loaded) == 1


def test_a_tracer_shows_its_shape_and_no_values():
    tracer = tracer_for(Trace(frozenset({'b'})), batch(b=4) & spatial(x=2), math.zeros(batch(b=4)).dtype)
    text = _text(tracer._repr_html_())
    assert 'Tracer' in text and '8 elements' in text and 'not in memory' in text and '±' not in text


@sliceable
@dataclasses.dataclass(frozen=True)
class Field:
    values: Tensor
    label: str = 'wave'
    calls: ClassVar[list] = []

    @cached_property
    def energy(self) -> Tensor:
        Field.calls.append('energy')
        return math.sum(self.values ** 2, spatial)

    @cached_property
    def peak(self) -> Tensor:
        Field.calls.append('peak')
        return math.max(self.values, spatial)


@dataclasses.dataclass(frozen=True)
class PlainField:
    _repr_html_ = dataclass_html
    values: Tensor
    steps: int = 3


def test_a_sliceable_dataclass_shows_dims_fields_and_cached_values_without_computing():
    f = Field(math.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), batch('run'), spatial('x')))
    assert f.energy.shape == batch(run=2)
    Field.calls.clear()
    page = f._repr_html_()
    assert Field.calls == []  # peak is not computed by showing it
    cells = _cells(page)
    assert cells[4:8] == ['runᵇ', 'batch', '2', ''] and cells[8:12] == ['xˢ', 'spatial', '3', '']
    rows = {cells[i]: (cells[i + 1], cells[i + 2]) for i in range(15, len(cells), 3)}
    assert cells[12:15] == ['field / property', 'role', 'value']
    assert rows['values'][0] == 'data' and '(runᵇ=2, xˢ=3) float32 numpy Dense' in rows['values'][1]
    assert rows['label'] == ('config', "'wave'")
    assert rows['energy'][0] == 'cached' and '(runᵇ=2) float32' in rows['energy'][1]
    assert rows['peak'] == ('cached', 'not computed')
    assert repr(f) == 'Field(runᵇ=2, xˢ=3)'  # the text repr of @sliceable is unchanged


def test_a_plain_dataclass_gets_the_view_with_one_class_attribute():
    p = PlainField(math.zeros(spatial(x=4)))
    text = _text(p._repr_html_())
    assert 'PlainField' in text and 'values' in text and 'steps' in text and '3' in text and 'xˢ' in text
    with pytest.raises(TypeError, match='dataclass instances'):
        dataclass_html(PlainField)


def test_a_dataclass_whose_dims_do_not_merge_still_renders():
    @dataclasses.dataclass(frozen=True)
    class Clash:
        a: Tensor
        b: Tensor

    text = _text(dataclass_html(Clash(math.zeros(batch(n=2)), math.zeros(spatial(n=3)))))
    assert 'dims:' in text and 'Clash' in text
