"""Wires `Tensor`'s methods to the modules built on `_tensor.py` that implement them.

`_tensor.py` cannot import the modules that import it, so the methods whose work is done there (the reduction
properties `t.mean`, `t.real`, `round(t)`, `t.pack(...)`, indexing by tensors, the conversion of Python operands
in `t + (0, x)`, equality by value) look their function up in `_tensor.HIGHER`, which this module fills.
`lazyphi.math` imports it, so the table is complete before any tensor exists.
"""

from ._compare import close
from ._creation import compatible_tensor
from ._indexing import index_by_tensor
from ._ops import imag, real, round_
from ._reductions import REDUCTIONS
from ._structure import pack_tensor_dims, unpack_tensor_dim
from ._tensor import HIGHER, Tensor


def _reduce_all(value: Tensor, name: str) -> Tensor:
    """The reduction `name` over every dim of `value`."""
    return REDUCTIONS[name](value, value.shape.names)


HIGHER.update(
    reduce=_reduce_all, real=real, imag=imag, round=round_, pack_dims=pack_tensor_dims, unpack_dim=unpack_tensor_dim,
    operand=compatible_tensor, close=close, index_by_tensor=index_by_tensor,
)
