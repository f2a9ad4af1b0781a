"""Named-dim tensors: `Shape`, `Tensor`, and the operations on them.

Operations broadcast by dim name, never by position. Every function here reaches tensors
through one dispatch path (see `_tensor.py`), so lazily expanded, stacked and (in other
layers) traced or disk-backed tensors take part in all of them.
"""

from ..backend import get_precision, precision, set_global_precision
from ._creation import (
    PI,
    arange,
    linspace,
    meshgrid,
    ones,
    ones_like,
    random_normal,
    random_uniform,
    tensor,
    vec,
    wrap,
    zeros,
    zeros_like,
)
from ._fields import config_fields, data_fields, non_data_fields, special_fields
from ._functional import assert_close, iterate
from ._kinds import Expanded, Stacked
from ._ops import (
    abs_,
    all_,
    any_,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    cast,
    ceil,
    clip,
    conjugate,
    cos,
    cosh,
    exp,
    fft,
    finite_max,
    finite_mean,
    finite_min,
    finite_sum,
    floor,
    ifft,
    imag,
    is_finite,
    is_inf,
    is_nan,
    log,
    log2,
    log10,
    max_,
    maximum,
    mean,
    min_,
    minimum,
    prod,
    real,
    round_,
    sigmoid,
    sign,
    sin,
    sinh,
    sqrt,
    std,
    sum_,
    tan,
    tanh,
    to_complex,
    to_float,
    to_int32,
    to_int64,
    where,
)
from ._shape import (
    BATCH,
    CHANNEL,
    DUAL,
    EMPTY_SHAPE,
    INSTANCE,
    SPATIAL,
    NonUniform,
    Shape,
    ShapeDtype,
    batch,
    channel,
    concat_shapes,
    dual,
    instance,
    merge_shapes,
    non_batch,
    non_channel,
    non_dual,
    non_instance,
    non_spatial,
    primal,
    spatial,
)
from ._structure import flatten_tensor as flatten
from ._structure import pack_tensor_dims as pack_dims
from ._structure import transpose
from ._structure import unpack_tensor_dim as unpack_dim
from ._tensor import DimView, Tensor
from ._tree import concat, expand, rename_dims, shape, slice_, stack, unstack

abs = abs_
round = round_
sum = sum_
max = max_
min = min_
any = any_
all = all_
slice = slice_
conj = conjugate

__all__ = [
    'BATCH', 'CHANNEL', 'DUAL', 'EMPTY_SHAPE', 'INSTANCE', 'PI', 'SPATIAL',
    'DimView', 'Expanded', 'NonUniform', 'Shape', 'ShapeDtype', 'Stacked', 'Tensor',
    'abs', 'abs_', 'all', 'all_', 'any', 'any_', 'arange', 'arccos', 'arccosh', 'arcsin', 'arcsinh', 'arctan',
    'arctan2', 'arctanh', 'assert_close', 'batch', 'cast', 'ceil', 'channel', 'clip', 'concat', 'concat_shapes',
    'config_fields', 'conj', 'conjugate', 'cos', 'cosh', 'data_fields', 'dual', 'exp', 'expand', 'fft',
    'finite_max', 'finite_mean', 'finite_min', 'finite_sum', 'flatten', 'floor', 'get_precision', 'ifft', 'imag',
    'instance', 'is_finite', 'is_inf', 'is_nan', 'iterate', 'linspace', 'log', 'log2', 'log10', 'max', 'max_',
    'maximum', 'mean', 'merge_shapes', 'meshgrid', 'min', 'min_', 'minimum', 'non_batch', 'non_channel',
    'non_data_fields', 'non_dual', 'non_instance', 'non_spatial', 'ones', 'ones_like', 'pack_dims', 'precision',
    'primal', 'prod', 'random_normal', 'random_uniform', 'real', 'rename_dims', 'round', 'round_',
    'set_global_precision', 'shape', 'sigmoid', 'sign', 'sin', 'sinh', 'slice', 'slice_', 'spatial',
    'special_fields', 'sqrt', 'stack', 'std', 'sum', 'sum_', 'tan', 'tanh', 'tensor', 'to_complex', 'to_float',
    'to_int32', 'to_int64', 'transpose', 'unpack_dim', 'unstack', 'vec', 'where', 'wrap', 'zeros', 'zeros_like',
]
