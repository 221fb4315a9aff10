"""``python -I -S bench/rsswrap.py OUTFILE CMD...``: run CMD, forward SIGINT/SIGTERM to it,
and write its peak RSS (KiB, ``ru_maxrss`` from ``wait4``) to OUTFILE; exit with its status.

Why a wrapper: Linux records the RSS high-water mark of the address space a process had
before ``exec`` into its ``ru_maxrss``, and Python's subprocess module spawns with vfork, so
a child started directly from the (large) benchmark process would report the benchmark's
own peak.  This wrapper is a bare interpreter (a few MB), so the figure is the child's own.
"""

import os
import signal
import sys


def main() -> int:
    out, cmd = sys.argv[1], sys.argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)

    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    while True:
        try:
            _, status, ru = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    with open(out, "w") as fh:
        fh.write(f"{ru.ru_maxrss}\n")
    return os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8


if __name__ == "__main__":
    sys.exit(main())
