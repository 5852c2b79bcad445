"""`storbench k8s classes|cleanup|image` (and lifecycle, failover: cli/lifecycle.py); the
manifests of `run --dry-run`."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.table import Table
from rich.text import Text

from storbench.cli.common import cli, err, json_option, out, print_json
from storbench.cli.kubeflags import connection_options
from storbench.cli.lifecycle import failover, lifecycle
from storbench.errors import ConfigError, Interrupted

if TYPE_CHECKING:
    from storbench.execute.kubernetes import Managed

F = TypeVar("F", bound=Callable[..., Any])
ENGINE_CHOICES = ("auto", "docker", "podman", "buildah")  # execute/imagebuild.ENGINES, unimported


def manifests_yaml(manifests: list[dict[str, Any]]) -> str:
    """The manifests as YAML; multi-line strings (job files) as literal blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def literal(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, literal)
    return str(yaml.dump_all(manifests, Dumper=Dumper, sort_keys=False,
                             default_flow_style=False))


@cli.group()
def k8s() -> None:
    """Kubernetes: list StorageClasses, time their volumes' lifecycle, remove what
    crashed runs left, build the runner image.

    Benchmarks run with `storbench run --storage-class CLASS`.

    \b
    Example:
      storbench k8s classes
      storbench k8s lifecycle --storage-class fast --volumes 10
      storbench k8s cleanup --older-than 1h
      storbench k8s image build --push registry.example.com/storbench/fio:3.33-2
    """


@k8s.command()
@connection_options
@json_option
def classes(kubeconfig: str | None, kube_context: str | None, as_json: bool) -> None:
    """List the cluster's StorageClasses: provisioner, binding mode, expansion.

    \b
    Example:
      storbench k8s classes
      storbench k8s classes --context prod --json
    """
    from storbench.execute.kubelabels import is_default
    from storbench.execute.kubernetes import Kube

    kube = Kube(kubeconfig, kube_context)
    rows = [{
        "name": c.metadata.name, "default": is_default(c), "provisioner": c.provisioner,
        "binding_mode": c.volume_binding_mode, "reclaim_policy": c.reclaim_policy,
        "allow_volume_expansion": bool(c.allow_volume_expansion),
        "parameters": dict(c.parameters or {}),
    } for c in sorted(kube.storage_classes(), key=lambda c: c.metadata.name)]
    if as_json:
        print_json(rows)
        return
    if not rows:
        err.print(f"no StorageClasses in context {kube.context}", markup=False)
        return
    table = Table(title=f"StorageClasses ({kube.context})", title_justify="left")
    for col in ("name", "provisioner", "binding mode", "reclaim", "expansion", "parameters"):
        table.add_column(col)
    for r in rows:
        name = Text(r["name"])
        if r["default"]:
            name.append(" (default)", style="bold")
        table.add_row(name, Text(r["provisioner"]), Text(r["binding_mode"] or ""),
                      Text(r["reclaim_policy"] or ""), "yes" if r["allow_volume_expansion"]
                      else "no", Text(", ".join(f"{k}={v}" for k, v in r["parameters"].items())))
    out.print(table)


_AGE = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")


