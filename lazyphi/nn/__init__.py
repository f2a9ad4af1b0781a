"""Neural networks, optimizers and training on PyTorch, JAX and TensorFlow, with phiml.nn's names.

Every function here hands the work to the network module of one machine-learning library: `lazyphi.nn._torch`,
`lazyphi.nn._jax` or `lazyphi.nn._tensorflow`, found through the backend's `nn_library()`. Which library is used:
the default backend's (`nn.use('torch')`, `math.use(...)`) if it is one of the three, else the one library of the
three the program has imported (with several, a `RuntimeError` asks to choose with `nn.use(name)`). Networks are
the library's own objects (a `torch.nn.Module`, a Keras model, a JAX network holding its parameters), so
`math.native_call(net, x)` runs them on tensors, and they pickle as the library pickles them.
"""

from ..math import use
from ._api import Network as Network  # the type names, as in phiml.nn (not in __all__: they are typing.Any)
from ._api import Optimizer as Optimizer
from ._api import (
    adagrad,
    adam,
    conv_classifier,
    conv_net,
    get_learning_rate,
    get_parameters,
    invertible_net,
    load_state,
    mlp,
    parameter_count,
    res_net,
    rmsprop,
    save_state,
    set_learning_rate,
    sgd,
    u_net,
    update_weights,
)
from ._train import StopTraining, TrainingState, train

__all__ = [
    'StopTraining',
    'TrainingState',
    'adagrad',
    'adam',
    'conv_classifier',
    'conv_net',
    'get_learning_rate',
    'get_parameters',
    'invertible_net',
    'load_state',
    'mlp',
    'parameter_count',
    'res_net',
    'rmsprop',
    'save_state',
    'set_learning_rate',
    'sgd',
    'train',
    'u_net',
    'update_weights',
    'use',
]
