"""Layer problems as tasks on a Dask cluster (``distributed``), or in this process.

The engine (:func:`~sparseopt_torch.prune.prune_model`) turns the layers of a block (of the
whole model in independent mode) into :class:`LayerJob` objects, each a top-level function
and its keyword arguments (the layer's W and H, the method, ...), and hands them to
:func:`run_layer_jobs` or to a :class:`LayerExecutor` with a callback ``on_done(name,
result)`` that writes the finished layer. Three places to run them:

- in this process, in the given order (the default; Dask is not even imported);
- ``workers=N``: a ``distributed.LocalCluster`` of N single-threaded worker processes on
  this machine, started by the executor and closed with it;
- ``scheduler="tcp://host:port"``: an existing cluster, e.g. started by dask-jobqueue
  (Slurm, PBS, ...), dask-kubernetes or ``dask scheduler`` / ``dask worker`` by hand.

On a cluster the jobs are submitted heaviest first (task priority from ``cost``) and the
callback runs in the driver as each one finishes, exactly once per job: a worker that dies
mid-task makes the scheduler rerun the task elsewhere (up to
``distributed.scheduler.allowed-failures`` times), and ``as_completed`` yields every future
once. If a job or the callback raises, the remaining tasks are cancelled and the exception
is re-raised in the driver before anything else is handed to the callback.

Determinism. A job's result is a function of its inputs and of its thread count: the CPU
path of the core runs on NumPy views (OpenBLAS), Numba's parallel loops and torch, and a
float64 sum split over two threads rounds differently from one over one. So every job runs
under a fixed count (``threads``) in all three pools, restored afterwards: by default 1 on
a cluster (single-threaded workers, whatever machine they are on), the driver's setting in
process. The in-process default is kept because it is the engine's default path, one layer
at a time on all cores: pinning it to 1 thread made MiniLM's prox layers 1.6x slower on a
quiet 2-core machine (``benchmarks/adapter_dask.py``; on a loaded one, where other
processes hold the cores, 2 threads were up to 5x slower than 1). Hence:

- Dask results equal an in-process run with ``LayerExecutor(threads=1)`` bit for bit
  (weights, masks, losses; tests/adapter/test_distributed.py on wanda, sparsegpt and prox
  problems, including a killed worker; ``benchmarks/adapter_dask.py`` on MiniLM);
- against the in-process default with 2 threads, MiniLM's prox weights and masks were
  identical and the float64 losses differed in the last bits.

Workers' environment. A ``LocalCluster`` sets the BLAS/OpenMP and Numba pools of its workers
to ``threads`` and drops Dask's ``MALLOC_TRIM_THRESHOLD_=65536``: that setting also pins
glibc's mmap threshold, so every temporary of a layer problem is a fresh mmap, and prox on
MiniLM's layers ran 2x slower. For workers started elsewhere (``dask worker``, dask-jobqueue)
do the same in their Dask configuration::

    distributed:
      nanny:
        pre-spawn-environ:
          MALLOC_TRIM_THRESHOLD_: null

Workers must run the same Python environment as the driver (sparseopt and torch installed,
same versions) and can import ``sparseopt_torch``; job functions are pickled by reference.

Devices. Tensors are sent to the workers on the CPU (a CUDA tensor cannot be unpickled on a
worker without one); a task moves them back to the device type they came from (``cuda``:
the worker's current GPU) unless ``device`` says otherwise, and returns its tensors on the
CPU. GPU workers are selected through Dask resources: start one worker per GPU with
``--resources GPU=1`` (and ``--nthreads 1``) and pass ``resources={"GPU": 1}``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import uuid
import warnings
from dataclasses import dataclass
from typing import Callable

from .blocks import map_tensors
from .layers import parse_device

__all__ = ["LayerJob", "LayerExecutor", "run_layer_jobs"]

_DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class LayerJob:
    """One layer problem: ``fn(**kwargs)`` computes its result.

    Attributes
    ----------
    name : str
        The layer's name, unique within one call of :func:`run_layer_jobs`.
    fn : callable
        A picklable top-level function (importable by the workers, e.g.
        ``sparseopt_torch.prune._prune_layer``).
    kwargs : dict
        Its keyword arguments: torch tensors, strings, numbers, pattern objects.
    cost : float
        Work estimate (e.g. ``d_out * d_in**2``); on a cluster heavier jobs start first.
    """

    name: str
    fn: Callable
    kwargs: dict
    cost: float = 0.0


def _to_cpu(obj):
    # detach: a Parameter with requires_grad would otherwise travel as one.
    return map_tensors(obj, lambda t: t.detach().to("cpu"))


def _devices(kwargs) -> dict:
    """The device type of each top-level tensor argument that is not on the CPU."""
    import torch

    return {k: v.device.type for k, v in kwargs.items()
            if isinstance(v, torch.Tensor) and v.device.type != "cpu"}


@contextlib.contextmanager
def _thread_limit(threads):
    """Run the block with ``threads`` threads in every pool a layer job uses: torch's
    (intra-op, with its MKL), Numba's (the core's parallel loops on CPU tensors, which it
    computes on as NumPy views) and, if threadpoolctl is installed, NumPy's BLAS. All are
    restored on exit. None: leave them as they are."""
    if threads is None:
        yield
        return
    import numba
    import torch

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: Dask workers get OPENBLAS/OMP_NUM_THREADS=1 anyway
        blas = contextlib.nullcontext()
    else:
        blas = threadpool_limits(limits=threads, user_api="blas")  # torch: its own call
    torch_before, numba_before = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        with blas:
            yield
    finally:
        torch.set_num_threads(torch_before)
        numba.set_num_threads(numba_before)


def _call(fn, kwargs, threads, device, devices):
    """``fn(**kwargs)`` under :func:`_thread_limit` with its tensor arguments on ``device``,
    or back on the device types in ``devices``."""
    if device is not None:
        kwargs = map_tensors(kwargs, lambda t: t.to(device))
    elif devices:
        kwargs = {k: (v.to(devices[k]) if k in devices else v) for k, v in kwargs.items()}
    with _thread_limit(threads):
        return fn(**kwargs)


def _run_task(fn, kwargs, threads, device, devices):
    """What a worker runs: :func:`_call`, the result's tensors moved to the CPU (they travel
    back to the driver). Top-level so that workers import it by reference."""
    return _to_cpu(_call(fn, kwargs, threads, device, devices))


def _restore_environ(saved):
    """Give the variables in ``saved`` their values again (None: unset)."""
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _check_workers(workers):
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer (the number of local worker "
                         f"processes), got {workers!r}")
    return workers


def _check_jobs(jobs) -> list:
    jobs = list(jobs)
    seen = set()
    for job in jobs:
        if not isinstance(job, LayerJob):
            raise TypeError(f"jobs must be LayerJob objects, got {type(job).__name__}")
        if job.name in seen:
            raise ValueError(f"jobs: layer name {job.name!r} appears twice")
        if not callable(job.fn):
            raise TypeError(f"job {job.name!r}: fn must be callable, got {job.fn!r}")
        cost = float(job.cost)
        if not math.isfinite(cost):
            raise ValueError(f"job {job.name!r}: cost must be finite, got {job.cost!r}")
        seen.add(job.name)
    return jobs


def _with_layer(exc, name):
    """``exc`` with a note naming the layer (shown under the traceback)."""
    note = f"in the layer job {name!r} (sparseopt_torch.distributed)"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    return exc


class LayerExecutor:
    """Where layer jobs run; one executor serves every block of a model.

    Used as a context manager: entering connects to the scheduler or starts the local
    cluster (so an unreachable scheduler fails before any layer is computed), leaving
    closes what it started (a cluster given by address is left running). Without
    ``workers`` and ``scheduler`` it runs jobs in this process and imports no Dask.
    Without ``with``, :meth:`run` starts it on first use; call :meth:`close` afterwards.

    Parameters
    ----------
    workers : int, optional
        Start a ``distributed.LocalCluster`` of this many single-threaded worker processes
        on this machine (dashboard off, random free ports, quiet logs).
    scheduler : str, optional
        Address of a running Dask scheduler (``"tcp://host:8786"``); also accepted: a
        ``distributed.Client`` (used as is, never closed) or a cluster object with a
        ``scheduler_address`` (dask-jobqueue's ``SLURMCluster``, ...). Exclusive with
        ``workers``.
    resources : dict, optional
        Dask resources each task needs, e.g. ``{"GPU": 1}``: tasks then run only on workers
        started with ``--resources GPU=...``. With ``workers``, every local worker is given
        these resources (one task at a time each).
    threads : int, optional
        Threads of each job (torch, Numba and, with threadpoolctl, BLAS), in process and on
        a cluster alike: results are bit-identical for equal thread counts. Default: 1 on a
        cluster (single-threaded workers), the driver's setting in process (see the
        module's notes).
    device : str or torch.device, optional
        Where a job computes (e.g. ``"cuda"``): its tensor arguments are moved there.
        Default: on a cluster the device type each tensor argument had in the driver, in
        process where they are.
    timeout : float, default 10
        Seconds to wait for the scheduler to answer when connecting.
    progress : bool, default False
        A tqdm bar over the jobs of each :meth:`run`.

    Examples
    --------
    >>> from sparseopt_torch.distributed import LayerExecutor, LayerJob
    >>> jobs = [LayerJob("a", round, {"number": 2.718, "ndigits": 1}, cost=1.0)]
    >>> with LayerExecutor() as ex:      # in process; LayerExecutor(workers=2) for Dask
    ...     ex.run(jobs, lambda name, res: print(name, res))
    a 2.7
    """

    def __init__(self, workers=None, scheduler=None, *, resources=None, threads=None,
                 device=None, timeout=_DEFAULT_TIMEOUT, progress=False):
        self.workers = _check_workers(workers)
        if workers is not None and scheduler is not None:
            raise ValueError("workers and scheduler are exclusive: workers=N starts a local "
                             "cluster, scheduler= connects to a running one")
        if scheduler is not None and not isinstance(scheduler, str) \
                and not hasattr(scheduler, "scheduler_address") \
                and not hasattr(scheduler, "submit"):
            raise ValueError(f"scheduler must be an address such as 'tcp://host:8786', a "
                             f"distributed.Client or a cluster object, got {scheduler!r}")
        if isinstance(scheduler, str) and not scheduler.strip():
            raise ValueError("scheduler must be an address such as 'tcp://host:8786', "
                             "got an empty string")
        if resources is not None:
            if not isinstance(resources, dict) or not all(
                    isinstance(k, str) and isinstance(v, (int, float))
                    and not isinstance(v, bool) and v > 0 for k, v in resources.items()):
                raise ValueError(f"resources must be a dict such as {{'GPU': 1}} (names to "
                                 f"positive amounts), got {resources!r}")
            if workers is None and scheduler is None:
                raise ValueError("resources need a cluster: pass workers= or scheduler=")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if device is not None:  # a worker's device: not necessarily one of this machine
            device = parse_device(device, here=False)
        self.scheduler = scheduler
        self.resources = dict(resources) if resources else None
        self.local = workers is None and scheduler is None
        # In process: keep the driver's threads unless asked (see the module's notes).
        self.threads = threads if threads is not None or self.local else 1
        self.device = device
        self.timeout = float(timeout)
        self.progress = progress
        self._client = None
        self._cluster = None
        self._own_client = False
        self._environ = None

    def __repr__(self):
        where = ("in process" if self.local else f"workers={self.workers}"
                 if self.workers else f"scheduler={self.address!r}")
        return f"LayerExecutor({where})"

    @property
    def address(self):
        """The scheduler's address: the running cluster's, else the one given (None in
        process and for a local cluster not started)."""
        if self._client is not None:
            return self._client.scheduler.address
        if isinstance(self.scheduler, str):
            return self.scheduler
        return getattr(self.scheduler, "scheduler_address", None)

    @property
    def client(self):
        """The ``distributed.Client`` (None in process or before :meth:`start`)."""
        return self._client

    def start(self) -> "LayerExecutor":
        """Connect to the scheduler or start the local cluster (idempotent)."""
        if self.local or self._client is not None:
            return self
        from distributed import Client

        if self.workers is not None:
            self._start_local()
        elif hasattr(self.scheduler, "submit"):  # a Client of the caller's
            self._client = self.scheduler
        else:
            address = self.address
            try:
                self._client = Client(address, timeout=self.timeout, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(
                    f"scheduler {address!r} could not be reached within {self.timeout:g} s "
                    f"({type(exc).__name__}: {exc}); is the cluster running and the address "
                    "right (tcp://host:port)?") from exc
            except ValueError as exc:
                raise ValueError(f"scheduler {address!r} is not a valid address: "
                                 f"{exc}") from exc
            self._own_client = True
        if self.workers is None:
            self._check_resources()
        return self

    def _check_resources(self):
        """Warn when no worker of a running cluster offers the tasks' resources yet: the
        tasks would wait for one (right for clusters that grow, e.g. dask-jobqueue)."""
        if not self.resources:
            return
        workers = self._client.scheduler_info().get("workers", {})
        if not any(all(w.get("resources", {}).get(k, 0) >= v
                       for k, v in self.resources.items()) for w in workers.values()):
            warnings.warn(f"no worker of the cluster at {self.address} offers resources "
                          f"{self.resources} (yet): layer jobs wait until one does (start "
                          f"workers with --resources, e.g. GPU=1)", RuntimeWarning,
                          stacklevel=3)

    def _start_local(self):
        import dask
        from distributed import Client, LocalCluster

        t = str(self.threads)
        # The workers' environment, set by the nannies before each worker process starts
        # (also when one is restarted after a crash). Thread pools of the task's size: the
        # BLAS/OpenMP ones (Dask's own default is 1) and Numba's. MALLOC_TRIM_THRESHOLD_ is
        # dropped: Dask sets it to 64 KiB to return memory sooner, which also fixes glibc's
        # mmap threshold at 128 KiB, so that every temporary of a layer problem is a fresh
        # mmap: prox on MiniLM's 384 x 384 layers ran 2x slower (sys time).
        environ = {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": t, "MKL_NUM_THREADS": t,
                   "OPENBLAS_NUM_THREADS": t, "NUMBA_NUM_THREADS": t}
        config = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in environ.items()}
        # A nanny writes its pre-spawn variables into this process's environment (before
        # each worker start): they are put back after the start and at close.
        keys = set(environ) | set(dask.config.get("distributed.nanny.pre-spawn-environ"))
        saved = {k: os.environ.get(k) for k in keys | {"PYTHONHASHSEED"}}
        try:
            with dask.config.set(config):
                self._cluster = LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True,
                    scheduler_port=0, host="127.0.0.1", silence_logs=logging.ERROR,
                    resources=self.resources, dashboard_address=None,
                    worker_dashboard_address=None,
                    # No dashboard, but the scheduler's HTTP endpoints (health, metrics)
                    # would take port 8787: a free port instead, no clash between runs.
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
            self._client = Client(self._cluster, timeout=self.timeout, set_as_default=False)
        except BaseException:
            self.close()
            raise
        finally:
            _restore_environ(saved)
        self._environ = saved
        self._own_client = True

    def close(self) -> None:
        """Close the client and the local cluster this executor started."""
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        try:
            if client is not None and self._own_client:
                client.close()
            if cluster is not None:
                cluster.close()
        finally:
            self._own_client = False
            if self._environ is not None:  # a restarted worker's nanny wrote them again
                _restore_environ(self._environ)
                self._environ = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def run(self, jobs, on_done, *, progress=None) -> None:
        """Run every job; call ``on_done(job.name, result)`` here, once per job.

        Parameters
        ----------
        jobs : iterable of LayerJob
        on_done : callable
            Called in this process as each job finishes (in the given order in process,
            in order of completion on a cluster). If it raises, the remaining tasks are
            cancelled and the exception propagates.
        progress : bool, optional
            Overrides the executor's ``progress``.
        """
        jobs = _check_jobs(jobs)
        if not jobs:
            return
        progress = self.progress if progress is None else progress
        from tqdm.auto import tqdm

        with tqdm(total=len(jobs), desc="layer jobs", unit="layer",
                  disable=not progress) as bar:
            if self.local:
                for job in jobs:
                    try:
                        result = _call(job.fn, job.kwargs, self.threads, self.device, {})
                    except Exception as exc:
                        raise _with_layer(exc, job.name)
                    on_done(job.name, result)
                    bar.update(1)
            else:
                self.start()
                self._run_dask(jobs, on_done, bar)

    def _run_dask(self, jobs, on_done, bar):
        from distributed import as_completed

        client = self._client
        tag = uuid.uuid4().hex[:12]  # keys unique per call: never a cached result
        order = sorted(range(len(jobs)), key=lambda i: -float(jobs[i].cost))
        futures = {}
        try:
            # Submitted heaviest first with decreasing priority: the scheduler starts
            # higher priorities first (ties: submission order).
            for rank, i in enumerate(order):
                job = jobs[i]
                with warnings.catch_warnings():
                    # The layer's W and H travel inside the task (tens of MB for big layers)
                    # on purpose: scattered data would be lost with a killed worker, the
                    # task's own arguments are kept by the scheduler for a rerun.
                    warnings.filterwarnings("ignore", message="Sending large graph")
                    fut = client.submit(
                        _run_task, job.fn, _to_cpu(job.kwargs), self.threads, self.device,
                        _devices(job.kwargs), key=f"sparseopt-layer-{tag}-{i}-{job.name}",
                        pure=False, priority=len(jobs) - rank, resources=self.resources)
                futures[fut.key] = (job.name, fut)
            pending = as_completed([f for _, f in futures.values()], loop=client.loop)
            for fut in pending:
                name, _ = futures.pop(fut.key)
                try:
                    result = fut.result()
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:  # also a cancelled future (lost scheduler)
                    raise _with_layer(exc, name)
                finally:
                    fut.release()  # the worker may drop the result now
                on_done(name, result)
                bar.update(1)
        except BaseException:
            # A failed job, a failing callback or Ctrl-C: nothing more reaches on_done.
            if futures:
                client.cancel([f for _, f in futures.values()], force=True)
            raise


def run_layer_jobs(jobs, on_done, *, workers=None, scheduler=None, resources=None,
                   progress=False, executor=None, timeout=_DEFAULT_TIMEOUT) -> None:
    """Run every job's ``fn(**kwargs)`` and call ``on_done(job.name, result)`` in this process
    exactly once per job, as each finishes.

    Parameters
    ----------
    jobs : iterable of LayerJob
        Names unique within the call.
    on_done : callable
        ``on_done(name, result)``; if it raises, the remaining jobs are cancelled and the
        exception propagates (nothing else reaches ``on_done``). A job that raises is
        re-raised here (with a note naming its layer) after the others are cancelled.
    workers : int, optional
        A ``LocalCluster`` of this many single-threaded worker processes, started and closed
        by this call (seconds of start-up: for many calls, reuse a :class:`LayerExecutor`).
    scheduler : str, optional
        Address of an existing cluster (``"tcp://host:8786"``; dask-jobqueue and Kubernetes
        clusters are started by the user and passed by address). Exclusive with ``workers``.
    resources : dict, optional
        Dask resources per task, e.g. ``{"GPU": 1}`` for GPU workers.
    progress : bool, default False
        A tqdm bar over the jobs.
    executor : LayerExecutor, optional
        Run on this (started or not) executor instead; ``workers``, ``scheduler`` and
        ``resources`` must then be left out.
    timeout : float, default 10
        Seconds to wait for the scheduler to answer when connecting.

    With neither ``workers`` nor ``scheduler`` (nor ``executor``) the jobs run in this
    process in the given order (the default: Dask is not imported).

    Raises
    ------
    ValueError
        Bad ``workers`` (not a positive int), ``workers`` with ``scheduler``, bad jobs.
    ConnectionError
        The scheduler cannot be reached within ``timeout`` (before any job runs).
    """
    if executor is not None:
        if workers is not None or scheduler is not None or resources is not None:
            raise ValueError("pass either executor or workers/scheduler/resources, not both")
        executor.run(jobs, on_done, progress=progress or None)  # False: the executor's
        return
    ex = LayerExecutor(workers=workers, scheduler=scheduler, resources=resources,
                       timeout=timeout, progress=progress)
    jobs = _check_jobs(jobs)  # bad jobs fail before a cluster is started
    if not jobs:
        return
    with ex:
        ex.run(jobs, on_done)
