"""Dataclasses and Tensors as JAX and PyTorch pytree nodes, registered lazily."""

import collections
import dataclasses
import functools
import json
import subprocess
import sys
from typing import Annotated

import numpy as np
import pytest

import lazyphi.dataclasses as jdc
from lazyphi import math
from lazyphi._errors import IncompatibleShapes
from lazyphi.backend import backend_by_name
from lazyphi.dataclasses import _pytree as jdc_pytree
from lazyphi.dataclasses import data_field, pytree_dataclass, register_pytree, static_field
from lazyphi.dataclasses._checked import checked
from lazyphi.dataclasses._pytree import ensure_registered
from lazyphi.math import Expanded, Stacked, Tensor, batch, channel, spatial

CALLS = collections.Counter()


def _backend_or_skip(name: str):
    try:
        return backend_by_name(name)
    except ValueError as err:
        pytest.skip(f"lazyphi's {name} backend cannot be loaded: {err}")


@pytest.fixture
def jax():
    jax = pytest.importorskip('jax')
    _backend_or_skip('jax')
    ensure_registered('jax')
    return jax


@pytest.fixture
def torch_pytree():
    pytest.importorskip('torch')
    _backend_or_skip('torch')
    ensure_registered('torch')
    import torch.utils._pytree as pytree
    return pytree


@pytree_dataclass
class Particles:
    position: Tensor
    velocity: Tensor
    dt: jdc.Static[float] = 0.1
    name: jdc.Static[str] = 'p'

    def __post_init__(self):
        CALLS['post_init'] += 1

    @functools.cached_property
    def speed(self) -> Tensor:
        CALLS['speed'] += 1
        return math.sqrt(math.sum(self.velocity ** 2, 'vector'))

    def step(self) -> 'Particles':
        return dataclasses.replace(self, position=self.position + self.velocity * self.dt)


def particles(native_of, b=3) -> Particles:
    rng = np.random.default_rng(0)
    dims = (batch(b=b), channel(vector='x,y'))
    return Particles(math.wrap(native_of(rng.normal(size=(b, 2))), *dims),
                     math.wrap(native_of(rng.normal(size=(b, 2))), *dims))


# --- registration without importing ------------------------------------------------------------


def _run(code: str) -> dict:
    script = f'import json, sys\n{code}\nprint(json.dumps(result))'
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


DECLARE = '''
from lazyphi import math
from lazyphi.math import Tensor, spatial
from lazyphi.dataclasses import Static, checked, pytree_dataclass, sliceable
import lazyphi.dataclasses._state

@sliceable
@checked
@pytree_dataclass
class Node:
    value: Tensor
    n: Static[int] = 1
'''


def test_decorating_imports_neither_jax_nor_torch():
    result = _run(DECLARE + "result = sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib', 'torch'})")
    assert result == []


def test_classes_are_registered_when_lazyphi_loads_the_jax_backend():
    pytest.importorskip('jax')
    result = _run(DECLARE + '''
import jax, jax.numpy as jnp
before = jax.tree_util.tree_leaves(Node(math.wrap(1.0)))  # not registered yet: the Node is a leaf
node = Node(math.wrap(jnp.ones(3), spatial('x')))  # a jax array: lazyphi loads its jax backend
leaves = jax.tree_util.tree_leaves(node)
result = [type(before[0]).__name__, len(leaves), isinstance(leaves[0], jax.Array)]
''')
    assert result == ['Node', 1, True]


def test_classes_are_registered_when_lazyphi_loads_the_torch_backend():
    pytest.importorskip('torch')
    result = _run(DECLARE + '''
import torch
import torch.utils._pytree as pytree
node = Node(math.wrap(torch.ones(3), spatial('x')))
leaves, spec = pytree.tree_flatten(node)
result = [len(leaves), type(leaves[0]).__name__, pytree.tree_unflatten(leaves, spec).n]
''')
    assert result == [1, 'Tensor', 1]


