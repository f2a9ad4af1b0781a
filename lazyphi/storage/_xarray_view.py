"""What xarray sees of a cache result or a save: label coordinates, config attributes, consolidated metadata.

`xr.open_zarr(path)` on a result or a save shows its arrays with their dim names (Zarr's
`dimension_names`). `describe_for_xarray` adds, once the arrays exist: one coordinate array of strings per
labelled dim (the labels), the class and config values as the group's attributes, and consolidated
metadata, so that readers find every array in the group's own `zarr.json` instead of listing the
directory (where lazyphi's `lazyphi.json` and `<array>.done/` records would each raise a warning).
lazyphi's own readers use the manifest and ignore all of this. Zarr is imported on first use.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping

import numpy as np

from ..math import config_fields
from ._results import check_name, class_path

_JSON_TYPES = (bool, int, float, str)


def describe_for_xarray(store: str, groups: Mapping[str, tuple[Mapping[str, tuple], Mapping[str, object]]]) -> None:
    """Add label coordinates, attributes and consolidated metadata to the Zarr groups in directory `store`.

    Args:
        store: directory of the root group, holding the arrays already.
        groups: per group path within `store` (`''`: the root), `(arrays, attributes)`: per array of that group
            `(dim names, labels per dim)` — each labelled dim becomes a coordinate array named like the dim,
            unless an array has that name or the arrays disagree on its labels — and the group's attributes,
            JSON values (see `config_attributes`).
    """
    if set(groups) == {''} and not label_coordinates(groups[''][0]):
        _consolidate_flat(store, groups[''][0], groups[''][1])
        return
    import zarr

    for path, (arrays, attributes) in groups.items():
        group = zarr.open_group(store, path=path or None, mode='r+', zarr_format=3)
        for dim, labels in label_coordinates(arrays).items():
            coordinate = group.create_array(dim, shape=(len(labels),), chunks=(len(labels),), dtype=str,
                                            fill_value='', dimension_names=[dim], compressors=None)
            coordinate[:] = np.asarray(labels, dtype=object)
        if attributes:
            group.attrs.update(dict(attributes))
    with warnings.catch_warnings():
        # lazyphi's own files are not Zarr nodes; consolidated metadata of format 3 is Zarr's extension
        warnings.filterwarnings('ignore', r'Object at .* is not recognized as a component of a Zarr hierarchy')
        warnings.filterwarnings('ignore', r'Consolidated metadata is currently not part in the Zarr format 3')
        for path in sorted(groups, key=lambda g: -g.count('/') - bool(g)):  # the deepest first, the root last
            zarr.consolidate_metadata(store, path=path or None, zarr_format=3)


def _consolidate_flat(store: str, arrays: Mapping[str, tuple], attributes: Mapping[str, object]) -> None:
    """The root group's `zarr.json` with `attributes` and the consolidated metadata of its `arrays`, its only nodes.

    What `zarr.consolidate_metadata` writes for such a group (a test compares them), without Zarr's API, which
    took 3 ms of Python per result (a tenth of `np.save` of 256 MiB).
    """
    metadata = {}
    for name in arrays:
        with open(os.path.join(store, name, 'zarr.json'), 'rb') as f:
            metadata[name] = json.loads(f.read())
    meta = {'attributes': dict(attributes), 'zarr_format': 3,
            'consolidated_metadata': {'kind': 'inline', 'must_understand': False, 'metadata': metadata},
            'node_type': 'group'}
    with open(os.path.join(store, 'zarr.json'), 'w', encoding='utf-8') as f:
        f.write(json.dumps(meta, indent=2))


def label_coordinates(arrays: Mapping[str, tuple]) -> dict[str, tuple[str, ...]]:
    """{dim: labels} for the labelled dims of `arrays` that can be coordinates of the group."""
    found: dict[str, tuple | None] = {}
    for names, labels in arrays.values():
        for dim, dim_labels in zip(names, labels, strict=True):
            if dim_labels is not None:
                found[dim] = tuple(dim_labels) if found.get(dim, tuple(dim_labels)) == tuple(dim_labels) else None
    return {dim: labels for dim, labels in found.items() if labels is not None and dim not in arrays and _usable(dim)}


def config_attributes(cls: type, config: Mapping[str, object]) -> dict:
    """The group attributes of an instance of `cls`: `lazyphi_class` and each config value.

    Booleans, numbers and strings stay as they are; every other value becomes its repr.
    """
    attributes = {'lazyphi_class': class_path(cls)}
    for name, value in config.items():
        plain = type(value) in _JSON_TYPES and not (type(value) is float and not np.isfinite(value))
        attributes[name] = value if plain else repr(value)
    return attributes


def _usable(dim: str) -> bool:
    try:
        check_name(dim, 'A coordinate')
    except ValueError:
        return False
    return True


def describe_save(store: str, obj, root: dict) -> None:
    """`describe_for_xarray` for a save of `obj` whose manifest node is `root`: each group's arrays and, for
    groups of dataclass instances, their class and config values as attributes."""
    groups = {}
    _collect(obj, root, groups)
    lone = root['value'] if root['kind'] == 'expanded' else root
    if lone['kind'] == 'tensor':  # a lone tensor lies in the root group
        groups[''] = ({lone['array']: (lone['dims'], lone['labels'])}, {})
    describe_for_xarray(store, groups)


def _collect(value, node: dict, groups: dict) -> None:
    """Add the group of `node` (a value of the saved tree and its manifest node) and those below it to `groups`."""
    if node['kind'] == 'dataclass':
        attributes = config_attributes(type(value), {f.name: getattr(value, f.name) for f in config_fields(value)
                                                     if hasattr(value, f.name)})
        children = {**{n: (getattr(value, n, None), c) for n, c in node['fields'].items()},
                    **{n: (None, c) for n, c in node['cache'].items()}}
    elif node['kind'] in ('dict', 'list', 'tuple'):
        attributes = {}
        items = node['items']
        values = list(value.values()) if isinstance(value, dict) else list(value)
        children = dict(enumerate(zip(values, items.values() if isinstance(items, dict) else items, strict=True)))
    else:
        return
    stored = [c['value'] if c['kind'] == 'expanded' else c for _, c in children.values()]  # expanded: its values
    arrays = {c['array'].rpartition('/')[2]: (c['dims'], c['labels']) for c in stored
              if c['kind'] == 'tensor' and c['dims']}
    groups[node['group']] = (arrays, attributes)
    for child_value, child in children.values():
        _collect(child_value, child, groups)
