"""Layer jobs on Dask (sparseopt_torch.distributed): in process vs a LocalCluster and a
cluster given by address, bit-identical results on real layer problems, heaviest first,
exactly-once callbacks with a killed worker, errors, an unreachable scheduler.

One LocalCluster of 2 single-threaded workers serves the module (starting one costs
seconds). Its workers import this module by name to run the job functions below (spawned
processes get the driver's sys.path, which pytest's default import mode extends).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from sparseopt.patterns import NM
from sparseopt_torch.distributed import LayerExecutor, LayerJob, _run_task, run_layer_jobs
from sparseopt_torch.prune import _prune_layer

OPTIONS = {"wanda": {}, "sparsegpt": {}, "prox": {"max_iter": 200}}
RESULT_TENSORS = ("W", "W_nogd")
RESULT_VALUES = ("loss", "loss_gd", "base_loss", "info")


def _problem(seed, d_out=8, d_in=16):
    """A float64 layer: W and an SPD Hessian H = X X' / n + small ridge."""
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(d_out, d_in, dtype=torch.float64, generator=g)
    X = torch.randn(d_in, 3 * d_in, dtype=torch.float64, generator=g)
    return W, X @ X.T / X.shape[1] + 1e-3 * torch.eye(d_in, dtype=torch.float64)


def _layer_kwargs(method, seed):
    W, H = _problem(seed)
    return {"W_t": W, "H_t": H, "method": method, "pattern": NM(2, 4), "refine_steps": 3,
            "options": OPTIONS[method], "mask": None}


def _jobs():
    """Six real layer problems (three methods, two seeds), listed lightest first."""
    return [LayerJob(f"block.{seed}.{method}", _prune_layer, _layer_kwargs(method, seed),
                     cost=float(3 * seed + k))
            for seed in (0, 1) for k, method in enumerate(OPTIONS)]


# Job functions: top-level, so that workers import them from this module.

def _die_once(marker, **kwargs):
    """Kill this process on the first attempt (after leaving a marker file), solve the
    layer on the rerun."""
    if not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return {**_prune_layer(**kwargs), "pid": os.getpid()}


def _sleep_then_start_time(seconds):
    start = time.time()
    time.sleep(seconds)
    return start


def _fail(message):
    raise ValueError(message)