def test_ensure_registered_registers_with_a_library_imported_later():
    pytest.importorskip('jax')
    result = _run(DECLARE + '''
import jax
from lazyphi.dataclasses import _pytree as jdc_pytree
from lazyphi.dataclasses._pytree import ensure_registered
before = jax.tree_util.tree_leaves(Node(math.wrap(1.0)))
ensure_registered()
after = jax.tree_util.tree_leaves(Node(math.wrap(1.0)))
result = [type(before[0]).__name__, type(after[0]).__name__, 'lazyphi.backend.jax' in sys.modules]
''')
    assert result == ['Node', 'ndarray', False]


def test_ensure_registered_rejects_unknown_libraries():
    with pytest.raises(ValueError, match="not 'numpyy'"):
        ensure_registered('numpyy')


def test_registration_needs_a_dataclass_and_pytree_dataclasses_are_frozen():
    with pytest.raises(TypeError, match='takes a dataclass'):
        register_pytree(int)
    with pytest.raises(TypeError, match='frozen=False'):
        @pytree_dataclass(frozen=False)
        class Mutable:
            x: Tensor
    p = particles(np.asarray)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.dt = 1.0


# --- JAX -----------------------------------------------------------------------------------------


def test_jit_takes_and_returns_pytree_dataclasses(jax):
    p = particles(jax.numpy.asarray)
    traced = collections.Counter()

    @jax.jit
    def step(p):
        traced['step'] += 1
        return p.step()

    out = step(p)
    assert isinstance(out, Particles) and out.position.backend.name == 'jax'
    np.testing.assert_allclose(out.position.numpy('b,vector'),
                               (p.position + p.velocity * 0.1).numpy('b,vector'), rtol=1e-6)
    step(particles(jax.numpy.asarray))
    assert traced['step'] == 1  # same static config: no new trace
    step(dataclasses.replace(p, dt=0.2))
    assert traced['step'] == 2  # config fields are static: a new value compiles again


def test_flattening_excludes_caches_so_no_tracer_stays_in_one(jax):
    p = particles(jax.numpy.asarray)
    assert p.speed is not None and 'speed' in vars(p)
    leaves = jax.tree_util.tree_leaves(p)
    assert len(leaves) == 2  # position and velocity; the cached speed is not a leaf

    @jax.jit
    def with_speed(p):
        return p, p.speed

    out, speed = with_speed(p)
    assert 'speed' not in vars(out)  # would hold a tracer otherwise
    np.testing.assert_allclose(out.speed.numpy('b'), speed.numpy('b'))
    assert not isinstance(out.speed.native(), jax.core.Tracer)


def test_unflattening_runs_no_init_post_init_or_checks(jax):
    @checked
    @pytree_dataclass
    class Strict:
        values: Annotated[Tensor, 'x:s']

    strict = Strict(math.wrap(jax.numpy.ones(3), spatial('x')))
    CALLS.clear()
    p = particles(jax.numpy.asarray)
    CALLS.clear()
    leaves, treedef = jax.tree_util.tree_flatten(p)
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert CALLS['post_init'] == 0
    assert rebuilt.position is not p.position and rebuilt.position.native() is p.position.native()
    placeholders = jax.tree_util.tree_map(lambda leaf: None, strict)  # placeholders pass unchecked
    assert placeholders.values.native() is None


def test_grad_through_a_pytree_dataclass(jax):
    p = particles(jax.numpy.asarray)

    def energy(p):
        return math.sum(p.velocity ** 2 * 0.5, 'b,vector').native()

    grad = jax.grad(energy)(p)
    assert isinstance(grad, Particles) and grad.dt == p.dt
    np.testing.assert_allclose(grad.velocity.numpy('b,vector'), p.velocity.numpy('b,vector'), rtol=1e-6)
    np.testing.assert_allclose(grad.position.numpy('b,vector'), 0)


def test_key_paths_name_the_fields(jax):
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(
        particles(jax.numpy.asarray))[0]]
    assert paths == ['.position.native', '.velocity.native']


