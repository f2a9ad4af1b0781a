"""What jax_dataclasses users reach for, on lazyphi.dataclasses: Static[T], jit, flax serialization, typing."""

import collections
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lazyphi
import lazyphi.dataclasses as jdc
from lazyphi import math
from lazyphi.dataclasses._pytree import ensure_registered
from lazyphi.math import Tensor, batch, channel, spatial


@pytest.fixture
def jax():
    jax = pytest.importorskip('jax')
    ensure_registered('jax')
    return jax


@jdc.pytree_dataclass
class Body:
    position: Tensor
    mass: float
    steps: jdc.Static[int] = 2
    label: jdc.Static[str] = 'body'


def body(jnp) -> Body:
    return Body(math.wrap(jnp.asarray([[0.0, 1.0], [2.0, 3.0]]), batch('b'), channel(vector='x,y')), 2.0)


def test_every_field_not_static_is_a_child_whatever_its_annotation(jax):
    b = body(jax.numpy)
    leaves, treedef = jax.tree_util.tree_flatten(b)
    assert len(leaves) == 2 and leaves[1] == 2.0  # the position's native and the mass, a float
    rebuilt = jax.tree_util.tree_unflatten(treedef, [leaf * 2 for leaf in leaves])
    assert rebuilt.mass == 4.0 and (rebuilt.steps, rebuilt.label) == (2, 'body')


def test_static_annotations_written_as_strings_are_found(jax):
    namespace = {}
    exec(textwrap.dedent('''
        from __future__ import annotations
        import lazyphi.dataclasses as jdc
        from lazyphi.math import Tensor

        @jdc.pytree_dataclass
        class Later:
            value: Tensor
            n: jdc.Static[int] = 3
            ref: Unknown = None  # a name that never resolves: a child
    '''), namespace)
    later = namespace['Later'](math.wrap(jax.numpy.ones(2), spatial('x')))
    leaves, treedef = jax.tree_util.tree_flatten(later)
    assert len(leaves) == 1  # `ref` is None, an empty subtree; `n` is in the tree structure
    assert jax.tree_util.tree_unflatten(treedef, leaves).n == 3


def test_jit_takes_static_arguments_from_annotations(jax):
    traced = collections.Counter()

    @jdc.jit
    def advance(b: Body, factor: jdc.Static[int]) -> Body:
        traced['advance'] += 1
        return jdc.replace(b, position=b.position * factor + b.mass * b.steps)

    b = body(jax.numpy)
    out = advance(b, 3)
    np.testing.assert_allclose(out.position.numpy('b,vector'), b.position.numpy('b,vector') * 3 + 4.0)
    advance(b, 3)
    advance(jdc.replace(b, mass=5.0), 3)  # a new child value: no new trace
    assert traced['advance'] == 1
    advance(b, 4)  # a new static argument
    advance(jdc.replace(b, steps=1), 4)  # a new static field
    assert traced['advance'] == 3

    @jdc.jit(static_argnames=('scale',))
    def scaled(b: Body, scale, offset: 'jdc.Static[float]') -> Tensor:
        return b.position * scale + offset

    np.testing.assert_allclose(scaled(b, 2.0, 1.0).numpy('b,vector'), b.position.numpy('b,vector') * 2 + 1)
    with pytest.raises(TypeError, match=r"jit\(\) takes a function, but got 3"):
        jdc.jit(3)


def test_copy_and_mutate_validation_error_is_an_assertion_error(jax):
    b = body(jax.numpy)
    with pytest.raises(AssertionError, match=r'Body\.position changed its shape') as info, \
            jdc.copy_and_mutate(b) as changed:
        changed.position = math.wrap(jax.numpy.zeros(3), spatial('x'))
    assert isinstance(info.value, ValueError) and isinstance(info.value, jdc.MutationMismatch)
    with jdc.copy_and_mutate(b, validate=False) as unchecked:
        unchecked.position = math.wrap(jax.numpy.zeros(3), spatial('x'))
    assert unchecked.position.shape == spatial(x=3)


def test_flax_serialization_round_trip(jax):
    serialization = pytest.importorskip('flax.serialization')
    b = body(jax.numpy)
    state = serialization.to_state_dict(b)
    assert set(state) == {'position', 'mass'} and set(state['position']) == {'native'}
    data = serialization.to_bytes(b)
    restored = serialization.from_bytes(body(jax.numpy), data)
    assert isinstance(restored, Body) and restored.position.shape == b.position.shape
    np.testing.assert_array_equal(restored.position.numpy('b,vector'), b.position.numpy('b,vector'))
    assert (restored.mass, restored.steps) == (2.0, 2)
    with pytest.raises(ValueError, match=r"Cannot restore a Body from a state with the entries \['mass'\]"):
        serialization.from_state_dict(b, {'mass': 1.0})


def test_flax_imported_after_the_class_is_defined_gets_it():
    pytest.importorskip('flax')
    script = textwrap.dedent('''
        import json, sys
        import numpy as np
        import lazyphi.dataclasses as jdc
        from lazyphi import math
        from lazyphi.math import Tensor, spatial

        @jdc.pytree_dataclass
        class Node:
            value: Tensor
            n: jdc.Static[int] = 1

        before = 'flax' in sys.modules
        import flax.serialization as serialization
        node = Node(math.tensor(np.arange(3.0), spatial('x')))
        back = serialization.from_bytes(node, serialization.to_bytes(node))
        print(json.dumps([before, back.value.numpy('x').tolist(), back.n]))
    ''')
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    assert json.loads(out.splitlines()[-1]) == [False, [0.0, 1.0, 2.0], 1]


@pytest.mark.slow
def test_mypy_checks_constructor_calls(tmp_path):
    """mypy sees pytree_dataclass as a dataclass decorator (dataclass_transform): a misspelt field is an error; names
    of lazyphi.math that load on first use (`mean`) are no error."""
    pytest.importorskip('mypy')
    (tmp_path / 'example.py').write_text(textwrap.dedent('''
        import lazyphi.dataclasses as jdc
        from lazyphi.math import Tensor, mean, spatial, zeros


        @jdc.pytree_dataclass
        class MnistStruct:
            image: Tensor
            label: Tensor
            steps: jdc.Static[int] = 1
            rate: float = jdc.static_field(default=0.5)


        right = MnistStruct(image=zeros(spatial(x=28)), label=zeros(spatial(x=10)), steps=2)
        misspelt = MnistStruct(image=zeros(spatial(x=28)), lable=zeros(spatial(x=10)))
        average = mean(right.image)
    '''))
    env = dict(os.environ)
    package_root = Path(lazyphi.__file__).parent.parent
    if 'site-packages' not in package_root.parts:  # a checkout on PYTHONPATH rather than an installed package
        env['MYPYPATH'] = str(package_root)
    result = subprocess.run([sys.executable, '-m', 'mypy', '--follow-imports=silent', '--no-error-summary',
                             '--cache-dir', str(tmp_path / 'cache'), 'example.py'],
                            capture_output=True, text=True, cwd=tmp_path, env=env)
    errors = [line for line in result.stdout.splitlines() if ': error:' in line]
    assert len(errors) == 1, result.stdout + result.stderr
    assert errors[0].startswith('example.py:15:') and 'Unexpected keyword argument "lable"' in errors[0]