def parse_age(text: str) -> timedelta:
    m = _AGE.match(text.strip())
    if m is None:
        raise ConfigError(f"--older-than {text!r} is not an age (examples: 30m, 1h, 2d)")
    factor = {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return timedelta(seconds=float(m.group(1)) * factor)


@k8s.command()
@click.option("--namespace", "-n", metavar="NS",
              help="Only this namespace (default: the context's namespace).")
@click.option("--all-namespaces", "-A", is_flag=True, help="Every namespace.")
@click.option("--older-than", metavar="AGE",
              help="Only objects older than this (e.g. 1h), sparing runs in progress.")
@click.option("--run", "run_uid", metavar="UID", help="Only the objects of this run id.")
@connection_options
@json_option
def cleanup(namespace: str | None, all_namespaces: bool, older_than: str | None,
            run_uid: str | None, kubeconfig: str | None, kube_context: str | None,
            as_json: bool) -> None:
    """Delete the pods, PVCs, VolumeSnapshots and ConfigMaps storbench runs left behind.

    Finds them by the label app.kubernetes.io/managed-by=storbench (nothing else is
    touched) and waits until they are gone. A run that is still going loses its
    objects too, unless --older-than spares it.

    \b
    Example:
      storbench k8s cleanup
      storbench k8s cleanup --all-namespaces --older-than 1h
    """
    from storbench.execute.kubecleanup import delete_and_wait, saying_after
    from storbench.execute.kubernetes import DELETE_WAIT_S, KINDS, Kube
    from storbench.execute.kubestatus import KubeError

    if namespace and all_namespaces:
        raise ConfigError("give --namespace or --all-namespaces, not both")
    age = parse_age(older_than) if older_than else None
    kube = Kube(kubeconfig, kube_context)
    ns = None if all_namespaces else (namespace or kube.namespace)
    now = datetime.now(UTC)
    found = [m for m in kube.managed(ns)
             if (age is None or now - m.created > age) and (run_uid is None or m.run == run_uid)]
    found.sort(key=lambda m: KINDS.index(m.kind))
    asked = [(m.kind, m.namespace, m.name) for m in found]
    try:  # a pod whose node does not answer stays until it does: what is waited for said
        problems, retained = delete_and_wait(kube, asked, DELETE_WAIT_S, hurried=saying_after(
            DELETE_WAIT_S, lambda text: err.print(text, markup=False), "Ctrl-C: stop waiting"))
    except KeyboardInterrupt:
        try:
            there = {(m.kind, m.namespace, m.name) for m in kube.managed(ns)}
            left = [f"{kind} {where}/{name}" for kind, where, name in asked
                    if (kind, where, name) in there]
            said = (f"still there: {', '.join(left)} (`storbench k8s cleanup` again once"
                    " their node answers)" if left else "nothing is left")
            _say_deleted([m for m, key in zip(found, asked, strict=True) if key not in there],
                         [said] if left else [], [], ns, as_json)
        except KubeError as exc:
            said = f"what is left could not be listed: {exc}"
        err.print(f"storbench: cleaning up: {said}", markup=False)
        raise Interrupted(signal.SIGINT) from None
    _say_deleted(found, problems, retained, ns, as_json)
    if problems:
        raise KubeError("cleaning up: " + "; ".join(problems))


def _say_deleted(gone: list[Managed], problems: list[str], retained: list[str],
                 ns: str | None, as_json: bool) -> None:
    """What `k8s cleanup` deleted (all it was asked to, or those gone when Ctrl-C ended
    its wait), with what it could not delete and the volumes kept."""
    if as_json:
        print_json({"deleted": [{"kind": m.kind, "namespace": m.namespace, "name": m.name,
                                 "run": m.run, "created": m.created.isoformat()}
                                for m in gone],
                    "problems": problems, "retained_volumes": retained})
        return
    for m in gone:
        out.print(f"deleted {m.kind} {m.namespace}/{m.name} (run {m.run}, created"
                  f" {m.created:%Y-%m-%d %H:%M:%S})", markup=False)
    for what in retained:
        out.print(what, markup=False)
    if not gone and not problems:
        where = "any namespace" if ns is None else f"namespace {ns}"
        err.print(f"nothing to clean up in {where}", markup=False)


@k8s.group()
def image() -> None:
    """Build the runner image where the default cannot be pulled.

    The runner image is fio and a POSIX sh, run as uid 1000: the pods of `run
    --storage-class`, `k8s lifecycle` and `k8s failover` run it. The default image (see
    `run --help`, --image) is published by each release; where a cluster cannot pull it
    (air-gapped, a registry mirror, a policy on registries) build it, push it where the
    nodes pull from, and give it with --image or STORBENCH_IMAGE.

    \b
    Example:
      storbench k8s image build --push registry.example.com/storbench/fio:3.33-2
      storbench k8s image dockerfile > Dockerfile
    """


@image.command()
@click.option("--push", "destination", metavar="REF",
              help="Push it here once built: a registry reference (podman and buildah also"
                   " take oci-archive:PATH, docker-archive:PATH, oci:DIR, dir:DIR).")
@click.option("--tag", default=None, metavar="REF",
              help="The local name  [default: localhost/ + the default image's path]")
@click.option("--base", default=None, metavar="REF",
              help="The Debian 12 image to start from, e.g. your mirror's copy  [default: the"
                   " Dockerfile's, debian:12.11-slim]")
@click.option("--engine", type=click.Choice(ENGINE_CHOICES), default="auto", show_default=True,
              help="The image engine: auto takes the first of docker, podman, buildah that"
                   " can build here.")
@click.option("--network", metavar="MODE",
              help="The build's network (the engine's --network, e.g. host) for apt-get.")
@click.option("--quiet", "-q", is_flag=True, help="Do not show the engine's output.")
def build(destination: str | None, tag: str | None, base: str | None, engine: str,
          network: str | None, quiet: bool) -> None:
    """Build the runner image here and check that fio runs in it (as uid 1000).

    With docker, podman or buildah, whichever can build here (docker's client without a
    daemon is passed over, saying so), from the Dockerfile inside storbench: Debian 12
    and its fio 3.33, nothing else. The build's apt-get needs Debian's mirror (or the
    one the base image's apt names). Prints the name to give --image on stdout: the
    pushed reference, or the local name when nothing was pushed to a registry.

    \b
    Example:
      storbench k8s image build --push registry.example.com/storbench/fio:3.33-2
      storbench run --storage-class fast --image registry.example.com/storbench/fio:3.33-2
      storbench k8s image build --base mirror.example.com/debian:12.11-slim --push ...
    """
    from storbench.execute import imagebuild
    from storbench.render.text import harmless
    from storbench.target.kubernetes.manifests import DEFAULT_IMAGE

    tag = imagebuild.check_reference("--tag", tag or "localhost/" + DEFAULT_IMAGE.split("/", 1)[1])
    base = imagebuild.check_reference("--base", base or imagebuild.default_base())
    if network is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_.:-]*", network):
        raise ConfigError(f"--network {network!r} is not a network mode (e.g. host)")
    if destination is not None:
        imagebuild.check_destination(None, destination)
    chosen, passed = imagebuild.choose_engine(None if engine == "auto" else engine)
    if destination is not None:
        imagebuild.check_destination(chosen, destination)
    for why in passed:
        err.print(f"passed over {why}", markup=False)
    err.print(f"building {tag} from {base} with {chosen}", markup=False)
    built = imagebuild.build(chosen, tag, base, destination, network,
                             None if quiet else lambda line: err.print(
                                 "  " + harmless(line), markup=False, highlight=False))
    err.print(f"built {built.tag} with {built.engine} in {built.seconds:.0f} s;"
              f" {built.fio_version} (with the http and libaio engines) runs in it as"
              " uid 1000", markup=False)
    if destination is not None and imagebuild.pushes_to_registry(destination):
        err.print(f"pushed to {destination}; give it to the runs: --image {destination}"
                  f" (or STORBENCH_IMAGE={destination})", markup=False)
        click.echo(destination)
        return
    if destination is not None:
        err.print(f"written to {destination}: load it where the nodes take images from"
                  " under a name of yours (ctr -n k8s.io images import, kind load"
                  " image-archive, …), then give that name with --image", markup=False)
    else:
        err.print(f"the cluster's nodes cannot pull {tag} from here: push it to a registry they"
                  f" pull from (--push REGISTRY/{DEFAULT_IMAGE.split('/', 1)[1]}) or load it"
                  " onto them (kind load, minikube image load, …), then give it with --image",
                  markup=False)
    click.echo(tag)


@image.command()
def dockerfile() -> None:
    """Print the runner image's Dockerfile, to build it where an engine runs.

    \b
    Example:
      storbench k8s image dockerfile > Dockerfile
      docker build -t registry.example.com/storbench/fio:3.33-2 .
    """
    from storbench.execute.imagebuild import dockerfile_text

    click.echo(dockerfile_text(), nl=False)


k8s.add_command(lifecycle)
k8s.add_command(failover)
