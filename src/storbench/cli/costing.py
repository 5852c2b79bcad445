"""--cost, --capacity, --provisioned-iops/-mbps: shared by `compare` and `report`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from storbench.errors import ConfigError

if TYPE_CHECKING:
    from storbench.analysis.compare import Comparison
    from storbench.analysis.cost import Priced


def cost_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--provisioned-mbps", "provisioned_mbps", multiple=True,
                     metavar="[RUN=]MB/S",
                     help="With --cost: price this throughput instead of what the run"
                          " achieved; RUN= for one run, e.g. efs-maxio=4 (repeatable).")(f)
    f = click.option("--provisioned-iops", "provisioned_iops", multiple=True,
                     metavar="[RUN=]IOPS",
                     help="With --cost: price this many IOPS instead of what the run"
                          " achieved; RUN= for one run (repeatable).")(f)
    f = click.option("--capacity", "capacity", multiple=True, metavar="[RUN=]SIZE",
                     help="With --cost: the volume size to price, e.g. 500GiB or 1TB; RUN="
                          " for one run, e.g. efs=10GB (repeatable).")(f)
    return click.option(
        "--cost", "costs", multiple=True, metavar="[RUN=]SHEET",
        help="Price the runs with a sheet: a built-in one (`storbench cost list`), a YAML"
             " file, or the name of a sheet in a file given to another --cost; RUN= picks"
             " the run (label, id or reference name), else the rows named like the sheet,"
             " else all (repeatable).")(f)


def check_cost_flags(costs: tuple[str, ...], capacity: tuple[str, ...],
                     provisioned: tuple[str, ...]) -> None:
    """Before any run is read: a flag without the other fails at once."""
    if costs and not capacity:
        raise ConfigError("--cost needs --capacity (the volume size to price, e.g. 500GiB)")
    if not costs and (capacity or provisioned):
        raise ConfigError("--capacity and --provisioned-* apply to --cost")


def priced_runs(comp: Comparison, costs: tuple[str, ...], capacity: tuple[str, ...],
                provisioned_iops: tuple[str, ...], provisioned_mbps: tuple[str, ...],
                ) -> list[Priced]:
    check_cost_flags(costs, capacity, provisioned_iops + provisioned_mbps)
    if not costs or not capacity:
        return []
    from storbench.analysis.cost import assign, parse_capacity, per_run, price

    sizes = per_run(comp, list(capacity), "--capacity", parse_capacity)
    return price(comp, assign(comp, list(costs)), sizes,
                 provisioned_iops=per_run(comp, list(provisioned_iops), "--provisioned-iops"),
                 provisioned_mbps=per_run(comp, list(provisioned_mbps), "--provisioned-mbps"))
