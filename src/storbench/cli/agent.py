"""`storbench agent`: fio's server for `run --hosts`, on a unix socket by default."""

from __future__ import annotations

from pathlib import Path

import click

from storbench.cli.common import cli, err, only_with
from storbench.errors import ConfigError, StorbenchError
from storbench.execute import find_fio
from storbench.execute.agent import (
    AgentSpec,
    argv,
    check_bind,
    check_user,
    default_socket,
    prepare_socket,
    serve,
    warning,
)
from storbench.target.hostlist import DEFAULT_PORT


@cli.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), metavar="PATH",
              help="Unix socket fio's server listens on (default:"
                   " $XDG_RUNTIME_DIR/storbench-agent.sock, else"
                   " /tmp/storbench-agent-UID/agent.sock): 0600 in a 0700 directory, so"
                   " only this user reaches it. `run --hosts sock:PATH` uses it (from"
                   " elsewhere: ssh -L LOCAL.sock:PATH).")
@click.option("--bind", metavar="ADDR",
              help="Listen on TCP at this address of the host instead (IPv4 or IPv6):"
                   " whoever reaches it runs commands as this user; said on every start.")
@click.option("--port", default=DEFAULT_PORT, show_default=True,
              type=click.IntRange(1, 65535),
              help="TCP port, with --bind.")
@click.option("--allow-root", is_flag=True,
              help="Run as root anyway (refused without it: whoever reaches the agent acts"
                   " as its user).")
@click.option("--confine", "confine_dirs", multiple=True, metavar="DIR",
              type=click.Path(path_type=Path, file_okay=False),
              help="Let fio's server write only beneath DIR (repeatable), enforced by the"
                   " kernel (Landlock), whoever sends the jobs.")
@click.option("--fio", "fio_path", envvar="STORBENCH_FIO", show_envvar=True,
              help="fio binary to run (default: fio on PATH).")
def agent(socket_path: Path | None, bind: str | None, port: int, allow_root: bool,
          confine_dirs: tuple[Path, ...], fio_path: str | None) -> None:
    """Serve this host to `storbench run --hosts`: runs `fio --server` in the foreground.

    fio's server runs whatever job a client sends it, with no authentication: files
    written anywhere this user may write, commands run (exec_prerun=). So it listens on
    a unix socket only this user can reach, and refuses to run as root; --bind listens
    on TCP instead and warns on every start. `run --hosts ssh://HOST` starts a server
    for each run over SSH instead, on a private socket: no standing listener. Every host
    must run the same fio version as the machine that runs storbench. See docs/cli.md
    for a hardened systemd unit.

    \b
    Example:
      storbench agent                                  # a unix socket of this user's
      storbench agent --confine /mnt/bench             # its jobs write only /mnt/bench
      storbench run /mnt/bench --hosts sock:/run/user/1000/storbench-agent.sock
      storbench agent --bind 10.0.0.5 --port 8766      # TCP: warns who can use it
    """
    if socket_path is not None and bind is not None:
        raise ConfigError("--socket and --bind: give one (a unix socket, or a TCP address)")
    only_with(("port", "--port", bind is not None, "--bind (without it the agent listens on"
                                                   " a unix socket)"))
    spec = AgentSpec(None if bind is not None else (socket_path or default_socket()).absolute(),
                     bind, port, allow_root,
                     tuple(d.absolute() for d in confine_dirs))
    check_user(spec)
    fio = find_fio(fio_path)
    for d in spec.confine:
        if not d.is_dir():
            raise ConfigError(f"--confine {str(d)!r} is not a directory")
    if spec.socket is not None:
        prepare_socket(spec.socket)
    else:
        assert spec.bind is not None
        check_bind(spec.bind, port)
        err.print(f"storbench agent: {warning(spec)}", markup=False)
    command = argv(spec, fio)
    where = f"socket {spec.socket}" if spec.socket is not None else f"{bind}:{port}"
    confined = f"; its jobs may write only {', '.join(map(str, spec.confine))}" \
        if spec.confine else ""
    err.print(f"storbench agent: fio's server ({fio.version_text}) on {where}{confined};"
              " Ctrl-C stops it", markup=False)
    status = serve(command, spec.socket)
    if status not in (0, -2, -15, 130, 143):
        raise StorbenchError(f"fio's server ended with status {status}")
