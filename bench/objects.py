"""Are an s3:// run's figures the server's? On each real S3 server of the tests
(tests/objects.py: s3proxy on a directory, moto's server), in one go: GETs of 1 MiB
objects, 4 at a time, measured three ways, alternated:

- storbench: `storbench run s3://… --job` (PUT the objects, then GET them for the runtime);
- fio by hand: the same job with its http options written by hand (no storbench);
- boto3: 4 threads, each GETting its own objects back to back, timed per request.

Prints objects/s and p50 of each and the ratios storbench / fio and storbench / boto3.
Goal (issue #59): storbench within 10% of both. boto3 is a different client (its own
HTTP stack and per-request CPU): a ratio off 1 there says how much the client costs,
not that storbench is wrong; fio by hand is the like-for-like reference.

    .venv/bin/python bench/objects.py [--rounds 3] [--runtime 5] [--servers s3proxy,moto]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.objects import FIO_HTTP, missing, s3_server

OBJECTS = 8  # per job
JOB = f"""[global]
bs=1m
size={OBJECTS}m
numjobs=4
[put]
rw=write
filename=obj
[get]
stonewall
rw=read
filename=obj
time_based
runtime={{runtime}}
"""
BY_HAND = """[global]
ioengine=http
http_mode=s3
https=off
http_host={host}
http_s3_region=us-east-1
http_s3_keyid={key_id}
http_s3_key={secret}
bs=1m
size={objects}m
numjobs=4
filename_format=/{bucket}/hand/obj.$jobnum.$filenum
[put]
rw=write
[get]
stonewall
rw=read
time_based
runtime={runtime}
"""


def by_storbench(server, bucket: str, runtime: float, work: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    job = work / "get.fio"
    job.write_text(JOB.format(runtime=runtime))
    env = {**os.environ, **server.env(), "STORBENCH_DB": str(work / "bench.db")}
    out = subprocess.run([sys.executable, "-m", "storbench", "run", f"s3://{bucket}",
                          "--endpoint", server.url, "--fio", str(FIO_HTTP), "--job",
                          str(job), "--json"], check=True, capture_output=True, text=True,
                         env=env).stdout
    read = next(t["read"] for t in json.loads(out)["tests"] if t["read"])
    return float(read["iops"]), float(read["clat"]["percentiles_ns"]["50.0"]) / 1e6


def by_fio(server, bucket: str, runtime: float, work: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    job = work / "hand.fio"
    job.write_text(BY_HAND.format(host=server.url.split("//")[1], key_id=server.key_id,
                                  secret=server.secret, bucket=bucket, objects=OBJECTS,
                                  runtime=runtime))
    job.chmod(0o600)
    out = subprocess.run([str(FIO_HTTP), "--output-format=json", str(job)], check=True,
                         capture_output=True, text=True).stdout
    get = [j for j in json.loads(out)["jobs"] if j["jobname"] == "get"]
    iops = sum(j["read"]["iops"] for j in get)
    p50 = statistics.median(j["read"]["clat_ns"]["percentile"]["50.000000"] for j in get)
    for key in server.keys(bucket):
        server.client().delete_object(Bucket=bucket, Key=key)
    return iops, p50 / 1e6


def by_boto3(server, bucket: str, runtime: float) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    body = os.urandom(1 << 20)
    clients = [server.client() for _ in range(4)]
    for n, c in enumerate(clients):
        for i in range(OBJECTS):
            c.put_object(Bucket=bucket, Key=f"boto/{n}/{i}", Body=body)
    times: list[list[float]] = [[] for _ in clients]
    stop = time.monotonic() + runtime

    def loop(n: int) -> None:
        i = 0
        while time.monotonic() < stop:
            t = time.perf_counter()
            clients[n].get_object(Bucket=bucket, Key=f"boto/{n}/{i % OBJECTS}")["Body"].read()
            times[n].append(time.perf_counter() - t)
            i += 1

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key in server.keys(bucket):
        server.client().delete_object(Bucket=bucket, Key=key)
    every = [x for ts in times for x in ts]
    return len(every) / runtime, statistics.median(every) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runtime", type=float, default=5.0)
    parser.add_argument("--servers", default="s3proxy,moto")
    args = parser.parse_args()
    for name in args.servers.split(","):
        why = missing(name)
        if why:
            print(f"{name}: skipped: {why}")
            continue
        with s3_server(name) as server, tempfile.TemporaryDirectory() as d:
            os.environ.update(server.env())
            bucket = f"bench-{name}"
            server.client().create_bucket(Bucket=bucket)
            got: dict[str, list[tuple[float, float]]] = {"storbench": [], "fio": [], "boto3": []}
            for r in range(args.rounds):
                got["storbench"].append(by_storbench(server, bucket, args.runtime, Path(d)))
                got["fio"].append(by_fio(server, bucket, args.runtime, Path(d)))
                got["boto3"].append(by_boto3(server, bucket, args.runtime))
                print(f"{name} round {r + 1}: " + ", ".join(
                    f"{k} {v[-1][0]:,.0f}/s p50 {v[-1][1]:.2f} ms" for k, v in got.items()),
                      flush=True)
            med = {k: (statistics.median(x for x, _ in v), statistics.median(p for _, p in v))
                   for k, v in got.items()}
            s = med["storbench"]
            for ref in ("fio", "boto3"):
                print(f"{name}: storbench / {ref}: objects/s {s[0] / med[ref][0]:.3f},"
                      f" p50 {s[1] / med[ref][1]:.3f}")


if __name__ == "__main__":
    main()
