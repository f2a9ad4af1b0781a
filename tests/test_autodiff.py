"""math.jit_compile and math.gradient on functions of lazyphi tensors, on every backend."""

from dataclasses import dataclass

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.math import batch, spatial
from lazyphi.math._autodiff import assemble_tensors, disassemble_tensors

pytestmark = pytest.mark.usefixtures('backend')


def wrap(data, *dims):
    return math.wrap(default_backend().as_tensor(np.asarray(data, np.float32)), *dims)


def test_jit_compile_keeps_names_and_values():
    def energy(x, y):
        return math.sum(x * y + 1, 'x'), {'doubled': x * 2}
    x = wrap(np.arange(6).reshape(2, 3), batch('b'), spatial('x'))
    y = wrap(np.ones(3), spatial('x'))
    compiled = math.jit_compile(energy)
    total, extra = compiled(x, y)
    expected_total, expected_extra = energy(x, y)
    math.assert_close(total, expected_total)
    math.assert_close(extra['doubled'], expected_extra['doubled'])
    assert total.shape == batch(b=2) and total.backend is default_backend()
    again, _ = compiled(x * 3, y)  # same shapes: the compiled version is reused
    math.assert_close(again, energy(x * 3, y)[0])


def test_gradient_of_a_scalar_loss():
    if not default_backend().supports('jacobian'):
        with pytest.raises(NotImplementedError, match='automatic differentiation'):
            math.gradient(lambda x: math.sum(x ** 2, 'x'))(wrap([1.0, 2.0], spatial('x')))
        return
    x = wrap([1.0, 2.0, 3.0], spatial('x'))
    loss, grads = math.gradient(lambda x: math.sum(x ** 2, 'x'))(x)
    assert isinstance(grads, list) and len(grads) == 1  # no wrt: a list of one, as phiml
    grad, = grads
    math.assert_close(loss, 14.0)
    assert grad.shape == spatial(x=3)
    np.testing.assert_allclose(grad.numpy('x'), [2, 4, 6], rtol=1e-5)
    only = math.gradient(lambda a, b: math.sum(a * b, 'x'), wrt=1, get_output=False)(x, x * 2)
    np.testing.assert_allclose(only.numpy('x'), [1, 2, 3], rtol=1e-5)


def test_gradient_of_python_numbers_and_numpy_runs_on_the_default_backend_as_in_phimls_autodiff_notebook():
    def loss(x, y):
        return x ** 2 * y
    if not default_backend().supports('jacobian'):
        with pytest.raises(NotImplementedError, match=r"make one of them the default backend"):
            math.gradient(loss, wrt='x', get_output=False)(1., 1.)
        return
    dx = math.gradient(loss, wrt='x', get_output=False)(1., 1.)
    assert dx.backend is default_backend() and float(dx) == 2.
    values = math.wrap(np.array([0., 1., 2.]), batch('v'))  # NumPy values
    (grad,) = math.gradient(lambda v: math.sum(v ** 2, 'v'), get_output=False)(values)
    assert grad.backend is default_backend()
    np.testing.assert_allclose(grad.numpy('v'), [0, 2, 4])


@dataclass
class Vec:
    """The value class of phiml's Autodiff notebook: two components, possibly Python numbers."""
    x1: math.Tensor
    x2: math.Tensor

    def __mul__(self, other):
        return Vec(self.x1 * other, self.x2 * other)

    def __pow__(self, power, modulo=None):
        return Vec(self.x1 ** power, self.x2 ** power)

    def __value_attrs__(self):
        return 'x1', 'x2'


def test_gradient_by_an_object_of_python_numbers_as_in_phimls_autodiff_notebook():
    def loss_function(x, y):
        return math.l2_loss(x ** 2 * y)

    dx_function = math.gradient(loss_function, wrt='x', get_output=False)
    if not default_backend().supports('jacobian'):
        with pytest.raises(NotImplementedError):
            dx_function(x=Vec(1, 2), y=1.)
        return
    grad = dx_function(x=Vec(1, 2), y=1.)
    assert isinstance(grad, Vec)
    assert float(grad.x1) == pytest.approx(2.) and float(grad.x2) == pytest.approx(16.)  # d/dx (x^4 / 2) = 2 x^3
    with pytest.raises(ValueError, match='hold no tensors or numbers'):
        dx_function(x='text', y=1.)