def test_vmap_over_an_instance_maps_over_the_first_dim_of_its_tensors(jax):
    p = particles(jax.numpy.asarray)
    seen = []

    def kinetic(q: Particles) -> Tensor:
        seen.append(q.velocity.shape)
        return math.sum(q.velocity ** 2, 'vector') / 2 + q.dt

    energy = jax.vmap(kinetic)(p)
    assert seen == [channel(vector='x,y')]  # each call sees one particle
    assert energy.shape == batch(b=3) and energy.backend.name == 'jax'
    np.testing.assert_allclose(energy.numpy('b'), (math.sum(p.velocity ** 2, 'vector') / 2 + 0.1).numpy('b'))
    moved = jax.vmap(lambda q: q.step())(p)
    assert isinstance(moved, Particles) and moved.position.shape == p.position.shape and moved.dt == p.dt
    np.testing.assert_allclose(moved.position.numpy('b,vector'), p.step().position.numpy('b,vector'))


def test_scan_over_an_instance_stacks_tensor_outputs(jax):
    p = particles(jax.numpy.asarray)

    def accumulate(total: Tensor, q: Particles):
        return total + math.sum(q.position, 'vector'), q.velocity * 2

    total, doubled = jax.lax.scan(accumulate, math.wrap(jax.numpy.zeros((), p.position.native().dtype)), p)
    assert doubled.shape == p.velocity.shape  # stacked along the dim scan went over
    np.testing.assert_allclose(doubled.numpy('b,vector'), p.velocity.numpy('b,vector') * 2)
    np.testing.assert_allclose(float(total), float(math.sum(p.position, 'b,vector')), rtol=1e-6)
    _, counted = jax.lax.scan(lambda c, _: (c + 1, c * math.wrap(jax.numpy.ones(2), spatial('x'))),
                              jax.numpy.float32(0), None, length=4)
    assert counted.shape == batch(**{jdc_pytree.STACKED_DIM: 4}) + spatial(x=2)  # no mapped dim of size 4
    np.testing.assert_allclose(counted.numpy('stack,x'), [[0, 0], [1, 1], [2, 2], [3, 3]])


def test_vmap_maps_expanded_tensors_with_their_inner_tensor(jax):
    inner = math.wrap(jax.numpy.arange(3.0), batch('b'))
    expanded = math.expand(inner, spatial(x=4))
    out = jax.vmap(lambda t: t * 2)(expanded)
    assert out.shape.names == ('b', 'x') and type(out) is Expanded
    np.testing.assert_allclose(out.numpy('b,x'), np.repeat(np.arange(3.0)[:, None] * 2, 4, axis=1))


def test_a_transform_that_moves_other_axes_raises_instead_of_lying(jax):
    p = particles(jax.numpy.asarray)
    with pytest.raises(IncompatibleShapes, match=r"Tensor of shape \(bᵇ=3, vectorᶜ=x,y\) \(axis sizes \(3, 2\)\) "
                                                 r"from a native of shape \(5, 7\)") as info:
        jax.tree_util.tree_map(lambda leaf: jax.numpy.zeros((5, 7)), p)
    assert isinstance(info.value, ValueError)


def test_eval_shape_keeps_shapes_and_backend(jax):
    p = particles(jax.numpy.asarray)
    shapes = jax.eval_shape(lambda p: p.step(), p)
    assert shapes.position.shape == p.position.shape and shapes.position.backend.name == 'jax'


def test_lazy_tensor_kinds_are_nodes(jax):
    inner = math.wrap(jax.numpy.arange(3.0), spatial('x'))
    expanded = math.expand(inner, batch(b=1000))
    assert type(expanded) is Expanded
    leaves = jax.tree_util.tree_leaves(expanded)
    assert [leaf.shape for leaf in leaves] == [(3,)]  # the expanded dim is not materialised
    doubled = jax.jit(lambda t: t * 2)(expanded)
    assert type(doubled) is Expanded and doubled.shape == expanded.shape
    stacked = math.stack([inner, inner[{'x': slice(0, 2)}]], batch('parts'))
    assert type(stacked) is Stacked
    rebuilt = jax.tree_util.tree_map(lambda leaf: leaf + 1, stacked)
    assert type(rebuilt) is Stacked and rebuilt.shape == stacked.shape
    np.testing.assert_allclose(rebuilt[{'parts': 1}].numpy('x'), [1, 2])


