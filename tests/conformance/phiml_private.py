"""PhiML's private helpers that its own tests import, mapped to lazyphi's public equivalents.

Test-only code: the conformance suite (`../shared/conformance/phiml-all/`) imports these names from here
instead of from PhiML's private modules. Each is lazyphi's own function, class or value under PhiML's name,
from lazyphi's private modules where phiml has it in one (`bool_to_int`, `disassemble_tensors`,
`index_shift_widths`, `resolve_index`), or, like `get_backend` and `shape_stack`, a call of lazyphi's public
equivalent with PhiML's arguments; none of them is part of lazyphi's API. A name lazyphi has no equivalent
for yet raises when used, so the tests that need it fail (and are listed as expected failures) while the rest
of the file runs.
"""

import importlib
import importlib.util

from lazyphi.backend import NUMPY, Backend, DType, backend_by_name
from lazyphi.math import (
    EMPTY_SHAPE,
    CompactSparseTensor,
    CompressedSparseMatrix,
    Shape,
    SparseCoordinateTensor,
    dual,
    instance,
    spatial,
    tensor,
    wrap,
)
from lazyphi.math._autodiff import assemble_tensors, disassemble_tensors
from lazyphi.math._neighbors import index_shift_widths
from lazyphi.math._ops import bool_to_int
from lazyphi.math._selection import resolve_index
from lazyphi.math.kinds import stacked_shape


def _lazyphi(module: str, name: str):
    """`module.name` of lazyphi, or a function that raises naming the missing equivalent."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        def missing(*args, **kwargs):
            raise NotImplementedError(f'lazyphi has no equivalent of this PhiML helper yet: {module}.{name}')
        missing.__name__ = name
        return missing


def init_installed_backends() -> tuple:
    """lazyphi's backends of every array library installed here, NumPy first."""
    backends = [NUMPY]
    for library in ('torch', 'jax', 'tensorflow'):
        if importlib.util.find_spec(library) is not None:
            backends.append(backend_by_name(library))
    return tuple(backends)


def shape_stack(stack_dim: Shape, *shapes: Shape, stack_dim_first: bool = True) -> Shape:
    """The shape of values of `shapes` stacked along `stack_dim` (lazyphi's `stacked_shape`)."""
    stacked = stacked_shape(shapes, stack_dim.with_size(len(shapes)))
    return stacked if stack_dim_first else stacked.without(stack_dim) + stacked.only(stack_dim)


FLOAT16 = DType(float, 16)
FLOAT32 = DType(float, 32)
FLOAT64 = DType(float, 64)
INT32 = DType(int, 32)
INT64 = DType(int, 64)
COMPLEX64 = DType(complex, 64)
COMPLEX128 = DType(complex, 128)

def get_backend(backend: Backend | str) -> Backend:
    """A backend itself, or the one of that name: lazyphi's `backend_by_name` for names."""
    return backend if isinstance(backend, Backend) else backend_by_name(backend)


from_numpy_dtype = DType.as_dtype  # also takes NumPy dtypes and scalar types
combine_types = _lazyphi('lazyphi.backend', 'combine_types')
Layout = _lazyphi('lazyphi.math', 'Layout')
cached = _lazyphi('lazyphi.math', 'dense')  # values materialised in one native


equality_by_ref = _lazyphi('lazyphi.math', 'equality_by_ref')
equality_by_shape_and_value = _lazyphi('lazyphi.math', 'equality_by_shape_and_value')
fit_hyperplane = _lazyphi('lazyphi.math', 'fit_hyperplane')

__all__ = [
    'COMPLEX64',
    'COMPLEX128',
    'EMPTY_SHAPE',
    'FLOAT16',
    'FLOAT32',
    'FLOAT64',
    'INT32',
    'INT64',
    'CompactSparseTensor',
    'CompressedSparseMatrix',
    'Layout',
    'Shape',
    'SparseCoordinateTensor',
    'assemble_tensors',
    'bool_to_int',
    'cached',
    'combine_types',
    'disassemble_tensors',
    'dual',
    'equality_by_ref',
    'equality_by_shape_and_value',
    'fit_hyperplane',
    'from_numpy_dtype',
    'get_backend',
    'index_shift_widths',
    'init_installed_backends',
    'instance',
    'resolve_index',
    'shape_stack',
    'spatial',
    'tensor',
    'wrap',
]