def test_gradient_needs_a_loss_of_batch_dims_only():
    if not default_backend().supports('jacobian'):
        pytest.skip(f'{default_backend().name} lacks jacobian')
    with pytest.raises(ValueError, match='loss whose dims are batch dims'):
        math.gradient(lambda x: x * 2)(wrap([1.0, 2.0], spatial('x')))


def test_an_auxiliary_tensor_selects_the_compiled_version_by_its_values_as_in_phimls_jit_notebook():
    @math.jit_compile(auxiliary_args='y')
    def fun(x, y):
        return math.sin(y ** 2) * x

    math.assert_close(fun(math.tensor(1.), math.wrap(2)), np.sin(4), rel_tolerance=1e-6)
    assert math.trace_check(fun, math.tensor(1.), math.wrap(2)) == (True, '')  # a new tensor of the same value
    fun(math.tensor(3.), math.wrap(2))
    assert len(fun.traces) == 1
    math.assert_close(fun(math.tensor(1.), math.wrap(3)), np.sin(9), rel_tolerance=1e-6)
    assert len(fun.traces) == 2


def test_jit_compile_binds_arguments_by_name_and_counts_traces():
    @math.jit_compile
    def scale(x, fac=1):
        return x * fac
    x = wrap([1., 2.], spatial('x'))
    math.assert_close(scale(x, fac=2), x * 2)
    math.assert_close(scale(x=x, fac=3), x * 3)  # numbers are traced like tensors: no new version
    assert len(scale.traces) == 1
    scale(wrap([1., 2.], spatial('y')))
    assert len(scale.traces) == 2 and not scale.forget_traces
    assert math.trace_check(scale, x)[0] and math.trace_check(scale, x=x, fac=5)[0]
    traced, reason = math.trace_check(scale, wrap([1., 2., 3.], spatial('x')))
    assert not traced and 'no compiled version' in reason


def test_auxiliary_arguments_are_compiled_in_and_forget_traces_keeps_one():
    calls = []

    @math.jit_compile(auxiliary_args='power', forget_traces=True)
    def f(x, power):
        calls.append(power)
        return x ** power
    x = wrap([2., 3.], spatial('x'))
    math.assert_close(f(x, 2), x ** 2)
    math.assert_close(f(x, 3), x ** 3)
    assert len(f.traces) == 1 and f.forget_traces
    assert math.jit_compile_linear(lambda v: v * 2)(x).shape == x.shape
    with pytest.raises(TypeError, match='jit_compile'):
        math.trace_check(lambda v: v, x)


def test_when_available_runs_after_a_compiled_call_with_its_values():
    seen = []

    @math.jit_compile
    def f(x):
        math.when_available(lambda v: seen.append(v), x)
        return x + 1
    f(wrap([1., 2.], spatial('x')))
    assert seen and seen[-1].available
    math.assert_close(seen[-1], wrap([1., 2.], spatial('x')))


def test_gradient_by_parameter_names_and_of_batch_losses():
    if not default_backend().supports('jacobian'):
        pytest.skip(f'{default_backend().name} lacks jacobian')

    def f(x, y):
        return math.l2_loss(x - y), x
    x, y = wrap(2.), wrap(1.)
    dx = math.gradient(f, 'x', get_output=False)(x, y)
    math.assert_close(dx, 1)
    (loss, prediction), (dx, dy) = math.gradient(f, 'x,y')(x, y=y)
    math.assert_close(loss, 0.5)
    math.assert_close(prediction, x)
    math.assert_close(dy, -1)
    examples = wrap([0., 1.], batch('examples'))
    loss, grad = math.gradient(math.l2_loss, wrt=0)(examples)
    math.assert_close(loss, wrap([0., .5], batch('examples')))
    math.assert_close(grad, examples)


