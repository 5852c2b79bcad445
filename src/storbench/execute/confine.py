"""fio confined by the kernel to the places a run may write: Landlock.

The third layer under the job-file checks (workload/guard.py): fio is started through
this module, which asks the kernel (Landlock, Linux >= 5.13) that fio and everything
it starts may create, write, truncate, rename or remove files only beneath the
directories given (the run's scratch directory, storbench's work directory) and the
files given (the one device named with --destructive), and, unless ``--exec`` names
more, execute nothing but fio itself. fio still reads what it needs (its libraries,
/proc, /sys). A job that got past the checks and reaches outside gets EACCES from the
kernel: fio fails, and says so.

It imports nothing but the standard library and runs as a script
(``python3 -I confine.py --write DIR ... -- fio ...``), so that the same file serves
this machine and, sent over SSH, a host's fio server. ``status()`` says whether the
kernel offers Landlock here, and which version (ABI).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same on every architecture
VERSION_FLAG = 1  # LANDLOCK_CREATE_RULESET_VERSION
PATH_BENEATH = 1  # LANDLOCK_RULE_PATH_BENEATH
PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
REMOVE_DIR, REMOVE_FILE = 1 << 4, 1 << 5
MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
REFER = 1 << 13  # ABI 2: link or rename into another directory
TRUNCATE = 1 << 14  # ABI 3
FILE_RIGHTS = EXECUTE | WRITE_FILE | (1 << 2) | TRUNCATE  # what a rule on a file may allow


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is disabled)."""
    if platform.system() != "Linux":
        return 0
    try:
        found = _libc().syscall(CREATE_RULESET, None, ctypes.c_size_t(0),
                                ctypes.c_uint32(VERSION_FLAG))
    except (OSError, AttributeError):
        return 0
    return int(found) if found > 0 else 0


def status() -> tuple[bool, str]:
    """(confined?, how) for messages and the stored environment."""
    version = abi()
    if version:
        return True, f"Landlock ABI {version}"
    return False, ("the kernel offers no Landlock here (Linux >= 5.13 with landlock among"
                   " its security modules)")


def restrict(writable: list[str], files: list[str], executable: list[str],
             exec_anything: bool) -> None:
    """Confine this process and its children from now on: writes only beneath
    ``writable`` directories and to ``files``; execute only ``executable`` (unless
    ``exec_anything``). OSError when the kernel refuses."""
    version = abi()
    if not version:
        raise OSError(0, status()[1])
    handled = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    if version >= 2:
        handled |= REFER
    if version >= 3:
        handled |= TRUNCATE
    if not exec_anything:
        handled |= EXECUTE
    libc = _libc()
    attr = ctypes.c_uint64(handled)  # struct landlock_ruleset_attr's first field
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    try:
        for path in writable:
            _allow(libc, ruleset, path, handled & ~EXECUTE)
        for path in files:
            _allow(libc, ruleset, path, handled & FILE_RIGHTS & ~EXECUTE)
        for path in executable if not exec_anything else []:
            _allow(libc, ruleset, path, EXECUTE)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneath(access, fd)
        if libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            _fail(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _fail(call: str) -> None:
    errno = ctypes.get_errno()
    raise OSError(errno, f"{call}: {os.strerror(errno)}")


def interpreter(program: str) -> str | None:
    """The ELF interpreter (dynamic loader) ``program`` needs executed with it ("" for a
    static binary); None when ``program`` is no ELF file (a script)."""
    import struct

    try:
        with open(program, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[5] not in (1, 2):
                return None
            end = "<" if head[5] == 1 else ">"
            if head[4] == 2:  # 64-bit
                phoff, = struct.unpack_from(end + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
                entry, at = end + "IIQQ", (2, 3)  # p_type, p_flags, p_offset, p_vaddr
                sizes = end + "Q"
                size_at = 32  # p_filesz
            else:
                phoff, = struct.unpack_from(end + "I", head, 28)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
                entry, at = end + "II", (1, 1)  # p_type, p_offset
                sizes = end + "I"
                size_at = 16
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                header = f.read(phentsize)
                fields = struct.unpack_from(entry, header)
                if fields[0] == 3:  # PT_INTERP
                    size, = struct.unpack_from(sizes, header, size_at)
                    f.seek(fields[at[0]] if head[4] == 2 else fields[at[1]])
                    return f.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return ""


def main(argv: list[str]) -> int:
    """confine.py [--write DIR]... [--file PATH]... [--exec PATH]... [--exec-anything]
    -- PROGRAM ARGS...: confine, then become PROGRAM (exit 126 when the kernel refuses,
    saying why: fio never runs unconfined by mistake)."""
    writable: list[str] = []
    files: list[str] = []
    executable: list[str] = []
    exec_anything = False
    args = list(argv)
    if args == ["--abi"]:  # what a host's session asks first
        print(abi())
        return 0
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--exec-anything":
            exec_anything = True
        elif flag in ("--write", "--file", "--exec") and args:
            {"--write": writable, "--file": files, "--exec": executable}[flag].append(args.pop(0))
        else:
            print(f"storbench-confine: unknown argument {flag!r}", file=sys.stderr)
            return 2
    program = args[1:]
    if not program:
        print("storbench-confine: no program after --", file=sys.stderr)
        return 2
    loader = interpreter(program[0])
    if loader is None:  # a script (a stand-in for fio): what it runs cannot be foreseen
        exec_anything = True
    try:
        restrict(writable, files, [*executable, program[0], *([loader] if loader else [])],
                 exec_anything)
    except OSError as exc:
        what = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror or exc
        print(f"storbench-confine: cannot confine {program[0]}: {what}", file=sys.stderr)
        return 126
    try:
        os.execv(program[0], program)
    except OSError as exc:
        print(f"storbench-confine: cannot run {program[0]}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
