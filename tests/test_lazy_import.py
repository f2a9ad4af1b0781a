"""`import lazyphi` must leave the heavy libraries, and lazyphi's modules beyond its core, unloaded: they are imported
when first used."""

import json
import subprocess
import sys

import pytest

HEAVY = ('torch', 'jax', 'jaxlib', 'tensorflow', 'scipy', 'dask', 'distributed', 'zarr')


def _modules_after(code: str) -> set:
    script = f'import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))'
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_lazyphi_loads_no_heavy_library():
    loaded = _modules_after('import lazyphi, lazyphi.math, lazyphi.backend, lazyphi.nn')
    assert not {m.split('.')[0] for m in loaded} & set(HEAVY)


def test_import_lazyphi_leaves_numpy_random_unloaded():
    """numpy.random took about a sixth of `import lazyphi`: its generator is made on the first random tensor."""
    assert 'numpy.random' not in _modules_after('import lazyphi')
    assert 'numpy.random' in _modules_after('from lazyphi import math\nmath.random_normal(math.batch(b=2))')


def test_tensor_work_on_numpy_loads_no_heavy_library():
    loaded = _modules_after('from lazyphi import math\n'
                            't = math.random_normal(math.batch(b=3), math.spatial(x=8))\n'
                            'math.fft(t).numpy("b,x"); math.sum(t * 2, "x"); math.stack([t, t], math.batch("s"))')
    assert not {m.split('.')[0] for m in loaded} & set(HEAVY)


def test_the_check_would_notice_an_import():
    loaded = _modules_after('import lazyphi, dask')
    assert 'dask' in {m.split('.')[0] for m in loaded}


def test_loading_a_save_and_reading_it_loads_no_heavy_library(tmp_path):
    import lazyphi
    from lazyphi import math

    lazyphi.save({'a': math.random_normal(math.batch(b=3), math.spatial(x=8))}, tmp_path / 'saved')
    loaded = _modules_after(f'import lazyphi\nlazyphi.load({str(tmp_path / "saved")!r})["a"].numpy("b,x")')
    assert not {m.split('.')[0] for m in loaded} & set(HEAVY)  # uncompressed chunk files need no Zarr


def test_dir_lists_the_lazily_loaded_names_and_no_imported_helper_module():
    """Tab completion (`lazyphi.parallel.<TAB>`) offers every public name, before any of them was used."""
    script = ('import json, types, lazyphi, lazyphi.storage\n'
              'packages = [lazyphi, lazyphi.math, lazyphi.backend, lazyphi.dataclasses, lazyphi.parallel, '
              'lazyphi.storage]\n'
              'print(json.dumps({p.__name__: [sorted(set(p.__all__) - set(dir(p))), '
              'sorted(n for n in dir(p) if not n.startswith("_") and isinstance(getattr(p, n), types.ModuleType) '
              'and not getattr(p, n).__name__.startswith("lazyphi"))] for p in packages}))')
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    listed = json.loads(out.splitlines()[-1])
    assert listed == {name: [[], []] for name in listed}, listed
    assert len(listed) == 6


def test_import_lazyphi_loads_only_the_core_of_math():
    """The packages above math and math's modules beyond tensor(), the dims functions and Tensor's operators load on
    first use (issue #34: `import lazyphi` took about 430 ms, most of it lazyphi's own modules)."""
    loaded = _modules_after('import lazyphi')
    deferred = {'lazyphi.dataclasses', 'lazyphi.parallel', 'lazyphi.storage', 'lazyphi._verify', 'lazyphi.math._ops',
                'lazyphi.math._reduce', 'lazyphi.math._sparse', 'lazyphi.math._linalg', 'lazyphi.math._minimize',
                'lazyphi.math._optimize', 'lazyphi.math._differences', 'lazyphi.math.extrapolation'}
    assert not deferred & loaded
    assert {'lazyphi.math._tensor', 'lazyphi.math._creation', 'lazyphi.math._dims'} <= loaded


def test_a_lazily_loaded_name_is_loaded_once_and_kept():
    """The first use imports the module and keeps the value in the package; other names and submodules resolve."""
    code = ('import lazyphi, sys\n'
            'first = lazyphi.math.svd\n'
            'kept = "svd" in vars(lazyphi.math) and lazyphi.math.svd is first\n'
            'kept = kept and "lazyphi.math._linalg" in sys.modules\n'
            'from lazyphi.math import pairwise_distances, pairwise_differences\n'
            'print(kept, pairwise_distances is pairwise_differences, lazyphi.math.sum is lazyphi.math.sum_,\n'
            '      lazyphi.math.perm.__name__, lazyphi.dataclasses.__name__,\n'
            '      lazyphi.PERIODIC is lazyphi.math.extrapolation.PERIODIC)')
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout.split()
    assert out == ['True', 'True', 'True', 'lazyphi.math.perm', 'lazyphi.dataclasses', 'True']


def test_an_unknown_name_raises_attribute_error():
    import lazyphi
    from lazyphi import math

    with pytest.raises(AttributeError, match=r"'lazyphi\.math' has no attribute 'no_such_function'"):
        math.no_such_function  # noqa: B018
    assert not hasattr(lazyphi, 'no_such_function')


def test_a_dask_array_becomes_a_tensor_before_lazyphi_parallel_was_used():
    """The dask tensor source is registered by `import lazyphi`, not by `lazyphi.parallel`, which loads on use."""
    code = ('import sys\nfrom lazyphi import math\nimport dask.array as da\n'
            'unused = "lazyphi.parallel" not in sys.modules\n'
            'print(unused, type(math.tensor(da.ones(3), math.spatial("x"))).__name__)')
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout.split()
    assert out == ['True', 'DaskTensor']
