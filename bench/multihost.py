"""Orchestration overhead of `storbench run --hosts` with 16 fio servers.

Starts 16 `fio --server` processes on 127.0.0.2 … 127.0.0.17, runs a 5 s job on all
of them through storbench, and prints the wall time minus the job's runtime (the
probe of every host, the client's connections, the result collection and storage).
Goal: under 3 s. Raw `fio --client` on the same hosts is measured too, as the
reference for what fio's own client/server mode costs.

    .venv/bin/python bench/multihost.py [--servers 16] [--runtime 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.testbed import free_port, wait_port_on

JOB = "[randread]\nrw=randread\nbs=4k\nsize=4m\ntime_based\nruntime={runtime}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=16)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    port = free_port()
    addresses = [f"127.0.0.{2 + i}" for i in range(args.servers)]
    servers = [subprocess.Popen(["fio", f"--server=ip:{a},{port}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for a in addresses]
    try:
        for a in addresses:
            wait_port_on(a, port)
        with tempfile.TemporaryDirectory() as d:
            target, job = Path(d) / "target", Path(d) / "job.fio"
            target.mkdir()
            job.write_text(JOB.format(runtime=args.runtime))
            env = {**os.environ, "STORBENCH_DB": str(Path(d) / "bench.db")}
            hosts = ",".join(f"{a}:{port}" for a in addresses)
            sb, raw = [], []
            for _ in range(args.rounds):
                time.sleep(2)  # let every server finish the previous round
                t0 = time.monotonic()
                subprocess.run([sys.executable, "-m", "storbench", "run", str(target), "--hosts",
                                hosts, "--job", str(job)], check=True, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                sb.append(time.monotonic() - t0 - args.runtime)
                client_args = []
                for a in addresses:
                    one = Path(d) / f"{a}.fio"
                    one.write_text(f"[global]\ndirectory={target}\nfilename_format={a}.$jobnum"
                                   f"\nunlink=1\n" + JOB.format(runtime=args.runtime))
                    client_args += [f"--client={a},{port}", str(one)]
                time.sleep(2)
                t0 = time.monotonic()
                subprocess.run(["fio", "--output-format=json+", *client_args], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                raw.append(time.monotonic() - t0 - args.runtime)
        print(f"{args.servers} servers, {args.runtime} s job, {args.rounds} rounds:")
        print(f"  storbench run --hosts: wall - runtime = median {statistics.median(sb):.2f} s"
              f" (all: {', '.join(f'{x:.2f}' for x in sb)}; goal < 3 s)")
        print(f"  raw fio --client:      wall - runtime = median {statistics.median(raw):.2f} s"
              f" (all: {', '.join(f'{x:.2f}' for x in raw)})")
    finally:
        for s in servers:
            s.terminate()
            s.wait()


if __name__ == "__main__":
    main()
