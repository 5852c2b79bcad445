"""`storbench push`: runs' figures to a Prometheus Pushgateway (also `run --push`)."""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

import click

from storbench.cli.common import cli, err, load_run, read_db_option
from storbench.errors import ConfigError, StorbenchError
from storbench.render import openmetrics
from storbench.result.record import Run
from storbench.store import Store

TIMEOUT_S = 10.0


class PushError(StorbenchError):
    """The Pushgateway refused the metrics or could not be reached."""


def _segment(name: str, value: str) -> str:
    """A grouping-key part of the URL; values with '/' (or empty) go base64url-encoded,
    as the Pushgateway's API says."""
    if value and "/" not in value:
        return f"{name}/{urllib.parse.quote(value, safe='')}"
    encoded = base64.urlsafe_b64encode(value.encode()).decode() or "="
    return f"{name}@base64/{encoded}"


@dataclass(frozen=True)
class Gateway:
    """A Pushgateway as given (``http://user:password@host:9091``): its URL without the
    user and password, which go into an Authorization header (HTTP basic auth) and are
    never said: messages name the URL only."""

    url: str
    authorization: str | None = None

    @classmethod
    def parse(cls, given: str, option: str = "--pushgateway") -> Gateway:
        parsed = urllib.parse.urlsplit(given)
        try:
            port = parsed.port
        except ValueError:
            port = -1
        if parsed.scheme not in ("http", "https") or not parsed.hostname or port == -1:
            shown = parsed._replace(netloc=parsed.netloc.rpartition("@")[2])  # no password
            raise ConfigError(f"{option} {shown.geturl()!r}: give its URL, e.g."
                              " http://pushgateway:9091 (or http://USER:PASSWORD@pushgateway:9091)")
        host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
        url = parsed._replace(netloc=host + (f":{port}" if port is not None else "")).geturl()
        if parsed.username is None and parsed.password is None:
            return cls(url.rstrip("/"))
        pair = (f"{urllib.parse.unquote(parsed.username or '')}:"
                f"{urllib.parse.unquote(parsed.password or '')}")
        return cls(url.rstrip("/"), "Basic " + base64.b64encode(pair.encode()).decode())


def group_url(gateway: Gateway, instance: str) -> str:
    """The group job="storbench", instance=INSTANCE at the Pushgateway ``gateway``."""
    return (f"{gateway.url}/metrics/{_segment('job', 'storbench')}/"
            f"{_segment('instance', instance)}")


def push_runs(given: str, runs: Sequence[Run], store: Store | None = None) -> list[str]:
    """PUT each target's runs as its group (job="storbench", instance=target) at the
    Pushgateway ``given`` (its URL, a user and password in it for basic auth): the group
    then holds exactly these runs' figures (and, given the ``store``, the change points
    of their series that begin at them). Returns the groups' URLs (with no password)."""
    gateway = Gateway.parse(given)
    changes = None
    if store is not None and any(r.series for r in runs):
        from storbench.cli.trend import series_histories
        from storbench.render.samples import marks

        found = series_histories(store, list(runs), every=True)
        changes = marks(h for series in found.values() for h in series.values())
    by_target: dict[str, list[Run]] = {}
    for run in runs:
        by_target.setdefault(run.target, []).append(run)
    urls = []
    for target, group in by_target.items():
        url = group_url(gateway, target)
        body = openmetrics.text(group, openmetrics=False, changes=changes).encode()
        headers = {"Content-Type": openmetrics.CONTENT_TYPE}
        if gateway.authorization is not None:
            headers["Authorization"] = gateway.authorization
        request = urllib.request.Request(url, data=body, method="PUT", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S):
                pass
        except urllib.error.HTTPError as exc:
            said = exc.read().decode(errors="replace").strip()
            who = (" (give the user and password in its URL: http://USER:PASSWORD@HOST:PORT)"
                   if exc.code == 401 and gateway.authorization is None else
                   " (the user or password in its URL)" if exc.code == 401 else "")
            raise PushError(f"the Pushgateway at {gateway.url} refused the metrics of"
                            f" {target}: HTTP {exc.code} {said}{who}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PushError(f"cannot reach the Pushgateway at {gateway.url}: {reason}") from None
        urls.append(url)
    return urls


@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@click.option("--pushgateway", "gateway", required=True, metavar="URL",
              envvar="STORBENCH_PUSHGATEWAY", show_envvar=True,
              help="The Pushgateway's URL, e.g. http://pushgateway:9091; behind basic"
                   " auth, http://USER:PASSWORD@pushgateway:9091 (in STORBENCH_PUSHGATEWAY,"
                   " the password is not in the command line `ps` shows). The password"
                   " is never printed.")
@read_db_option
def push(store: Store, run_refs: tuple[str, ...], gateway: str) -> None:
    """Push runs' figures to a Prometheus Pushgateway, grouped as job="storbench",
    instance=TARGET.

    The metrics are those of `export --format openmetrics` without timestamps (a
    Pushgateway refuses them): storbench_iops, storbench_bandwidth_bytes_per_second,
    storbench_latency_seconds{quantile="0.99"}, ... labelled with the run's uid, label,
    suite, test, direction, target and storage class. Each push replaces its target's
    group: Prometheus scrapes the latest runs. For a history, backfill from
    `export --format openmetrics` (docs/teams.md).

    \b
    Example:
      storbench push last --pushgateway http://pushgateway:9091
      storbench run /mnt/data --push http://pushgateway:9091    # when the run ends
    """
    # a run named twice once: a group holding a sample twice is refused by the Pushgateway
    runs = [load_run(store, i) for i in dict.fromkeys(store.resolve(r) for r in run_refs)]
    for url in push_runs(gateway, runs, store):
        err.print(f"Pushed to {url}", markup=False)
