"""Tests of lazyphi.backend profiling: recording, summaries, Chrome traces, retiming and restoring backends."""

import io
import json
import threading

import numpy as np
import pytest
from scipy import special

from lazyphi.backend import NUMPY, OBJECTS, Profile, choose_backend, get_current_profile, profile, profile_function
from lazyphi.backend._numpy import NumPyBackend

A = np.arange(12, dtype=np.float32).reshape(3, 4)
B = np.ones((3, 4), np.float32)


def compute(a, b):
    return NUMPY.sum(NUMPY.add(a, b)), NUMPY.divide_no_nan(a, b)


def _ops(prof):
    return [(call.backend, call.op) for call in prof.calls]


def test_profile_records_backend_calls_and_restores_backends():
    with profile() as prof:
        assert get_current_profile() is prof and NUMPY.add is not np.add
        compute(A, B)
    assert get_current_profile() is None
    assert NUMPY.add is np.add and 'divide_no_nan' not in vars(NUMPY)  # originals back, no wrapper left
    ops = _ops(prof)
    assert ('numpy', 'add') in ops and ('numpy', 'sum') in ops and ('numpy', 'divide_no_nan') in ops
    assert ('numpy', 'where') in ops  # nested calls of a composition are recorded too
    add = next(call for call in prof.calls if call.op == 'add')
    assert add.inputs == ['ndarray(3, 4) float32', 'ndarray(3, 4) float32'] and add.outputs == ['ndarray(3, 4) float32']
    assert add.duration >= 0 and 0 <= add.start <= prof.duration
    assert add.caller.startswith('compute (test_profile.py:')  # the first frame outside the backend layer


def test_profiled_backends_show_as_profiled_and_are_still_chosen(backend):
    native = backend.as_tensor([1.0, 2.0])
    with profile():
        assert choose_backend(native) is backend
        assert str(backend) == repr(backend) == f'profile[{backend.name}]'
        with profile(backends=[backend]):
            assert str(backend) == f'profile[{backend.name}]'
        assert str(backend) == f'profile[{backend.name}]'
    assert str(backend) == backend.name


def test_profile_ignores_queries_and_unprofiled_backends():
    with profile(backends=[OBJECTS]) as prof:
        NUMPY.add(A, B)
        OBJECTS.stack(['a', 'b'])
        OBJECTS.is_tensor('a')
    assert _ops(prof) == [('object', 'stack')]


def test_profile_without_trace_has_no_callers():
    with profile(trace=False) as prof:
        NUMPY.exp(A)
    assert [call.caller for call in prof.calls] == [None]


def test_backend_call_is_recorded_under_its_name():
    with profile() as prof:
        NUMPY.call(np.negative, A, name='negate')
        NUMPY.call(np.negative, A)
    assert [call.op for call in prof.calls] == ['call negate', 'call negative']


def test_summary_and_print():
    with profile() as prof:
        for _ in range(3):
            NUMPY.add(A, B)
        NUMPY.exp(A)
    rows = {row['op']: row for row in prof.summary()}
    assert rows['add']['calls'] == 3 and rows['exp']['calls'] == 1
    assert rows['add']['total'] == pytest.approx(sum(c.duration for c in prof.calls if c.op == 'add'))
    assert rows['add']['max'] >= rows['add']['mean'] > 0
    prof.add_external_message("compiled in 0 s")
    out = io.StringIO()
    prof.print(min_duration=0, file=out)
    text = out.getvalue()
    assert text.startswith(f"Profile: {prof.duration:.6f} s, 4 backend calls") and "compiled in 0 s" in text
    assert 'operation' in text and 'share' in text
    add_line = next(line for line in text.splitlines() if ' add ' in line)
    assert add_line.split()[:3] == ['numpy', 'add', '3']
    out = io.StringIO()
    prof.print(min_duration=10.0, file=out)
    assert ' add ' not in out.getvalue()


def test_print_defaults_to_stdout_and_hides_calls_under_a_millisecond_as_phiml(capsys):
    with profile() as prof:
        NUMPY.add(A, B)
    prof.print()
    text = capsys.readouterr().out
    assert 'hiding entries under 1.00 ms' in text and ' add ' not in text
    prof.print(0)
    assert ' add ' in capsys.readouterr().out


