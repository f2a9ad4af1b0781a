"""Dataclasses of named-dim tensors: cached properties that survive copies, slicing, equality, pytrees.

Decorate a (preferably frozen) dataclass whose fields hold Tensors; expensive results become
`@cached_property` members. `replace` and `copy_and_mutate` keep each cached value whose inputs
did not change (found by analysing the property's code), the tree functions of `lazyphi.math`
(`stack`, `slice`, ...) carry cached Tensors along, and `sliceable` adds tensor-like slicing.
"""

from dataclasses import asdict, astuple, field, is_dataclass  # noqa: F401  the standard library's, as jax_dataclasses offers them

from .._lazy import lazy_names as _lazy_names
from ..math import config_fields, data_fields, non_data_fields, special_fields
from ..math.kinds import (
    ALL,
    DirectDependencies,
    cached_property,
    cached_property_names,
    direct_dependencies,
    explain_dependencies,
    is_cached_property,
    property_dependencies,
)
from ._cached import cached_properties, cached_values
from ._checked import EnforcedAnnotationsMixin, checked
from ._html import dataclass_html
from ._mutate import MutationMismatch, copy_and_mutate
from ._ops import copy, data_eq, dataclass_repr, equal, replace
from ._pytree import Static, data_field, jit, pytree_dataclass, register_pytree, static_field
from ._sliceable import getitem, sliceable
from ._state import from_state_dict, state_dict, to_backend, to_device
from ._tensorclass import TensorClass

# the parallel names of the reference's older layout, resolved on use (PEP 562) so that this lower
# layer never imports lazyphi.parallel at import time
_PARALLEL_NAMES = ('parallel_compute', 'parallel_property', 'get_cache_files', 'on_load_into_memory',
                   'set_cache_ttl', 'load_cache_as', 'INFER', 'MIXED')


__getattr__, __dir__ = _lazy_names(__name__, dict.fromkeys(_PARALLEL_NAMES, 'lazyphi.parallel'))


__all__ = [
    'ALL',
    'DirectDependencies',
    'EnforcedAnnotationsMixin',
    'MutationMismatch',
    'Static',
    'TensorClass',
    'cached_properties',
    'cached_property',
    'cached_property_names',
    'cached_values',
    'checked',
    'config_fields',
    'copy',
    'copy_and_mutate',
    'data_eq',
    'data_field',
    'data_fields',
    'dataclass_html',
    'dataclass_repr',
    'direct_dependencies',
    'equal',
    'explain_dependencies',
    'from_state_dict',
    'getitem',
    'is_cached_property',
    'jit',
    'non_data_fields',
    'property_dependencies',
    'pytree_dataclass',
    'register_pytree',
    'replace',
    'sliceable',
    'special_fields',
    'state_dict',
    'static_field',
    'to_backend',
    'to_device',
]
