"""dask-jobqueue's job machinery without a batch system: its LocalCluster starts workers as local 'jobs'."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip('dask_jobqueue')

SCRIPT = textwrap.dedent('''
    import sys
    from dataclasses import dataclass
    import numpy as np
    from distributed import Client
    from dask_jobqueue.local import LocalCluster
    from lazyphi import cache, math
    from lazyphi.dataclasses import cached_property
    from lazyphi.math import Tensor, batch, spatial
    from lazyphi.parallel import parallel_compute

    @dataclass(frozen=True)
    class Squares:
        data: Tensor

        @cached_property
        def squared(self) -> Tensor:
            return self.data ** 2

    if __name__ == '__main__':
        cache_dir = sys.argv[1]
        cluster = LocalCluster(cores=1, memory='1GB', processes=1, scheduler_options={'dashboard_address': ':0'})
        cluster.scale(jobs=2)
        client = Client(cluster)
        client.wait_for_workers(2, timeout=120)
        data = math.random_normal(batch(b=8), spatial(x=16))
        s = Squares(data)
        parallel_compute(s, [Squares.squared], scheduler=client, cache_dir=cache_dir, progress=False)
        np.testing.assert_allclose(s.squared.numpy('b,x'), data.numpy('b,x') ** 2, rtol=1e-6)
        (info,) = cache.list_results(cache_dir)
        assert info.complete
        print('jobs', len(cluster.workers), 'OK')
        client.close()
        cluster.close()
''')


@pytest.mark.slow
def test_parallel_compute_through_dask_jobqueue_local_cluster(tmp_path):
    script = tmp_path / 'jobs.py'
    script.write_text(SCRIPT)
    env = {**os.environ, 'PYTHONWARNINGS': 'ignore'}
    result = subprocess.run([sys.executable, str(script), str(tmp_path / 'cache')], capture_output=True, text=True,
                            timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'jobs 2 OK' in result.stdout
