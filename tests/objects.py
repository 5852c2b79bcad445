"""Real S3 servers for the s3:// TARGET's tests, each on a loopback port with keys of its
own, stopped by its PID afterwards: s3proxy 2.7.0 (Java) on a real directory, and moto's
server (Python). fio with its http engine is scripts/build-fio-http's
(scripts/install-testbed builds it into ~/.cache/storbench-test/fio-http)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests import services
from tests.testbed import free_port

TOOLS = Path(os.environ.get("STORBENCH_TEST_TOOLS") or Path.home() / ".cache/storbench-test")
FIO_HTTP = Path(os.environ.get("STORBENCH_TEST_FIO_HTTP") or TOOLS / "fio-http/fio")
S3PROXY_JAR = TOOLS / "s3proxy-2.7.0.jar"
MOTO = Path(sys.executable).parent / "moto_server"
SERVERS = ("s3proxy", "moto")


# PUTs, GETs and DELETEs of the objects each worker (a host, a pod) puts: 2 jobs a worker
PUT_GET_DELETE = """\
[global]
bs=64k
size=512k
numjobs=2
[put]
rw=write
filename=obj
[get]
stonewall
rw=read
filename=obj
[delete]
stonewall
rw=trim
filename=obj
"""
PUT_GET_DELETE_OBJECTS = 2 * 512 // 64  # per worker: 2 jobs of 8 objects


@dataclass(frozen=True)
class S3Server:
    name: str
    url: str
    key_id: str
    secret: str
    data: Path | None  # where s3proxy keeps the objects (None: moto's memory)

    def env(self) -> dict[str, str]:
        """What storbench and boto3 need to reach it."""
        return {"AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_REGION": "us-east-1", "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        old = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())
        try:
            return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=self.key_id,
                                aws_secret_access_key=self.secret, region_name="us-east-1")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def keys(self, bucket: str) -> list[str]:
        found: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket):
            found += [o["Key"] for o in page.get("Contents", [])]
        return found


def missing(name: str) -> str | None:
    """Why the server ``name`` (or fio's http engine) cannot be had here."""
    if not FIO_HTTP.exists():
        return f"fio with the http engine is not built ({FIO_HTTP}: scripts/build-fio-http)"
    if name == "s3proxy":
        if shutil.which("java") is None:
            return "java is not installed (scripts/install-testbed installs it)"
        if not S3PROXY_JAR.exists():
            return f"s3proxy is not fetched ({S3PROXY_JAR}: scripts/install-testbed)"
    if name == "moto" and not MOTO.exists():
        return "moto's server is not installed (uv sync --group dev)"
    return None


@contextlib.contextmanager
def s3_server(name: str) -> Iterator[S3Server]:
    port = free_port()
    key_id, secret = f"SBT{secrets.token_hex(6).upper()}", f"sbt-{secrets.token_hex(16)}"
    with tempfile.TemporaryDirectory(prefix=f"sbt-{name}-") as tmp:
        data: Path | None = None
        if name == "s3proxy":
            data = Path(tmp) / "data"
            data.mkdir()
            conf = Path(tmp) / "s3proxy.conf"
            conf.write_text(f"s3proxy.endpoint=http://127.0.0.1:{port}\n"
                            "s3proxy.authorization=aws-v2-or-v4\n"
                            f"s3proxy.identity={key_id}\ns3proxy.credential={secret}\n"
                            "jclouds.provider=filesystem\n"
                            f"jclouds.filesystem.basedir={data}\n")
            conf.chmod(0o600)
            argv = ["java", "-jar", str(S3PROXY_JAR), "--properties", str(conf)]
        else:
            argv = [str(MOTO), "-H", "127.0.0.1", "-p", str(port)]
        # started, waited for and stopped (by its PID) as the team stores' servers are
        with services._server(argv, port, Path(tmp) / "server.log", timeout=60):
            yield S3Server(name, f"http://127.0.0.1:{port}", key_id, secret, data)