def _pools():
    """Thread counts and environment seen by a job."""
    import numba

    return {"torch": torch.get_num_threads(), "numba": numba.get_num_threads(),
            "MALLOC_TRIM_THRESHOLD_": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
            "NUMBA_NUM_THREADS": os.environ.get("NUMBA_NUM_THREADS"),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def _device_type(x):
    return x.device.type


def _collect(results, calls=None):
    def on_done(name, res):
        if calls is not None:
            calls.append(name)
        assert name not in results, f"on_done called twice for {name}"
        results[name] = res
    return on_done


def _assert_same(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        for key in RESULT_TENSORS:
            assert torch.equal(a[name][key], b[name][key]), (name, key)
        for key in RESULT_VALUES:
            assert a[name][key] == b[name][key], (name, key, a[name][key], b[name][key])


def _layer_tasks(ex):
    """Keys of this module's layer tasks still known to the scheduler."""
    return ex.client.run_on_scheduler(
        lambda dask_scheduler: [k for k in dask_scheduler.tasks if "sparseopt-layer" in str(k)])


def _wait_no_tasks(ex, seconds=10.0):
    end = time.time() + seconds
    while _layer_tasks(ex) and time.time() < end:
        time.sleep(0.05)
    return _layer_tasks(ex)


@pytest.fixture(scope="module")
def cluster():
    """2 local single-threaded workers, each labelled with a GPU resource (a label only:
    the tensors stay on the CPU) so that the resources path is exercised."""
    with LayerExecutor(workers=2, resources={"GPU": 1}) as ex:
        yield ex


@pytest.fixture(scope="module")
def by_address(cluster):
    """The same cluster reached by its address, as with --scheduler tcp://..."""
    with LayerExecutor(scheduler=cluster.address) as ex:
        yield ex


@pytest.fixture(scope="module")
def reference():
    """The engine's default path: each job called here, with the driver's thread count."""
    return {job.name: job.fn(**job.kwargs) for job in _jobs()}


def test_in_process_runs_in_order_without_dask():
    # A fresh interpreter: the default path must not even import Dask.
    code = textwrap.dedent("""
        import sys
        from sparseopt_torch.distributed import LayerExecutor, LayerJob, _run_task, run_layer_jobs
        calls = []
        jobs = [LayerJob(n, round, {"number": a, "ndigits": 1}, cost=a) for n, a in
                (("x", 1.04), ("y", 9.96), ("z", 5.55))]
        run_layer_jobs(jobs, lambda n, r: calls.append((n, r)))
        with LayerExecutor(threads=1) as ex:
            ex.run(jobs, lambda n, r: calls.append((n, r)), progress=True)
        assert calls == [("x", 1.0), ("y", 10.0), ("z", 5.5)] * 2, calls
        assert not any(m.split(".")[0] in ("dask", "distributed") for m in sys.modules)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_in_process_matches_direct_calls(reference):
    results, calls = {}, []
    run_layer_jobs(_jobs(), _collect(results, calls))
    assert calls == [job.name for job in _jobs()]  # in the given order
    _assert_same(results, reference)


@pytest.mark.parametrize("where", ["local", "address"])
def test_dask_bit_identical_to_in_process(where, cluster, by_address, reference):
    ex = cluster if where == "local" else by_address
    results, calls = {}, []
    ex.run(_jobs(), _collect(results, calls))
    assert sorted(calls) == sorted(j.name for j in _jobs())
    pinned = {}
    with LayerExecutor(threads=1) as local:  # the tasks' thread count, in this process
        local.run(_jobs(), _collect(pinned))
    _assert_same(results, pinned)
    _assert_same(results, reference)  # these small problems do not split across threads
    assert all(results[n]["W"].device.type == "cpu" for n in results)


def test_run_layer_jobs_on_an_executor(cluster, reference):
    results = {}
    run_layer_jobs(_jobs(), _collect(results), executor=cluster, progress=True)
    _assert_same(results, reference)


def test_workers_get_fixed_threads_and_no_malloc_trim(cluster):
    seen = {}
    cluster.run([LayerJob("pools", _pools, {}, 1.0)], _collect(seen))
    assert seen["pools"]["torch"] == 1 and seen["pools"]["numba"] == 1
    assert seen["pools"]["MALLOC_TRIM_THRESHOLD_"] is None
    assert seen["pools"]["NUMBA_NUM_THREADS"] == "1" == seen["pools"]["OMP_NUM_THREADS"]


def test_heaviest_first(cluster, monkeypatch):
    """Jobs listed lightest first are submitted heaviest first with strictly decreasing
    Dask priorities. (The start order on the workers is the scheduler's: on a loaded
    machine a busy worker process can start a lighter task first, so it is not asserted.)"""
    submitted = []
    submit = cluster.client.submit

    def spy(*args, key, priority, **kwargs):
        submitted.append((key.rsplit("-", 1)[-1], priority))
        return submit(*args, key=key, priority=priority, **kwargs)

    monkeypatch.setattr(cluster.client, "submit", spy)
    jobs = [LayerJob(f"j{c}", _sleep_then_start_time, {"seconds": 0.01}, cost=float(c))
            for c in range(6)]
    starts = {}
    cluster.run(jobs, _collect(starts))
    assert [name for name, _ in submitted] == [f"j{c}" for c in range(5, -1, -1)]
    priorities = [p for _, p in submitted]
    assert all(a > b for a, b in zip(priorities, priorities[1:]))
    assert sorted(starts) == [f"j{c}" for c in range(6)]


def test_killed_worker_reruns_the_task_exactly_once(cluster, reference, tmp_path):
    marker = str(tmp_path / "killed")
    jobs = []
    for job in _jobs():
        if job.name == "block.1.prox":  # the heaviest job: started first, killed mid-way
            job = LayerJob(job.name, _die_once, {**job.kwargs, "marker": marker}, job.cost)
        jobs.append(job)
    results, calls = {}, []
    cluster.run(jobs, _collect(results, calls))
    with open(marker) as fh:  # the first attempt's worker was killed, another one reran it
        assert int(fh.read()) != results["block.1.prox"]["pid"]
    assert sorted(calls) == sorted(j.name for j in jobs)  # once each
    _assert_same(results, reference)


def test_job_error_names_the_layer_and_cancels_the_rest(cluster):
    jobs = [LayerJob(f"slow{c}", _sleep_then_start_time, {"seconds": 0.5}, cost=1.0)
            for c in range(4)]
    jobs.append(LayerJob("bad.layer", _fail, {"message": "boom"}, cost=10.0))
    calls = []
    with pytest.raises(ValueError, match="boom") as info:
        cluster.run(jobs, lambda name, res: calls.append(name))
    assert any("bad.layer" in note for note in info.value.__notes__)
    assert calls == []
    assert _wait_no_tasks(cluster) == []

    with pytest.raises(ValueError, match="boom") as info:  # in process alike
        LayerExecutor().run(jobs[-1:], lambda name, res: calls.append(name))
    assert any("bad.layer" in note for note in info.value.__notes__)


def test_on_done_error_stops_everything(cluster):
    jobs = [LayerJob(f"j{c}", _sleep_then_start_time, {"seconds": 0.05 + 0.3 * c}, cost=-c)
            for c in range(5)]
    calls = []

    def on_done(name, res):
        calls.append(name)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cluster.run(jobs, on_done)
    # exactly one on_done, never another after it (which job finished first is the
    # scheduler's business: on a loaded machine j1 can overtake j0)
    assert len(calls) == 1 and calls[0] in {"j0", "j1"}
    first = list(calls)
    assert _wait_no_tasks(cluster) == []
    time.sleep(0.3)
    assert calls == first


def test_resources_and_a_client_as_scheduler(cluster, reference):
    with pytest.warns(RuntimeWarning, match="offers resources"):
        LayerExecutor(scheduler=cluster.address, resources={"TPU": 1}).start().close()
    results = {}
    with LayerExecutor(scheduler=cluster.client, resources={"GPU": 1}) as ex:  # the labels
        ex.run(_jobs(), _collect(results))
    assert cluster.client.status == "running"  # a given Client is not closed
    _assert_same(results, reference)


def test_tensors_travel_on_the_cpu_and_compute_where_they_came_from():
    # No GPU here: the meta device stands in for "cuda" (moved there, never computed).
    assert _run_task(_device_type, {"x": torch.ones(2)}, 1, None, {"x": "meta"}) == "meta"
    assert _run_task(_device_type, {"x": torch.ones(2)}, 1, "meta", {}) == "meta"
    assert _run_task(torch.clone, {"input": torch.ones(2)}, 1, None, {}).device.type == "cpu"


def test_run_layer_jobs_with_its_own_local_cluster(reference):
    environ = dict(os.environ)
    results = {}
    run_layer_jobs(_jobs(), _collect(results), workers=1, progress=True)
    _assert_same(results, reference)
    assert dict(os.environ) == environ  # the nannies' settings do not leak into ours


def test_unreachable_scheduler_fails_fast_before_any_job():
    calls = []
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match="tcp://127.0.0.1:9"):
        run_layer_jobs(_jobs(), lambda name, res: calls.append(name),
                       scheduler="tcp://127.0.0.1:9", timeout=1)
    assert time.perf_counter() - t0 < 8
    assert calls == []
    with pytest.raises(ValueError, match="not a valid address"):
        LayerExecutor(scheduler="nonsense://here", timeout=1).start()


@pytest.mark.parametrize("kwargs, match", [
    ({"workers": 0}, "workers must be a positive integer"),
    ({"workers": -2}, "workers must be a positive integer"),
    ({"workers": 1.5}, "workers must be a positive integer"),
    ({"workers": True}, "workers must be a positive integer"),
    ({"workers": "2"}, "workers must be a positive integer"),
    ({"workers": 2, "scheduler": "tcp://127.0.0.1:8786"}, "exclusive"),
    ({"scheduler": ""}, "scheduler must be an address"),
    ({"scheduler": 8786}, "scheduler must be an address"),
    ({"resources": {"GPU": 1}}, "resources need a cluster"),
    ({"workers": 1, "resources": {"GPU": 0}}, "resources must be a dict"),
    ({"workers": 1, "resources": ["GPU"]}, "resources must be a dict"),
    ({"threads": 0}, "threads must be a positive integer"),
    ({"timeout": 0}, "timeout must be a positive number"),
    ({"device": "nowhere"}, "device .nowhere. is not a torch device"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LayerExecutor(**kwargs)
    if "threads" not in kwargs and "device" not in kwargs:
        with pytest.raises(ValueError, match=match):
            run_layer_jobs(_jobs(), lambda name, res: None, **kwargs)


def test_bad_jobs_fail_before_a_cluster_starts():
    job = _jobs()[0]
    with pytest.raises(ValueError, match="appears twice"):
        run_layer_jobs([job, job], lambda name, res: None, workers=1)
    with pytest.raises(TypeError, match="LayerJob"):
        run_layer_jobs([("a", round)], lambda name, res: None, workers=1)
    with pytest.raises(ValueError, match="cost must be finite"):
        run_layer_jobs([LayerJob("a", round, {}, float("nan"))], lambda n, r: None, workers=1)
    with pytest.raises(ValueError, match="either executor"):
        run_layer_jobs([job], lambda name, res: None, executor=LayerExecutor(), workers=1)
    run_layer_jobs([], lambda name, res: None, workers=1)  # nothing to do: no cluster


@pytest.mark.parametrize("sequential", [False, True])
def test_prune_model_on_the_cluster_equals_the_in_process_engine(cluster, tmp_path, sequential):
    """The whole engine with executor=: every block's layer problems as Dask tasks; the run
    folder and the model end bit-identical to the in-process engine (tiny layers: the
    losses agree exactly at any thread count)."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from _models import tiny_config
    from sparseopt_torch.prune import prune_model

    def llama():
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(tiny_config("llama", layers=2)).eval()

    g = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(5, 30000, (2, 8), generator=g),
                "attention_mask": torch.ones(2, 8, dtype=torch.long)} for _ in range(2)]
    runs = {}
    for where, ex in (("local", None), ("dask", cluster)):
        runs[where] = prune_model(llama(), batches, method="sparsegpt", refine_steps=3,
                                  sequential=sequential, out=str(tmp_path / where),
                                  executor=ex, progress=False)
    for a, b in zip(runs["local"].records, runs["dask"].records):
        assert a.name == b.name and a.loss == b.loss and a.loss_gd == b.loss_gd
        fa = load_file(str(tmp_path / "local" / "layers" / f"{a.name}.safetensors"))
        fb = load_file(str(tmp_path / "dask" / "layers" / f"{a.name}.safetensors"))
        assert all(torch.equal(fa[k], fb[k]) for k in fa), a.name
