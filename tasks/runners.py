"""Task runners from configuration: threads on one machine, Dask or Ray beyond it."""

from __future__ import annotations

from prefect.task_runners import ThreadPoolTaskRunner
from prefect_dask import DaskTaskRunner

from mmcurate.core.config import TaskRunnerConfig
from mmcurate.core.errors import ConfigError


def make_task_runner(cfg: TaskRunnerConfig):
    """The runner a flow uses. Dask: an existing cluster at ``address`` or a LocalCluster of
    ``workers`` processes; Ray: the cluster at ``address`` or a local one of ``workers`` CPUs."""
    if cfg.kind == "threads":
        return ThreadPoolTaskRunner(max_workers=cfg.workers)
    if cfg.kind == "dask":
        if cfg.address:
            return DaskTaskRunner(address=cfg.address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": cfg.workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
    try:
        from prefect_ray import RayTaskRunner
    except ImportError:
        raise ConfigError("task_runner kind 'ray' needs prefect-ray: pip install 'mmcurate[ray]'") from None
    if cfg.address:
        return RayTaskRunner(address=cfg.address)
    return RayTaskRunner(init_kwargs={"num_cpus": cfg.workers, "include_dashboard": False})
