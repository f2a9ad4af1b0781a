"""The Dask dashboard works after a plain install: bokeh is a dependency, and the status page renders."""

import tomllib
import urllib.parse
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def test_bokeh_is_a_dependency_of_a_plain_install():
    dependencies = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['dependencies']
    [bokeh] = [Requirement(d) for d in dependencies if Requirement(d).name == 'bokeh']
    assert not bokeh.specifier.contains('3.0.2')  # distributed's dashboard needs bokeh>=3.1.0
    assert bokeh.specifier.contains(version('bokeh'))


@pytest.mark.slow
def test_the_dashboard_status_page_renders_without_the_bokeh_error():
    distributed = pytest.importorskip('distributed')
    from distributed.versions import BOKEH_REQUIREMENT

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address='127.0.0.1:0') as cluster:
        port = urllib.parse.urlsplit(cluster.dashboard_link).port  # the link names the host's address
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/status', timeout=60) as response:
            status, page = response.status, response.read().decode()
    assert status == 200
    assert f'Dask needs {BOKEH_REQUIREMENT}' not in page and 'Dask needs bokeh' not in page
    assert 'static/js/bokeh.min.js' in page, page[:2000]  # the Bokeh application, not the fallback page
