"""HTML views of tensors for Jupyter: dims with types and sizes, dtype, backend, kind, and a look at the values.

`tensor_html` renders any tensor kind through the kind protocol alone (`shape`, `dtype`, `backend`,
`available`, `numpy()`), so it never imports the kinds and never loads what is not in memory: a
disk-backed or traced tensor shows its dims and dtype, and values only once they are loaded. Kinds add
rows of their own (where the values lie) through the `rows` argument. The plain-text repr is unchanged.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from ._shape import _SUPERSCRIPTS, Shape

PREVIEW_LIMIT = 10_000_000  # elements: above this, no values are copied out for the preview or the statistics
PREVIEW_VALUES = 8  # values shown, in the shape's order
SHOWN_LABELS = 12  # labels shown per dim before "…"

HTML_STYLE = ('<style>.lazyphi-repr{font-size:13px;line-height:1.4}'
         '.lazyphi-repr table{border-collapse:collapse;margin:2px 0}'
         '.lazyphi-repr th,.lazyphi-repr td{text-align:left;padding:1px 10px 1px 0;vertical-align:top;'
         'border:none;background:none}'
         '.lazyphi-repr th{font-weight:600}'
         '.lazyphi-repr .lp-type{opacity:.65}'
         '.lazyphi-repr code{font-size:12px;background:none}</style>')


def tensor_html(t, rows: Sequence[tuple[str, str]] = ()) -> str:
    """An HTML table describing the tensor `t`, for `_repr_html_`.

    Args:
        t: any tensor kind.
        rows: (title, plain text) rows the kind adds, such as where its values are stored.

    Returns:
        A `<div>` with the kind, dtype and backend, one row per dim (name, type, size, labels), the
        kind's rows, and, for values in memory of at most `PREVIEW_LIMIT` elements, the leading values
        and summary statistics.
    """
    shape = t.shape
    head = (f'<b>{html.escape(type(t).__name__)}</b> <code>{html.escape(str(t.dtype))}</code> '
            f'on {html.escape(_backend_text(t))}, {_volume_text(shape)}')
    info = [(title, f'<code>{html.escape(text)}</code>') for title, text in rows]
    values = _values_in_memory(t)
    if values is not None:
        parts = '' if shape.is_uniform else f' (part by part along {", ".join(shape.non_uniform_shape.names)})'
        info.append(('values' + parts, f'<code>{html.escape(_preview(values))}</code>'))
        stats = summary_text(values)
        if stats:
            info.append(('summary', html.escape(stats)))
    elif not t.available:
        info.append(('values', 'not in memory (shown once loaded)'))
    else:
        info.append(('values', f'not previewed: more than {PREVIEW_LIMIT:,} elements'))
    return f'<div class="lazyphi-repr">{HTML_STYLE}{head}{dims_table(shape)}{_rows_table(info)}</div>'


def tensor_summary_html(t) -> str:
    """One line on a tensor for tables of many values: shape, dtype, backend, kind and summary statistics."""
    line = f'<code>{html.escape(repr(t.shape))}</code> {html.escape(str(t.dtype))} {html.escape(_backend_text(t))}'
    kind = type(t).__name__
    values = _values_in_memory(t)
    stats = summary_text(values) if values is not None else ('' if t.available else 'not in memory')
    return f'{line} <span class="lp-type">{html.escape(kind)}</span>' + (f' — {html.escape(stats)}' if stats else '')


def dims_table(shape: Shape) -> str:
    """A table with one row per dim: name, type, size and labels."""
    if not shape.rank:
        return '<div>no dims (a scalar)</div>'
    body = ''.join(
        f'<tr><td><b>{html.escape(name)}</b>{_SUPERSCRIPTS.get(dim_type, "")}</td>'
        f'<td class="lp-type">{dim_type}</td><td>{html.escape(str(size))}</td>'
        f'<td>{html.escape(_labels_text(labels))}</td></tr>'
        for name, size, dim_type, labels in zip(shape.names, shape.sizes, shape.types, shape.labels, strict=True))
    return f'<table><tr><th>dim</th><th>type</th><th>size</th><th>labels</th></tr>{body}</table>'


def summary_text(values: np.ndarray) -> str:
    """Mean ± std (min … max) of numeric values, with the count of non-finite ones; true count of bools."""
    if values.size == 0:
        return 'empty'
    kind = values.dtype.kind
    if kind == 'b':
        return f'{int(values.sum())} of {values.size} true'
    if kind not in 'iuf':
        return ''
    finite = values[np.isfinite(values)] if kind == 'f' else values
    bad = values.size - finite.size
    extra = f', {bad} not finite' if bad else ''
    if not finite.size:
        return f'no finite values{extra}'
    return f'{finite.mean():.4g} ± {finite.std():.4g} ({finite.min():.4g} … {finite.max():.4g}){extra}'


def _backend_text(t) -> str:
    try:
        return t.backend.name
    except ValueError as err:  # a disk-backed tensor computed with a library this process cannot import
        return f'unavailable ({err})'


def _values_in_memory(t) -> np.ndarray | None:
    """The values as NumPy if they are in memory and not too many to look at, else None.

    A non-uniform tensor gives the values of its uniform parts one after the other, each flattened.
    """
    volume = t.shape.volume
    if not t.available or volume is None or volume > PREVIEW_LIMIT:
        return None
    if t.shape.is_uniform:
        return np.asarray(t.numpy())
    dim = t.shape.non_uniform_shape.names[0]
    parts = [_values_in_memory(t[{dim: i}]) for i in range(t.shape.get_size(dim))]
    return np.concatenate([p.reshape(-1) for p in parts])


def _preview(values: np.ndarray) -> str:
    flat = values.reshape(-1)
    shown = ' '.join(_number_text(v) for v in flat[:PREVIEW_VALUES])
    return shown + (' …' if flat.size > PREVIEW_VALUES else '')


def _number_text(value) -> str:
    if isinstance(value, (np.floating, np.complexfloating)):
        return f'{value:.4g}'
    return str(value)


def _labels_text(labels) -> str:
    if labels is None:
        return ''
    shown = ', '.join(labels[:SHOWN_LABELS])
    return shown + (f', … ({len(labels)} in all)' if len(labels) > SHOWN_LABELS else '')


def _volume_text(shape: Shape) -> str:
    volume = shape.volume
    if volume is None:
        return 'size unknown' if shape.is_uniform else 'non-uniform'
    elements = f'{volume:,} element{"" if volume == 1 else "s"}'
    return elements if shape.is_uniform else f'non-uniform, {elements}'


def _rows_table(rows: list) -> str:
    return '<table>' + ''.join(f'<tr><th>{html.escape(title)}</th><td>{cell}</td></tr>' for title, cell in rows) + \
        '</table>'