def test_static_and_data_field_markers_override_the_classification(jax):
    @pytree_dataclass
    class Marked:
        weights: Tensor = static_field()
        rate: float = data_field(default=0.5)

    marked = Marked(math.tensor(np.ones(2), spatial('x')))
    assert jax.tree_util.tree_leaves(marked) == [0.5]
    assert dataclasses.fields(Marked)[0].metadata['lazyphi_static'] is True
    kept = static_field(metadata={'doc': 'kept'})
    assert kept.metadata == {'doc': 'kept', 'lazyphi_static': True}


# --- PyTorch -------------------------------------------------------------------------------------


def test_torch_round_trip(torch_pytree):
    import torch
    p = particles(torch.as_tensor)
    leaves, spec = torch_pytree.tree_flatten(p)
    assert len(leaves) == 2 and all(isinstance(leaf, torch.Tensor) for leaf in leaves)
    rebuilt = torch_pytree.tree_unflatten([leaf * 2 for leaf in leaves], spec)
    assert isinstance(rebuilt, Particles) and rebuilt.dt == p.dt and rebuilt.name == 'p'
    assert rebuilt.position.backend.name == 'torch'
    np.testing.assert_allclose(rebuilt.velocity.numpy('b,vector'), p.velocity.numpy('b,vector') * 2)
    mapped = torch_pytree.tree_map(lambda leaf: leaf + 1, {'p': p, 'n': [p.position]})
    assert isinstance(mapped['p'], Particles) and isinstance(mapped['n'][0], Tensor)
    paths = [torch_pytree.keystr(path) for path, _ in torch_pytree.tree_flatten_with_path(p)[0]]
    assert paths == ['.position.native', '.velocity.native']


def test_torch_unflatten_checks_leaf_shapes(torch_pytree):
    import torch
    leaves, spec = torch_pytree.tree_flatten(particles(torch.as_tensor))
    with pytest.raises(IncompatibleShapes, match=r"from a native of shape \(5,\)"):
        torch_pytree.tree_unflatten([torch.zeros(5), leaves[1]], spec)


def test_torch_numpy_natives_become_torch_tensors_after_mapping(torch_pytree):
    import torch
    p = particles(np.asarray)
    mapped = torch_pytree.tree_map(lambda leaf: torch.tensor(np.array(leaf)), p)
    assert mapped.position.backend.name == 'torch'


def test_torch_func_grad_accepts_a_dataclass(torch_pytree):
    import torch
    import torch.func

    p = particles(lambda a: torch.as_tensor(a, dtype=torch.float64))

    def kinetic(q: Particles) -> torch.Tensor:
        return (q.velocity.native('b,vector') ** 2).sum() / 2

    grads = torch.func.grad(kinetic)(p)
    assert isinstance(grads, Particles) and grads.velocity.backend.name == 'torch'
    np.testing.assert_allclose(grads.velocity.numpy('b,vector'), p.velocity.numpy('b,vector'))
    np.testing.assert_allclose(grads.position.numpy('b,vector'), 0)
    assert 'speed' not in grads.__dict__  # no cached value carries a transform's tensors


def test_the_standard_library_names_jax_dataclasses_offers_are_there():

    assert (jdc.field, jdc.asdict, jdc.astuple, jdc.is_dataclass) == (
        dataclasses.field, dataclasses.asdict, dataclasses.astuple, dataclasses.is_dataclass)

    @jdc.pytree_dataclass
    class Pair:
        a: Tensor
        tags: list = jdc.field(default_factory=list)

    pair = Pair(math.zeros(spatial(x=2)))
    assert jdc.is_dataclass(pair) and jdc.astuple(pair)[1] == [] and set(jdc.asdict(pair)) == {'a', 'tags'}
