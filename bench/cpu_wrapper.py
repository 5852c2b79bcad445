"""Run storbench in this process and write its own CPU seconds (not fio's) to $CPU_OUT."""

import os
import resource
import sys

from storbench.cli import main

try:
    main(sys.argv[1:])
finally:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["CPU_OUT"], "w") as f:
        f.write(f"{ru.ru_utime + ru.ru_stime}\n")