def test_print_places_the_calling_code_at_code_col_cropped_to_code_len():
    with profile(trace=True) as prof:
        compute(A, B)
    out = io.StringIO()
    prof.print(min_duration=0, code_col=100, code_len=12, file=out)
    text = out.getvalue()
    by_code = text.splitlines()[text.splitlines().index('By calling code:') + 1:]
    assert [line[100:] for line in by_code] == ['compute (...']
    assert 'add, sum' in by_code[0] and by_code[0].split()[2:4] == ['6', 'calls']
    out = io.StringIO()
    prof.print(min_duration=0, code_col=0, code_len=200, file=out)
    assert out.getvalue().splitlines()[-1].endswith('divide_no_nan compute (test_profile.py:19)')
    with pytest.raises(ValueError, match='code_col and code_len must be at least 0, but got -1 and 50'):
        prof.print(code_col=-1)


def test_saved_chrome_trace_parses_and_has_complete_events(tmp_path):
    path = tmp_path / 'trace.json'
    with profile(save=path) as prof:
        compute(A, B)
    events = json.loads(path.read_text())  # the JSON array form of Chrome's format, as phiml writes it
    complete = [e for e in events if e['ph'] == 'X']
    assert len(complete) == len(prof.calls) > 0
    for event in complete:
        assert {'name', 'ph', 'ts', 'dur', 'pid', 'tid', 'args'} <= event.keys()
        assert event['dur'] >= 0 and event['ts'] >= 0 and isinstance(event['pid'], int)
    assert 'numpy.add' in {e['name'] for e in complete}
    assert any(e['ph'] == 'M' and e['name'] == 'process_name' for e in events)
    add = next(e for e in complete if e['name'] == 'numpy.add')
    assert add['args']['inputs'] == ['ndarray(3, 4) float32'] * 2 and 'caller' in add['args']
    prof.save_trace(tmp_path / 'again.json')
    assert json.loads((tmp_path / 'again.json').read_text()) == events


def test_calls_from_other_threads_are_recorded_with_their_thread():
    with profile() as prof:
        NUMPY.add(A, B)
        thread = threading.Thread(target=NUMPY.exp, args=(A,))
        thread.start()
        thread.join()
    threads = {call.op: call.thread for call in prof.calls}
    assert threads['add'] == threading.get_ident() and threads['exp'] != threads['add']
    assert len({e['tid'] for e in prof.trace_events() if e['ph'] == 'M' and e['name'] == 'thread_name'}) == 2


def test_nested_profiles_both_record_and_restore_in_order():
    with profile() as outer:
        NUMPY.exp(A)
        with profile() as inner:
            assert get_current_profile() is inner
            NUMPY.add(A, B)
        assert get_current_profile() is outer and NUMPY.add is not np.add
        NUMPY.sqrt(A)
    assert NUMPY.add is np.add and NUMPY.exp is np.exp and NUMPY.sqrt is np.sqrt
    assert [c.op for c in inner.calls] == ['add'] and [c.op for c in outer.calls] == ['exp', 'add', 'sqrt']


def test_backends_are_restored_when_the_block_raises():
    with pytest.raises(ZeroDivisionError), profile():
        NUMPY.add(A, B)
        _ = 1 / 0
    assert NUMPY.add is np.add and get_current_profile() is None


def test_lazily_imported_operation_is_profiled_and_bound_afterwards():
    fresh = NumPyBackend()
    with profile(backends=[fresh]) as prof:
        fresh.log_gamma(np.float32([2.0]))
        fresh.log_gamma(np.float32([3.0]))
    assert [c.op for c in prof.calls] == ['log_gamma', 'log_gamma']
    fresh.log_gamma(np.float32([4.0]))
    assert fresh.log_gamma is special.gammaln


def test_profile_function_retimes_and_averages():
    calls = []

    def function(a, b):
        calls.append(1)
        return compute(a, b)
    prof = profile_function(function, (A,), {'b': B}, warmup=2, call_count=3)
    assert isinstance(prof, Profile) and len(calls) == 2 + 1 + 1 + 2  # warmup, profiled, retimed, averaged
    assert ('numpy', 'add') in _ops(prof) and all(c.duration >= 0 for c in prof.calls)
    assert prof.duration > 0 and NUMPY.add is np.add
    untimed = profile_function(function, (A, B), retime=False, warmup=0)
    assert len(untimed.calls) == len(prof.calls)


def test_retiming_different_calls_raises():
    count = iter(range(10))

    def unsteady():
        for _ in range(next(count) + 1):
            NUMPY.exp(A)
    with pytest.raises(RuntimeError, match="Retiming made 2 backend calls but the profile recorded 1"):
        profile_function(unsteady, warmup=0)
    assert NUMPY.exp is np.exp


def test_retime_context_replaces_timings():
    with profile() as prof:
        NUMPY.add(A, B)
    recorded = prof.calls[0].duration
    with prof.retime():
        NUMPY.add(A, B)
    assert prof.calls[0].duration >= 0 and len(prof.calls) == 1
    assert prof.calls[0].duration != recorded or recorded == 0
