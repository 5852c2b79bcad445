"""Where `storbench run` measures: the one place flags become Targets.

A TARGET word is read by a table (``SCHEMES``): ``k8s://CLASS`` is a StorageClass,
``ssh://HOST[,HOST...]/PATH`` a path on hosts over SSH, anything else a path here (a
directory, or a block device); each scheme is the same as its flags (--storage-class,
--hosts). A new kind of target is its file in target/ and one line in that table, a
function that makes the target of the word (``made``); one that flags name instead is a
branch of ``choose_targets`` (docs/targets.md; tests/target/test_a_new_target.py).
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from storbench.cli.common import NUMBER
from storbench.cli.kubeflags import apply, kube_options, pods_target
from storbench.errors import ConfigError
from storbench.execute import fsops
from storbench.target.base import Target
from storbench.target.device import DeviceStorage
from storbench.target.files import FilesStorage
from storbench.target.here import HereTarget
from storbench.target.hostlist import Host, parse_hosts
from storbench.target.hosts import HostsTarget
from storbench.target.storage import Outside, Storage

F = TypeVar("F", bound=Callable[..., Any])
DEVICE_STAT_S = 5.0  # is_block_device: for a TARGET outside /dev to be looked at
DEVICE_FLAGS = ("--precondition and --reads-only apply to block devices: a TARGET such as"
                " /dev/nvme1n1 (here or on --hosts), or a --storage-class's raw volume"
                " (--volume-mode Block)")


class TargetPath(click.ParamType[str]):
    """A TARGET as given (a path, ssh://…, k8s://…: read_targets), not looked at while
    the command line is read (click.Path stats it: on a file system whose server is
    silent that holds storbench in the kernel before it has started, where not even
    Ctrl-C reaches it)."""

    name = "target"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        return str(value)

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(incomplete, type="file")]


HOST_OPTIONS = (
    click.option("--hosts", "hosts_text", metavar="HOST,...",
                 help="Run on these hosts at once through fio's client/server mode;"
                      " TARGET is the path on the hosts (or an s3://BUCKET every host"
                      " reaches: each its own objects). ssh://[USER@]HOST[:PORT]: for"
                      " this run only, fio's server is started on the host (on a"
                      " private unix socket) over SSH, with your ssh config, agent and"
                      " known_hosts. sock:PATH: a `storbench agent`'s socket here."
                      " HOST[:PORT]: a host running `storbench agent --bind`."),
    click.option("--hosts-file", type=click.Path(exists=True, dir_okay=False,
                                                 path_type=Path),
                 help="Hosts as for --hosts, one per line (# comments)."),
    click.option("--ssh-config", type=click.Path(exists=True, dir_okay=False),
                 help="ssh client configuration for ssh:// hosts (ssh -F FILE; default:"
                      " ~/.ssh/config)."),
    click.option("--shared-file", is_flag=True,
                 help="With --hosts (or --clients on an RWX volume): every host works on"
                      " one file (default: a file per host)."),
)
# what the storage is and how far a run may go with it, whoever runs fio on it
STORAGE_OPTIONS = (
    click.option("--size", metavar="SIZE",
                 help="File (or device) size per test, fio syntax (e.g. 256m, 2g); in"
                      " a test that reads several files (the training suites), each"
                      " file's. Default: the suite's; on a block device, the whole device."),
    click.option("--destructive", metavar="DEVICE",
                 help="Allow writing to the block device TARGET, named again here:"
                      " whatever is on it is destroyed. A device that is mounted or in use"
                      " is refused even so. Without it, a device is only read (read-only"
                      " tests, fio run with --readonly)."),
    click.option("--timeout", "timeout_s", type=NUMBER, metavar="SECONDS",
                 help="Time limit for the whole run (of each target). Default: each"
                      " test's runtime and ramp (or its I/O at 256 KiB/s), its file"
                      " layout at 16 MiB/s and 60 s; Kubernetes: 300 s to start, then"
                      " each test's runtime + 60 s. A test past its limit fails the run,"
                      " saying whether the target stopped responding."),
)
# an s3:// TARGET's endpoint (else AWS's own configuration: target/objects.py)
OBJECT_OPTIONS = (
    click.option("--endpoint", metavar="URL",
                 help="s3:// TARGETs: the S3 endpoint, http(s)://HOST[:PORT]. Default:"
                      " AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url in"
                      " ~/.aws/config, else AWS's for the region. Keys come from"
                      " AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile (AWS_PROFILE)"
                      " in ~/.aws/credentials; they are never shown or stored."),
    click.option("--region", metavar="REGION",
                 help="s3:// TARGETs: the bucket's region (default: AWS_REGION,"
                      " AWS_DEFAULT_REGION, the profile's, else us-east-1)."),
    click.option("--create-bucket", is_flag=True,
                 help="s3:// TARGETs: create the bucket when it does not exist (it is kept)."),
)


def _typed(names: tuple[str, ...]) -> tuple[str, ...]:
    """The flags of these parameters typed on the command line (not from a variable,
    such as STORBENCH_IMAGE, which a user sets once for every run)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return tuple(max((o for o in p.opts if o.startswith("--")), key=len)
                 for p in ctx.command.params if p.name in names
                 and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE)


def _names(decorate: Callable[[Any], Any]) -> tuple[str, ...]:
    """The parameter names a decorator of click options gives a command."""
    def probe() -> None: ...

    return tuple(str(p.name) for p in getattr(decorate(probe), "__click_params__", ()))


def target_options(f: F) -> F:
    """The tail of every command that measures TARGETs (`run`, `curve`, the kinds to
    come), each option declared once: the TARGET words, the storage options (--size,
    --destructive, --timeout), the hosts (HOST_OPTIONS) and the Kubernetes ones
    (kubeflags.kube_options). The command gets them as one ``where: TargetFlags``;
    its own flags that shape targets (--precondition, ...) it adds with ``replace``."""
    kube = tuple(n for n in _names(kube_options) if n not in ("storage_classes", "dry_run"))

    @functools.wraps(f)
    def wrapper(*args: Any, targets_given: tuple[str, ...], size: str | None,
                destructive: str | None, timeout_s: float | None, hosts_text: str | None,
                hosts_file: Path | None, shared_file: bool, ssh_config: str | None,
                storage_classes: tuple[str, ...], dry_run: bool, endpoint: str | None,
                region: str | None, create_bucket: bool, **kwargs: Any) -> Any:
        where = TargetFlags((), hosts_text, hosts_file, shared_file, ssh_config,
                            storage_classes, {n: kwargs.pop(n) for n in kube}, None,
                            dry_run, timeout_s, destructive, size, words=targets_given,
                            kube_given=_typed(kube), endpoint=endpoint, region=region,
                            create_bucket=create_bucket)
        return f(*args, where=where, **kwargs)

    return apply(wrapper, (  # type: ignore[return-value]
        click.argument("targets_given", metavar="[TARGET]...", nargs=-1, type=TargetPath()),
        *STORAGE_OPTIONS, *OBJECT_OPTIONS, *HOST_OPTIONS, kube_options))


# a StorageClass's name: a DNS-1123 subdomain (Kubernetes' own rule)
_CLASS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _k8s(word: str, f: TargetFlags) -> TargetFlags:
    """k8s://CLASS: --storage-class CLASS."""
    name = word[len("k8s://"):]
    if len(name) > 253 or not _CLASS.fullmatch(name):
        raise ConfigError(f"TARGET {word!r}: k8s://CLASS names a StorageClass (lower-case"
                          " letters, digits, '-', '.')")
    return replace(f, storage_classes=(*f.storage_classes, name))


def _ssh(word: str, f: TargetFlags) -> TargetFlags:
    """ssh://[USER@]HOST[:PORT][,[USER@]HOST[:PORT]...]/PATH: PATH on those hosts, as
    --hosts ssh://HOST,... with TARGET PATH."""
    hosts, slash, path = word[len("ssh://"):].partition("/")
    if not slash or not hosts:
        raise ConfigError(f"TARGET {word!r}: ssh://HOST[,HOST...]/PATH needs the hosts and"
                          " the absolute path on them (ssh://db1,db2/data)")
    if f.hosts_text is not None or f.hosts_file is not None:
        raise ConfigError(f"TARGET {word!r} names its hosts: leave out --hosts and"
                          " --hosts-file")
    listed = ",".join(f"ssh://{h}" for h in hosts.split(","))
    parse_hosts(listed, f"TARGET {word!r}")  # each host said wrong in the TARGET's words
    return replace(f, hosts_text=listed, given=(*f.given, Path("/" + path)))


def _s3(word: str, f: TargetFlags) -> TargetFlags:
    """s3://BUCKET[/PREFIX]: objects in a bucket, measured from here (target/objects.py);
    with --hosts, from the hosts (choose_targets)."""
    from storbench.execute.s3 import resolve
    from storbench.target.objectnames import Bucket
    from storbench.target.objects import ObjectStorage, ObjectTarget

    storage = ObjectStorage(Bucket.parse(word), resolve(f.endpoint, f.region), f.create_bucket)
    return replace(f, made=(*f.made, ObjectTarget(storage)))


# TARGET words by their start: (scheme, what it makes of the flags); any other word is a
# path here (a directory, or a block device)
SCHEMES: tuple[tuple[str, Callable[[str, TargetFlags], TargetFlags]], ...] = (
    ("k8s://", _k8s),
    ("ssh://", _ssh),
    ("s3://", _s3),
)


def read_targets(f: TargetFlags) -> TargetFlags:
    """The flags with each TARGET word (``words``) read by ``SCHEMES`` into ``given``
    paths, hosts or classes."""
    words, f = f.words, replace(f, words=())
    for word in words:
        scheme = next((make for start, make in SCHEMES if word.startswith(start)), None)
        if scheme is not None:
            made = len(f.made)
            f = scheme(word, f)
            if len(f.made) > made:  # in the order given, beside the paths here
                f = replace(f, order=(*f.order, word))
        elif re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", word):
            raise ConfigError(f"TARGET {word!r}: a scheme storbench does not know (give a"
                              " path, ssh://HOST/PATH, k8s://CLASS or s3://BUCKET)")
        elif not word.strip():  # Path("") is ".": an unset variable would measure here
            raise ConfigError(f"TARGET {word!r} is empty (an unset variable?): give a"
                              " directory (`.` for this one), a device or ssh://, k8s://")
        else:
            f = replace(f, given=(*f.given, Path(word)), order=(*f.order, ""))
    return f


@dataclass(frozen=True)
class TargetFlags:
    given: tuple[Path, ...]
    hosts_text: str | None
    hosts_file: Path | None
    shared_file: bool
    ssh_config: str | None
    storage_classes: tuple[str, ...]
    kube_params: dict[str, Any]
    probe_metadata: bool | None
    dry_run: bool
    timeout_s: float | None
    destructive: str | None = None
    size: str | None = None  # --size: else each test's (a device: all of it)
    precondition: bool = False
    reads_only: bool = False
    words: tuple[str, ...] = ()  # TARGET as given: read_targets makes given (and more) of it
    made: tuple[Target, ...] = ()  # targets a scheme made itself: a kind no flag names
    # per path here and made target, in the order given: "" (a path), or the word that
    # made one (as typed, for messages)
    order: tuple[str, ...] = ()
    kube_given: tuple[str, ...] = ()  # the Kubernetes flags typed (they need a class)
    endpoint: str | None = None  # s3:// TARGETs' (OBJECT_OPTIONS)
    region: str | None = None
    create_bucket: bool = False

    @property
    def size_given(self) -> bool:
        return self.size is not None


def choose_targets(f: TargetFlags) -> list[Target]:
    """The targets the flags name: directories, one path on --hosts, or StorageClasses."""
    f = read_targets(f)
    if (f.endpoint or f.region or f.create_bucket) and not any(
            w.startswith("s3://") for w in f.order):
        raise ConfigError("--endpoint, --region and --create-bucket apply to s3://BUCKET"
                          " TARGETs")
    hosts: list[Host] = []
    if f.hosts_text is not None:
        hosts += parse_hosts(f.hosts_text)
    if f.hosts_file is not None:
        hosts += parse_hosts(f.hosts_file.read_text(), str(f.hosts_file))
    if len({h.key for h in hosts}) != len(hosts):
        raise ConfigError("--hosts: a host is listed twice")
    if f.shared_file and not hosts and not f.storage_classes:
        raise ConfigError("--shared-file needs --hosts, --hosts-file or --storage-class with"
                          " --clients")
    if f.ssh_config and not any(h.ssh for h in hosts):
        raise ConfigError("--ssh-config applies to ssh:// hosts (--hosts ssh://HOST)")
    devices = [p for p in f.given if is_block_device(p)]
    remote_device = bool(hosts) and len(f.given) == 1 and names_a_device(f.given[0])
    if remote_device and f.destructive is not None and f.destructive != str(f.given[0]):
        raise ConfigError(f"--destructive {f.destructive}: name the TARGET device again,"
                          f" as given ({f.given[0]})")
    if f.destructive is not None and not remote_device and not any(
            os.path.realpath(f.destructive) == os.path.realpath(p) for p in devices):
        raise ConfigError(f"--destructive {f.destructive}: it must name a block device given"
                          " as TARGET (the same device, named again)")
    pods = bool(f.kube_params.get("pods"))
    if pods and (f.storage_classes or not any(w.startswith("s3://") for w in f.order)):
        raise ConfigError("--pods applies to s3:// TARGETs: fio runs in pods and reaches the"
                          " bucket over the network (a StorageClass's pods: --storage-class)")
    if devices and f.storage_classes:
        raise ConfigError("a block device TARGET and --storage-class cannot be combined"
                          " (--volume-mode Block measures a raw volume of the class)")
    if f.storage_classes:
        if f.given or f.made:
            raise ConfigError("give a directory TARGET or --storage-class, not both")
        if hosts:
            raise ConfigError("--hosts and --storage-class cannot be combined yet")
        if len(set(f.storage_classes)) != len(f.storage_classes):
            raise ConfigError("a --storage-class is given twice")
        from storbench.cli.kubeflags import build_options
        from storbench.target.kubernetes.manifests import DATA_DIR, DEVICE_PATH
        from storbench.target.kubernetes.storageclass import KubeTarget

        options = [build_options(c, f.kube_params, f.timeout_s) for c in f.storage_classes]
        if (f.precondition or f.reads_only) and not all(o.block for o in options):
            raise ConfigError(DEVICE_FLAGS)
        # a class's volume: the raw device (--volume-mode Block), or files in it
        return [KubeTarget(o, _storage(f, Path(DEVICE_PATH if o.block else DATA_DIR), o.block))
                for o in options]
    if pods:
        return [pods_target(f.made, bool(f.given or hosts), f.dry_run, f.kube_params,
                            (*f.kube_given, *(("--shared-file",) if f.shared_file else ())),
                            f.timeout_s)]
    if f.kube_given:  # ignored, unsaid, before: --capacity 100Gi on a directory
        raise ConfigError(f"{', '.join(f.kube_given)}: Kubernetes options apply to"
                          " --storage-class CLASS (or k8s://CLASS)")
    if f.made:  # a kind of target of its own scheme's: beside paths here, no flag of others
        word = next(w for w in f.order if w)
        if f.dry_run:
            raise ConfigError(f"TARGET {word} cannot be combined with --dry-run")
        if hosts:  # a storage outside every place (a bucket), reached from the hosts
            storage = getattr(f.made[0], "storage", None)
            if not isinstance(storage, Outside):
                raise ConfigError(f"TARGET {word} cannot be combined with --hosts")
            if len(f.made) > 1 or f.given:
                raise ConfigError("with --hosts, give one TARGET: the storage on the hosts")
            if f.shared_file:
                raise ConfigError(f"--shared-file: on {word} each host PUTs and GETs objects"
                                  " of its own")
            if storage.loopback and (far := [h.key for h in hosts if not h.on_loopback()]):
                raise ConfigError(f"{storage.loopback} is a loopback address: on"
                                  f" {', '.join(far)} it is that host's own, not this"
                                  " endpoint; give --endpoint an address the hosts reach")
            return [HostsTarget(storage, hosts, f.ssh_config)]
        here, made = iter(_here(f, devices) if f.given else []), iter(f.made)
        return [next(made) if w else next(here) for w in f.order]
    if not f.given:
        raise ConfigError("give a directory TARGET (or --storage-class CLASS); see"
                          " `storbench run --help`")
    if f.dry_run:
        raise ConfigError("--dry-run applies to --storage-class runs")
    if hosts:
        if len(f.given) > 1:
            raise ConfigError("with --hosts, give one TARGET: the path on the hosts")
        if not f.given[0].is_absolute():
            raise ConfigError(f"with --hosts, TARGET is the absolute path on the hosts:"
                              f" {str(f.given[0])!r} is relative (to what, on each host?)")
        if f.probe_metadata:
            raise ConfigError("--probe-metadata runs on this machine; it cannot run on a"
                              " hosts target")
        if (f.precondition or f.reads_only) and not remote_device:
            raise ConfigError(DEVICE_FLAGS)
        if remote_device and f.shared_file:
            raise ConfigError("--shared-file applies to a file system shared by the hosts,"
                              " not to a block device")
        return [HostsTarget(_storage(f, f.given[0], remote_device), hosts, f.ssh_config)]
    return _here(f, devices)


def _here(f: TargetFlags, devices: list[Path]) -> list[Target]:
    """The TARGET paths on this machine: directories and block devices."""
    # lexically: resolving a path looks at each part of it, a silent server's too
    if len({os.path.abspath(p) for p in f.given}) != len(f.given):
        raise ConfigError("a TARGET is given twice")
    if (f.precondition or f.reads_only) and len(devices) != len(f.given):
        raise ConfigError(DEVICE_FLAGS)
    return [HereTarget(_storage(f, p, p in devices)) for p in f.given]


def _storage(f: TargetFlags, path: Path, device: bool) -> Storage:
    """What fio works on at ``path``: the block device there, or files in the directory."""
    if device:
        return DeviceStorage(str(path), f.destructive, f.size_given, f.precondition,
                             f.reads_only)
    return FilesStorage(str(path), f.shared_file)


# Directories under /dev that hold files, not devices (tmpfs on every Linux).
FILE_DIRS_IN_DEV = ("shm",)


def names_a_device(path: Path) -> bool:
    """Whether a path on other hosts (not looked at from here) names a device: under /dev,
    lexically normalised (``/dev/shm/../sda`` is /dev/sda), and not in /dev/shm."""
    parts = Path(os.path.normpath(path)).parts
    return parts[:2] == ("/", "dev") and len(parts) > 2 and parts[2] not in FILE_DIRS_IN_DEV


def is_block_device(path: Path) -> bool:
    """Whether ``path`` is a block device. Outside /dev it is looked at in a child: a
    directory on a file system whose server is silent would hold storbench in the
    kernel; a child that gets no answer is named by its PID (TargetHung)."""
    if path.is_absolute() and path.parts[1:2] == ("dev",):
        try:
            return stat.S_ISBLK(os.stat(path).st_mode)
        except OSError:
            return False
    try:
        mode = fsops.stat_mode(path, DEVICE_STAT_S)
    except fsops.Stuck as exc:
        raise exc.blamed(f"target {str(path)!r} does not respond: looking at it got {exc};"
                         " is its file system's server reachable?") from None
    return mode is not None and stat.S_ISBLK(mode)
