"""How a trace that does not end when asked is judged (execute/layers.LayerTrace):
beside two lanes of tests, bpftrace once had not exited 30 s after SIGINT, and the run
kept no explanation. Its maps printed whole (the program's end mark after them) are
what it measured, however it ended after; without the mark, nothing is kept and the
run says why. The process here is a named stand-in for a bpftrace that does not end (a
fault this machine cannot cause on purpose): a shell that prints what bpftrace's END
prints, then ignores SIGINT."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from storbench.execute import layers
from storbench.execute.layers import LayerTrace, program


def stuck_trace(tmp_path: Path, printed: str, token: str) -> LayerTrace:
    """A LayerTrace whose process prints ``printed`` and then never ends on SIGINT."""
    trace = object.__new__(LayerTrace)  # (its __enter__ starts the real bpftrace)
    trace.slice_ns, trace.error, trace.slices = layers.MIN_SLICE_NS, None, None
    trace._sampler, trace.counted = None, None  # (no cap: nothing counted)
    trace._token, trace._out, trace._err = token, tmp_path / "out", tmp_path / "err"
    trace._err.write_text("")
    (tmp_path / "printed").write_text(printed)
    trace._proc = subprocess.Popen(
        ["sh", "-c", 'trap "" INT; cat "$1" > "$2"; exec sleep 600', "sh",
         str(tmp_path / "printed"), str(trace._out)], start_new_session=True)
    return trace


@pytest.mark.parametrize("whole", [True, False])
def test_a_trace_killed_after_its_maps_keeps_them(tmp_path, monkeypatch, whole):
    monkeypatch.setattr(layers, "STOP_S", 1.0)
    token = "0123456789abcdef"
    maps = "@h[3, 11, 40]: 7\n@h[3, 12, 41]: 2\n"
    trace = stuck_trace(tmp_path, f"{token} B 1\n{maps}" + (f"{token} E\n" if whole else ""),
                        token)
    time.sleep(0.3)  # it has printed
    proc = trace._proc
    trace.__exit__(None, None, None)
    assert proc is not None and proc.returncode == -signal.SIGKILL  # it was killed
    if whole:
        assert trace.error is None and trace.slices is not None
        assert trace.slices.hist == {(3, 11): {40: 7}, (3, 12): {41: 2}}
    else:
        assert trace.slices is None
        assert trace.error is not None and trace.error.startswith(
            "bpftrace did not end within 1 s of being asked to (its maps not printed whole)")


def test_the_program_marks_its_end_after_every_map():
    """The end mark is the last thing END prints (after each print of a map)."""
    from storbench.execute.beneath import Place

    text = program("feedbeef00000000", [1], Place("tmpfs", None), "x86_64",
                   layers.MIN_SLICE_NS)
    end = next(line for line in text.splitlines() if line.startswith("END "))
    assert end.rindex('printf("feedbeef00000000 E\\n")') > end.rindex("print(@h)")
