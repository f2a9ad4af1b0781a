"""An HTML view of dataclass instances for Jupyter: the shape, each field, and which cached properties hold a value.

`dataclass_html(obj)` works on any dataclass instance. `@sliceable` classes get it as `_repr_html_`;
any other dataclass gets it with one class attribute, `_repr_html_ = dataclass_html`. Reading the view
computes nothing: cached properties without a value are listed as not computed.
"""

from __future__ import annotations

import dataclasses
import html

from ..math import Tensor, config_fields, data_fields, shape, special_fields
from ..math.kinds import HTML_STYLE, cached_property_names, dims_table, tensor_summary_html
from ._ops import _SHORT_REPR

_NOT_COMPUTED = object()


def dataclass_html(obj) -> str:
    """An HTML table of a dataclass instance: class, dims of its data, fields, and cached property values.

    Tensors are summarised (shape, dtype, backend, kind, statistics of values in memory); disk-backed ones
    are not loaded. Use it as a class attribute to give a plain dataclass the view in notebooks:

        @dataclass(frozen=True)
        class Simulation:
            _repr_html_ = dataclass_html
            ...

    Raises:
        TypeError: `obj` is not a dataclass instance.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f'dataclass_html() renders dataclass instances, but got {type(obj).__qualname__} {obj!r:.80}')
    cls = type(obj)
    try:
        dims = dims_table(shape(obj))
    except (TypeError, ValueError) as err:  # fields whose dims do not merge, or values without a shape
        dims = f'<div>dims: {html.escape(str(err))}</div>'
    data = {f.name for f in data_fields(obj)}
    special = {f.name for f in special_fields(obj)}
    config = {f.name for f in config_fields(obj)}
    rows = []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        role = 'data' if f.name in data else 'special' if f.name in special else 'config' if f.name in config else ''
        rows.append((f.name, role, _value_html(getattr(obj, f.name, None))))
    for name in cached_property_names(cls):
        value = obj.__dict__.get(name, _NOT_COMPUTED)
        cell = '<i>not computed</i>' if value is _NOT_COMPUTED else _value_html(value)
        rows.append((name, 'cached', cell))
    body = ''.join(f'<tr><td><b>{html.escape(name)}</b></td><td class="lp-type">{role}</td><td>{cell}</td></tr>'
                   for name, role, cell in rows)
    return (f'<div class="lazyphi-repr">{HTML_STYLE}<b>{html.escape(cls.__qualname__)}</b> '
            f'<span class="lp-type">({html.escape(cls.__module__)})</span>{dims}'
            f'<table><tr><th>field / property</th><th>role</th><th>value</th></tr>{body}</table></div>')


def _value_html(value) -> str:
    if isinstance(value, Tensor):
        return tensor_summary_html(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            described = f'{type(value).__qualname__}{shape(value)!r}'
        except (TypeError, ValueError):
            described = type(value).__qualname__
        return f'<code>{html.escape(described)}</code>'
    return f'<code>{html.escape(_SHORT_REPR.repr(value))}</code>'
