"""A real NVMe namespace for tests: QEMU's emulated NVMe controller, in a small VM.

This machine has no NVMe device and cannot load nvme-loop, so the tests boot Debian's
own kernel (unpacked by scripts/install-testbed into ``$STORBENCH_TEST_TOOLS/vm``) under
QEMU's software emulation (this machine's KVM does not run it), with:

- an initramfs of static busybox and the kernel's nvme, virtio, 9p and ext4 modules;
- this machine's ``/`` shared read-only over 9p as the guest's root, so the guest runs
  the very python, storbench, fio and nvme-cli the tests use here;
- this checkout shared read-only at its own path (the guest's /tmp, /run and /var/tmp
  are fresh tmpfs: a checkout under /tmp would be hidden otherwise);
- a folder of the test's shared read-write at the same path, for the script the guest
  runs and what it leaves (output, its exit status, a results database);
- an NVMe controller (serial, model from QEMU) with one namespace on an image file of
  the test's, whose size and LBA size the test sets.

The guest writes only to the namespace's image, tmpfs and the shared folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.testbed import TOOLS

VM = TOOLS / "vm"
CHECKOUT = Path(__file__).resolve().parent.parent
BUSYBOX = Path("/bin/busybox")
# the NVMe driver, the 9p shares, and ext4 (with its checksum) for a file system on a namespace
MODULES = ("nvme", "9pnet_virtio", "9p", "virtio_pci", "crc32c_generic", "ext4")
QEMU = "qemu-system-x86_64"

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod "/lib/modules/$m" || echo "vm: insmod $m failed"; done
share=$(sed -n 's/.*sbshare=\([^ ]*\).*/\1/p' /proc/cmdline)
opts=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$opts,ro,cache=loose" hostroot /newroot || echo "vm: no root share"
mount -t devtmpfs dev /newroot/dev
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
for d in /tmp /run /var/tmp; do mount -t tmpfs tmpfs "/newroot$d"; done
repo=$(sed -n 's/.*sbrepo=\([^ ]*\).*/\1/p' /proc/cmdline)
mkdir -p "/newroot$repo" 2>/dev/null || true
mount -t 9p -o "$opts,ro,cache=loose" repo "/newroot$repo" || echo "vm: no checkout share"
mkdir -p "/newroot$share" 2>/dev/null || true
mount -t 9p -o "$opts" share "/newroot$share" || echo "vm: no test share"
last=$(sed -n 's/.*sbwait=\([^ ]*\).*/\1/p' /proc/cmdline)
i=0
while [ ! -b "$last" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
chroot /newroot /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp LANG=C.UTF-8 /bin/sh "$share/job.sh" > "/newroot$share/out.txt" 2>&1
echo $? > "/newroot$share/rc"
sync
poweroff -f
"""


def missing() -> str | None:
    """Why the VM cannot start here, or None."""
    if os.geteuid() != 0:
        return "needs root (QEMU's 9p share of / as root)"
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (scripts/install-testbed installs it)"
    if not BUSYBOX.exists():
        return "busybox-static is not installed (scripts/install-testbed installs it)"
    if shutil.which("nvme") is None:
        return "nvme-cli is not installed (scripts/install-testbed installs it)"
    if not (VM / "vmlinuz").exists() or not (VM / "modules" / "modules.dep").exists():
        return f"no kernel unpacked in {VM} (scripts/install-testbed does it)"
    return None


def _load_order() -> list[str]:
    """The module files to insmod, each after what it depends on (modules.dep)."""
    deps: dict[str, list[str]] = {}
    for line in (VM / "modules" / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    by_name = {Path(m).name.split(".ko")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(mod: str) -> None:
        for dep in deps[mod]:
            visit(dep)
        if mod not in order:
            order.append(mod)

    for name in MODULES:
        visit(by_name[name])
    return order


def _initramfs(where: Path) -> Path:
    root = where / "initramfs"
    for d in ("bin", "proc", "sys", "dev", "newroot", "lib/modules"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    order = _load_order()
    for mod in order:
        shutil.copy2(VM / "modules" / mod, root / "lib" / "modules" / Path(mod).name)
    (root / "modules.order").write_text("\n".join(Path(m).name for m in order) + "\n")
    image = where / "initramfs.cpio"
    files = subprocess.run(["find", "."], cwd=root, check=True, capture_output=True).stdout
    with image.open("wb") as out:
        subprocess.run([str(BUSYBOX), "cpio", "-o", "-H", "newc"], cwd=root, input=files,
                       stdout=out, stderr=subprocess.DEVNULL, check=True)
    return image


def run(share: Path, script: str, *, namespaces: Sequence[tuple[Path, int]], serial: str,
        timeout: float = 600) -> tuple[int, str]:
    """Boot the VM with an NVMe controller whose namespaces 1, 2, ... are the given
    (image file, LBA bytes), seen in the guest as /dev/nvme0n1, /dev/nvme0n2, ...; run
    ``script`` (sh, ``set -e``) as root in it, and return its exit status and output.
    The console's log is ``share/console.log``; the guest's own files go under
    ``share``."""
    share.mkdir(parents=True, exist_ok=True)
    (share / "job.sh").write_text("set -e\n" + script)
    (share / "rc").unlink(missing_ok=True)
    initrd = _initramfs(share / "boot")
    argv = [
        # qemu64, not max: TCG emulating max's vector units made every start slower
        # (measured: `storbench --help` 6.6 s → 4.0, `fio --parse-only` 3.2 → 1.9)
        QEMU, "-accel", "tcg", "-cpu", "qemu64", "-smp", "2", "-m", "2048",
        "-nographic", "-no-reboot", "-nic", "none",
        "-kernel", str(VM / "vmlinuz"), "-initrd", str(initrd),
        "-append", f"console=ttyS0 panic=-1 quiet rdinit=/init sbshare={share}"
                   f" sbwait=/dev/nvme0n{len(namespaces)} sbrepo={CHECKOUT}",
        "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,"
                   "multidevs=remap",
        "-virtfs", f"local,path={CHECKOUT},mount_tag=repo,security_model=none,readonly=on,"
                   "multidevs=remap",
        "-virtfs", f"local,path={share},mount_tag=share,security_model=none",
        "-device", f"nvme,serial={serial},id=nvme0",
    ]
    for nsid, (image, lba) in enumerate(namespaces, 1):
        argv += ["-drive", f"file={image},if=none,id=ns{nsid},format=raw,cache=none",
                 "-device", f"nvme-ns,drive=ns{nsid},bus=nvme0,nsid={nsid},"
                            f"logical_block_size={lba},physical_block_size={lba}"]
    with (share / "console.log").open("wb") as console:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=console,
                       stderr=subprocess.STDOUT, timeout=timeout, check=False)
    out = (share / "out.txt").read_text() if (share / "out.txt").exists() else ""
    if not (share / "rc").exists():
        log = (share / "console.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the VM did not run the script; its console:\n{log}")
    return int((share / "rc").read_text()), out
