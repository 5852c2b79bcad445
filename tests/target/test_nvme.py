"""NVMe namespace facts, read by nvme-cli from a real NVMe controller: QEMU's, in a
small VM (tests/nvmevm.py) whose root is this machine's, so storbench, fio and nvme-cli
run there as they do here. The facts are checked against what the test told QEMU
(serial, namespace sizes and LBA sizes) and against what fio says it wrote."""

from __future__ import annotations

import hashlib
import json
import os
import shlex

import pytest

from tests import nvmevm
from tests.conftest import STORBENCH, run_cli

MiB = 2**20
WRITE = "[write]\nrw=write\nbs=1m\niodepth=4\nioengine=libaio\n"  # once over --size
READS = "[reads]\nrw=randread\nbs=4k\niodepth=8\nioengine=libaio\ntime_based\nruntime=1\n"


@pytest.fixture
def vm_ready() -> None:
    reason = nvmevm.missing()
    if reason and os.environ.get("STORBENCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"the NVMe VM cannot start: {reason}")
    if reason:
        pytest.skip(f"NVMe VM: {reason}")


def test_nvme_namespace_facts_from_nvme_cli(vm_ready, tmp_path):
    share = tmp_path / "vm"
    share.mkdir()
    ns1, ns2 = tmp_path / "ns1.img", tmp_path / "ns2.img"
    with ns1.open("wb") as f:
        f.truncate(256 * MiB)
    ns2.write_bytes(bytes(range(256)) * (64 * MiB // 256))  # not blank: reads only
    before = hashlib.sha256(ns2.read_bytes()).hexdigest()
    (share / "reads.fio").write_text(READS)
    (share / "write.fio").write_text(WRITE)
    sb = shlex.join(STORBENCH)
    script = f"""
export STORBENCH_DB=/tmp/results.db
cd {shlex.quote(str(share))}
# a short job, not a suite: under QEMU's emulation the quick suite took 38 s
# (each storbench start takes seconds under emulation: five runs, no more)
{sb} run /dev/nvme0n1 --job write.fio --size 32m --destructive /dev/nvme0n1 > run1.txt 2>&1
{sb} run /dev/nvme0n2 --job reads.fio > run2.txt 2>&1
# nvme-cli refused by the kernel: root without CAP_SYS_ADMIN, as in a container
setpriv --bounding-set -sys_admin --inh-caps -sys_admin \\
  {sb} run /dev/nvme0n2 --job reads.fio > run3.txt 2>&1
# a directory on a file system on namespace 1: the disk under it is that namespace
mkfs.ext4 -q -F /dev/nvme0n1
mkdir /tmp/fs && mount /dev/nvme0n1 /tmp/fs
{sb} run /tmp/fs --job write.fio --size 8m > run4.txt 2>&1
umount /tmp/fs
# no nvme-cli: its program made unrunnable (bind-mounted over by /dev/null)
mount --bind /dev/null "$(command -v nvme)"
{sb} run /dev/nvme0n2 --job reads.fio > run5.txt 2>&1
cp /tmp/results.db results.db
"""
    rc, out = nvmevm.run(share, script, namespaces=[(ns1, 4096), (ns2, 512)],
                         serial="SB-NVME-7")
    said = {f.stem: f.read_text() for f in share.glob("*.txt")}
    assert rc == 0, (out, said)
    db = share / "results.db"
    runs = [json.loads(run_cli("show", str(i), "--json", db=db).stdout) for i in range(1, 6)]
    assert [r["status"] for r in runs] == ["completed"] * 5
    # the first run's facts are read before it writes
    first, second, refused, on_fs, absent = (r["environment"]["target"] for r in runs)
    before_write = first

    # what QEMU was told: the controller's serial, each namespace's size and LBA size
    assert first["model"] == "QEMU NVMe Ctrl" and first["serial"] == "SB-NVME-7"
    nvme = first["nvme"]
    assert nvme["namespace_id"] == 1
    assert (nvme["lba_data_bytes"], nvme["lba_metadata_bytes"]) == (4096, 0)
    assert nvme["namespace_bytes"] == nvme["capacity_bytes"] == 256 * MiB
    assert nvme["lba_formats"].split(", ")[:2] == ["512", "512+8"]
    assert "4096" in nvme["lba_formats"].split(", ")
    assert nvme["preferred_write_granularity_bytes"] == 4096
    assert nvme["nvme_version"] == "1.4" and nvme["controller_namespaces"] >= 2
    assert nvme["volatile_write_cache"] is True  # QEMU's controller reports one
    assert (nvme["percent_used"], nvme["critical_warning"], nvme["media_errors"]) == (0, 0, 0)
    assert nvme["temperature_c"] == 323 - 273  # QEMU's constant: 323 K
    assert second["nvme"]["namespace_id"] == 2
    assert second["nvme"]["lba_data_bytes"] == 512
    assert second["nvme"]["namespace_bytes"] == 64 * MiB == second["size_bytes"]

    # the controller's count of data written (units of 1000 512-byte blocks, rounded
    # up) grew by what fio wrote between the two readings: the unit is read right
    assert runs[0]["tests"][0]["write"]["io_bytes"] == 32 * MiB
    grew = second["nvme"]["written_bytes"] - before_write["nvme"]["written_bytes"]
    assert abs(grew - 32 * MiB) < 512_000

    # a directory's disk is described as a block device TARGET is, NVMe facts included
    assert on_fs["fs_type"] == "ext4" and on_fs["mount_source"] == "/dev/nvme0n1"
    assert on_fs["block_device"]["serial"] == "SB-NVME-7"
    assert on_fs["block_device"]["nvme"]["namespace_id"] == 1
    assert on_fs["block_device"]["nvme"]["lba_data_bytes"] == 4096

    # nvme-cli failing, or not there, is said (with its error), and the run goes on
    assert refused["nvme"]["namespace_id"] == absent["nvme"]["namespace_id"] == 2
    assert refused["nvme"]["nvme_cli"].startswith("nvme "), refused["nvme"]
    assert " /dev/nvme0n2 failed (" in refused["nvme"]["nvme_cli"]
    assert "permission" in refused["nvme"]["nvme_cli"].lower()
    assert absent["nvme"]["nvme_cli"].startswith("not installed")
    assert "lba_data_bytes" not in refused["nvme"] and "lba_data_bytes" not in absent["nvme"]

    # shown to the user: the namespace in the line before writing, the facts in the
    # environment with bytes in IEC units; the namespace only read is untouched
    assert ("WRITING to /dev/nvme0n1 (QEMU NVMe Ctrl, SB-NVME-7, namespace 1, 256.0 MiB);"
            in said["run1"])
    assert "laying out files" not in said["run1"]  # a device: fio has no files to lay out
    assert "Reading (fio --readonly) /dev/nvme0n2 (QEMU NVMe Ctrl, SB-NVME-7, namespace 2," \
        in said["run2"]
    # (`show` here, on the VM's database: a storbench start in the VM costs seconds)
    shown = run_cli("show", "1", db=db).stdout
    assert "target.nvme.lba_data_bytes" in shown
    assert "4.0 KiB (4096 bytes)" in shown
    assert hashlib.sha256(ns2.read_bytes()).hexdigest() == before
