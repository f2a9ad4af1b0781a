"""`import lazyphi` must leave the heavy libraries unloaded: they are imported when first used."""

import json
import subprocess
import sys

HEAVY = ('torch', 'jax', 'jaxlib', 'tensorflow', 'scipy', 'dask', 'distributed', 'zarr')


def _modules_after(code: str) -> set:
    script = f'import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))'
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_lazyphi_loads_no_heavy_library():
    loaded = _modules_after('import lazyphi, lazyphi.math, lazyphi.backend')
    assert not {m.split('.')[0] for m in loaded} & set(HEAVY)


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
