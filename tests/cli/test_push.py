"""storbench push / run --push to a real Pushgateway, read back through a real
Prometheus that scrapes it."""

from __future__ import annotations

import base64
import json

import pytest

from tests import services
from tests.conftest import needs_fio, run_cli
from tests.testbed import free_port

pytestmark = [needs_fio, services.needs(("prometheus-pushgateway", services.PUSHGATEWAY),
                                        ("prometheus", services.PROMETHEUS))]


def shown(db) -> dict:
    proc = run_cli("show", "last", "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_pushed_run_is_queryable_in_prometheus(tmpfs, store_path):
    with services.pushgateway() as gateway:
        proc = run_cli("run", str(tmpfs), "--suite", "quick", "--size", "8m",
                       "--runtime", "1", "--ramp", "0",
                       "--label", "pushed", "--push", gateway, db=store_path)
        assert proc.returncode == 0, proc.stderr
        assert "Pushed run #1 to" in proc.stderr
        run = shown(store_path)
        target = gateway.split("//")[1]
        with services.prometheus([target]) as prom:
            found = prom.wait_for('storbench_latency_seconds{quantile="0.99",'
                                  f'run_uid="{run["uid"]}",test="randread"}}')
    assert len(found) == 1, found
    labels = found[0]["metric"]
    assert labels["job"] == "storbench" and labels["instance"] == str(tmpfs)
    assert labels["label"] == "pushed" and labels["target_kind"] == "directory"
    p99 = next(t for t in run["tests"] if t["name"] == "randread")["read"]["clat"]
    measured = p99["percentiles_ns"]
    key = next(k for k in measured if float(k) == 99.0)
    assert float(found[0]["value"][1]) == pytest.approx(measured[key] / 1e9)


def test_push_of_stored_runs_replaces_the_targets_group(tmpfs, store_path):
    for label in ("a", "b"):
        assert run_cli("run", str(tmpfs), "--suite", "quick", "--size", "4m",
                       "--runtime", "1", "--ramp", "0",
                       "--label", label, db=store_path).returncode == 0
    with services.pushgateway() as gateway:
        proc = run_cli("push", "1", "2", "--pushgateway", gateway, db=store_path)
        assert proc.returncode == 0, proc.stderr
        import urllib.request

        with urllib.request.urlopen(f"{gateway}/api/v1/metrics", timeout=10) as r:
            groups = json.load(r)["data"]
        assert len(groups) == 1  # one target: one group, both runs in it
        iops = groups[0]["storbench_iops"]["metrics"]
        assert {m["labels"]["label"] for m in iops} == {"a", "b"}
        proc = run_cli("push", "2", "--pushgateway", gateway, db=store_path)
        with urllib.request.urlopen(f"{gateway}/api/v1/metrics", timeout=10) as r:
            iops = json.load(r)["data"][0]["storbench_iops"]["metrics"]
        assert {m["labels"]["label"] for m in iops} == {"b"}


def test_a_push_that_fails_says_so_and_the_run_is_kept(tmpfs, store_path):
    nowhere = f"http://127.0.0.1:{free_port()}"
    proc = run_cli("run", str(tmpfs), "--suite", "quick", "--size", "4m",
                   "--runtime", "1", "--ramp", "0",
                   "--push", nowhere, db=store_path)
    assert proc.returncode == 1
    assert f"run #1 is stored, but: cannot reach the Pushgateway at {nowhere}" in proc.stderr
    assert shown(store_path)["status"] == "completed"
    bad = run_cli("push", "1", "--pushgateway", "pushgateway:9091", db=store_path)
    assert bad.returncode == 2 and "give its URL" in bad.stderr


def test_a_pushgateway_behind_basic_auth_gets_its_password_and_nobody_sees_it(
        fio_json_text, tmp_path, store_path):
    """http://USER:PASSWORD@HOST: the password went nowhere (urllib sends no userinfo: the
    request failed as 'Name or service not known') and every message printed it. Now it is
    the Authorization header, to a real Pushgateway that asks for it, and never said."""
    import os
    import urllib.parse
    import urllib.request

    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), db=store_path).returncode == 0
    password = "s3cr:t/@%x"  # a colon, a slash, an at and a percent: quoted in the URL
    with services.pushgateway({"bench": password}) as gateway:
        host = gateway.split("//")[1]
        quoted = urllib.parse.quote(password, safe="")
        said = []
        for given, code, needle in (
                (gateway, 1, "HTTP 401 Unauthorized (give the user and password in its URL"),
                (f"http://bench:wrong@{host}", 1, "HTTP 401 Unauthorized (the user or password"),
                (f"http://bench:{quoted}@{host}", 0, f"Pushed to {gateway}/metrics/job/")):
            proc = run_cli("push", "last", "--pushgateway", given, db=store_path)
            assert proc.returncode == code and needle in proc.stderr, proc.stderr
            said.append(proc.stdout + proc.stderr)
        proc = run_cli("push", "last", db=store_path,
                       env={"STORBENCH_PUSHGATEWAY": f"http://bench:{quoted}@{host}/"})
        assert proc.returncode == 0, proc.stderr
        said.append(proc.stdout + proc.stderr)
        ask = urllib.request.Request(f"{gateway}/api/v1/metrics", headers={
            "Authorization": "Basic " + base64.b64encode(f"bench:{password}".encode()).decode()})
        with urllib.request.urlopen(ask, timeout=10) as r:
            assert json.load(r)["data"][0]["storbench_iops"]["metrics"]
    for text in said:
        assert password not in text and quoted not in text and "wrong" not in text, text
    proc = run_cli("run", os.fspath(tmp_path), "--push", f"ftp://bench:{quoted}@{host}",
                   db=store_path)  # said before anything runs, the password left out
    assert proc.returncode == 2 and f"--push 'ftp://{host}': give its URL" in proc.stderr
    assert run_cli("list", "--json", db=store_path).stdout.count('"id"') == 1
