"""DSE backends: where the points of a sweep are computed.

``local``: in this process for one job, else a process pool whose workers die with the sweep
(``npusim.dse.workers``); ``dask``: a ``dask.distributed`` cluster (a LocalCluster when no
scheduler address is given). A backend only computes rows (``evaluate``) and hands each to
``done``; the sweep (``npusim.dse.run_sweep``) reads and writes the cache and orders the rows.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable

from npusim.dse.sweep import DseError
from npusim.dse.workers import die_with


def run_local(points: list, jobs: int, evaluate: Callable, done: Callable) -> None:
    if jobs <= 1 or len(points) <= 1:
        for point in points:
            done(point, evaluate(point))
        return
    with ProcessPoolExecutor(max_workers=jobs, mp_context=worker_context(), initializer=die_with,
                             initargs=(os.getpid(),)) as pool:  # workers end with the sweep, even on SIGKILL
        futures = {pool.submit(evaluate, p): p for p in points}
        for future in as_completed(futures):
            done(futures[future], future.result())


def worker_context():
    """Workers forked from a clean server that has imported npusim once (fast, and no threads
    of the caller are forked); plain spawn where there is no fork (Windows)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["npusim.dse", "npusim.workflow", "npusim.dse.workers", "planners"])
        return context
    return multiprocessing.get_context("spawn")


def run_dask(points: list, jobs: int, scheduler: str | None, evaluate: Callable, done: Callable,
             processes: bool = True) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed as dask_completed  # lazy: optional, heavy
    except ImportError:
        raise DseError("--backend dask needs dask.distributed: pip install 'npusim[dask]'") from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=max(jobs, 1), threads_per_worker=1, processes=processes,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = client.map(evaluate, points, pure=False)
        by_key = {f.key: p for f, p in zip(futures, points)}
        for future in dask_completed(futures):
            done(by_key[future.key], future.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