def test_custom_gradient_replaces_the_backward_pass():
    if not default_backend().supports('custom_gradient'):
        pytest.skip(f'{default_backend().name} lacks custom gradients')

    def first_two(x):
        return x.x[:2]

    def spread(inputs, y, dy):
        return {'x': math.pad(dy, {'x': (1, 1)})}

    def loss(x):
        return math.l1_loss(math.custom_gradient(first_two, spread)(x))
    (grad,) = math.gradient(loss, get_output=False)(math.ones(spatial(x=4)))
    assert grad.numpy('x').tolist() == [0, 1, 1, 0]
    (stopped,) = math.gradient(lambda x: math.sum(math.stop_gradient(x) * x), get_output=False)(wrap([3.], 'x:s'))
    assert stopped.numpy('x').tolist() == [3]


@dataclass(frozen=True)
class Model:
    """A dataclass whose `variable_attrs` name the fields traced; `table` is data compiled in, as phiml does."""
    weights: math.Tensor
    table: math.Tensor
    variable_attrs: tuple = ('weights',)


def test_jit_compile_traces_the_variable_attrs_of_dataclasses_and_compiles_in_the_other_data_fields():
    @math.jit_compile
    def apply(m: Model, x: math.Tensor) -> math.Tensor:
        return m.weights * x + m.table

    x = wrap([2, 2, 2], spatial('x'))
    model = Model(wrap([1, 1, 1], spatial('x')), wrap([0, 1, 2], spatial('x')))
    np.testing.assert_allclose(apply(model, x).numpy('x'), [2, 3, 4])
    np.testing.assert_allclose(apply(Model(model.weights * 3, model.table), x).numpy('x'), [6, 7, 8])
    assert len(apply.traces) == 1  # new weights: traced, so the version is reused
    np.testing.assert_allclose(apply(Model(model.weights, wrap([0, 1, 2], spatial('x'))), x).numpy('x'), [2, 3, 4])
    assert len(apply.traces) == 1  # a new table of the same values selects the same version
    np.testing.assert_allclose(apply(Model(model.weights, model.table + 1), x).numpy('x'), [3, 4, 5])
    assert len(apply.traces) == 2  # other values of a field outside variable_attrs: compiled in again
    everything = dataclass(frozen=True)(type('Everything', (), {'__annotations__': {'weights': math.Tensor,
                                                                                   'table': math.Tensor}}))
    apply(everything(model.weights, model.table), x)
    apply(everything(model.weights, model.table + 5), x)
    assert len(apply.traces) == 3  # without variable_attrs every data field is traced


def test_disassemble_and_assemble_tensors_round_trip():
    x = wrap([1., 2.], spatial('x'))
    sparse = math.sparse_tensor(math.wrap([[0, 1], [1, 0]], math.instance('entries'), math.channel(vector='a,b')),
                                wrap([3., 4.], math.instance('entries')), spatial(a=2, b=2))
    tensors = [x, math.expand(x, batch(b=3)), math.stack([x, -x], batch('s')), sparse]
    natives, shapes, specs = disassemble_tensors(tensors, expand=False)
    assert shapes == tuple(t.shape for t in tensors)
    assert [default_backend().staticshape(n) for n in natives[:3]] == [(2,), (2,), (2, 2)]  # expanded dims left out
    assert len(natives) == 5  # the sparse tensor gives its indices and its values
    restored = assemble_tensors(natives, specs)
    for t, r in zip(tensors, restored, strict=True):
        assert r.shape == t.shape and r.backend is t.backend
        math.assert_close(r, t)
    expanded, _, expanded_specs = disassemble_tensors(tensors[1:2], expand=True)
    assert default_backend().staticshape(expanded[0]) == (3, 2)
    math.assert_close(assemble_tensors([n * 2 for n in expanded], expanded_specs)[0], tensors[1] * 2)
    with pytest.raises(ValueError, match='the specs need 5 natives, got 4'):
        assemble_tensors(natives[:4], specs)
    with pytest.raises(TypeError, match='expected a sequence of Tensors, got ndarray'):
        disassemble_tensors([np.zeros(2)], expand=False)
