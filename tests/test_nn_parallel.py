"""One network trained per hyper-parameter inside a parallel property, on threads, processes and a cluster.

Each network starts from seeded weights and trains on the same data, so what `parallel_compute` computes on
any scheduler must equal, bit for bit, the same training run made here directly.
"""

import threading
from dataclasses import dataclass

import numpy as np
import pytest

from lazyphi import math, nn
from lazyphi.backend import backend_by_name
from lazyphi.math import Tensor, batch, channel
from lazyphi.parallel import parallel_compute, parallel_property

LEARNING_RATES = math.tensor([1e-3, 3e-3, 1e-2, 3e-2], batch('lr'))
# the libraries draw initial weights from one global generator: two threads seeding and drawing at once would
# mix their draws, so a network is built under this lock
_BUILDING = threading.Lock()


def train(library: str, learning_rate: float, x: Tensor, steps: int, seed: int) -> Tensor:
    """Fits y = x_a - 2 x_b with an MLP of `library` from seeded weights; returns its final parameters as one vector.

    The library is named here, not taken from the caller's default backend, which a cluster's worker processes do
    not share."""
    with backend_by_name(library):
        return _train(learning_rate, x, steps, seed)


def _train(learning_rate: float, x: Tensor, steps: int, seed: int) -> Tensor:
    with _BUILDING:
        math.seed(seed)
        net = nn.mlp(2, 1, [16], activation='tanh')
    optimizer = nn.adam(net, learning_rate)
    target = x.vector['a'] - 2 * x.vector['b']

    def loss_function(data: Tensor) -> Tensor:
        return math.l2_loss(math.native_call(net, data) - target)
    for _ in range(steps):
        nn.update_weights(net, optimizer, loss_function, x)
    values = [np.asarray(p.numpy(p.shape.names)).ravel() for p in nn.get_parameters(net).values()]
    return math.tensor(np.concatenate(values), channel('weight'))


@dataclass(frozen=True)
class Sweep:
    """Networks trained with each learning rate of `learning_rate` (a batch dim) on the data `x`."""

    library: str
    learning_rate: Tensor
    x: Tensor
    steps: int = 20
    seed: int = 0

    @parallel_property
    def weights(self) -> Tensor:
        return train(self.library, float(self.learning_rate), self.x, self.steps, self.seed)



def _sweep(library: str) -> Sweep:
    x = math.tensor(np.random.default_rng(5).normal(size=(64, 2)).astype(np.float32), batch('example'),
                    channel(vector='a,b'))
    return Sweep(library, LEARNING_RATES, x)


def _check_against_direct_runs(sweep: Sweep) -> None:
    direct = [train(sweep.library, float(lr), sweep.x, sweep.steps, sweep.seed) for lr in LEARNING_RATES.lr]
    assert sweep.weights.shape.get_size('lr') == LEARNING_RATES.shape.get_size('lr')
    for i, expected in enumerate(direct):
        np.testing.assert_array_equal(sweep.weights.lr[i].numpy('weight'), expected.numpy('weight'))
    # the learning rate mattered: no two networks ended alike
    finals = [tuple(w.numpy('weight')) for w in direct]
    assert len(set(finals)) == len(finals)


def test_training_repeats_exactly_from_the_seed(nn_backend):
    sweep = _sweep(nn_backend.name)
    a = train(sweep.library, 1e-2, sweep.x, 5, seed=3)
    b = train(sweep.library, 1e-2, sweep.x, 5, seed=3)
    np.testing.assert_array_equal(a.numpy('weight'), b.numpy('weight'))
    assert not np.array_equal(a.numpy('weight'), train(sweep.library, 1e-2, sweep.x, 5, seed=4).numpy('weight'))


@pytest.mark.parametrize('scheduler', ['sync', 'threads'])
def test_one_network_per_learning_rate_in_threads(nn_backend, scheduler):
    sweep = _sweep(nn_backend.name)
    parallel_compute(sweep, [Sweep.weights], parallel_dims='lr', scheduler=scheduler, max_workers=2, progress=False)
    _check_against_direct_runs(sweep)


@pytest.mark.slow
def test_one_network_per_learning_rate_in_processes(nn_backend):
    sweep = _sweep(nn_backend.name)
    parallel_compute(sweep, [Sweep.weights], parallel_dims='lr', scheduler='processes', max_workers=2,
                     progress=False)
    _check_against_direct_runs(sweep)


@pytest.mark.slow
def test_one_network_per_learning_rate_on_a_local_cluster(nn_backend):
    distributed = pytest.importorskip('distributed')
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=':0') \
            as cluster, distributed.Client(cluster) as client:
        sweep = _sweep(nn_backend.name)
        parallel_compute(sweep, [Sweep.weights], parallel_dims='lr', scheduler=client, progress=False)
    _check_against_direct_runs(sweep)
