"""`neighbours --isolate LIMITS`: the limits a cgroup of their own holds the aggressors
to, named as cgroup v2's io.max and io.weight name them; and the cgroup's name, which
only storbench may give fio (workload/guard.py lets no user's job file name a cgroup).
execute/isolation.py makes the cgroup."""

from __future__ import annotations

import re
from dataclasses import dataclass

from storbench.errors import ConfigError
from storbench.workload.sizes import format_bytes_iec, parse_size

_KEY = re.compile(r"^(riops|wiops|rbps|wbps|weight)=(\S+)$")
CGROUP_PREFIX = "storbench-aggressors-"
# fio's cgroup= as storbench writes it: beneath storbench's own cgroup, its leaf ours
OWN_CGROUP = re.compile(r"(?:[A-Za-z0-9_@-][A-Za-z0-9._@-]*/)*"
                        + CGROUP_PREFIX + r"[0-9a-f]{8}")


@dataclass(frozen=True)
class Limits:
    """What --isolate asks, as io.max's keys: (key, value) in the order given."""

    text: str
    values: tuple[tuple[str, int], ...]

    @classmethod
    def parse(cls, text: str) -> Limits:
        """``wbps=20M riops=500`` (spaces or commas between); ConfigError naming the fault."""
        values: dict[str, int] = {}
        for word in text.replace(",", " ").split():
            m = _KEY.match(word)
            if m is None:
                raise ConfigError(f"--isolate {text!r}: {word!r} is not KEY=VALUE of riops,"
                                  " wiops (I/Os a second), rbps, wbps (bytes a second: 20M)"
                                  " or weight (1 to 1000), as cgroup v2's io.max and"
                                  " io.weight name them")
            key, raw = m.groups()
            number = parse_size(raw) if key.endswith("bps") else (
                int(raw) if raw.isdigit() else None)
            if number is None or number < 1:
                raise ConfigError(f"--isolate {text!r}: {key}={raw} is not a positive"
                                  + (" size a second (20M, 1.5G)" if key.endswith("bps")
                                     else " whole number"))
            if key == "weight" and number > 1000:
                raise ConfigError(f"--isolate {text!r}: weight is 1 to 1000 (BFQ's), not"
                                  f" {number}")
            if key in values:
                raise ConfigError(f"--isolate {text!r}: {key} given twice")
            values[key] = number
        if not values:
            raise ConfigError("--isolate: give at least one limit (e.g. wbps=20M)")
        return cls(text, tuple(values.items()))

    @property
    def keys(self) -> list[str]:
        return [k for k, _ in self.values]

    def words(self) -> str:
        """The limits in words: 'writes at 20.0 MiB/s, 500 read IOPS, weight 10'."""
        said = {"riops": lambda v: f"{v:,} read IOPS", "wiops": lambda v: f"{v:,} write IOPS",
                "rbps": lambda v: f"reads at {format_bytes_iec(v)}/s",
                "wbps": lambda v: f"writes at {format_bytes_iec(v)}/s",
                "weight": lambda v: f"weight {v} (of 100 for the victims)"}
        return ", ".join(said[k](v) for k, v in self.values)
