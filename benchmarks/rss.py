"""Peak and current RSS of this process, for the benchmark children.

The children run inside the tree measured (`PYTHONPATH` set to it, possibly the
parent commit's worktree), so they cannot import this checkout's `benchmarks`
package: they find this file by its directory, appended to the end of the path.

`peak_mb`: the high-water mark of this program's memory (`VmHWM`, Linux), which
`exec` resets.  `ru_maxrss` is not reset: Linux carries the parent's peak over
into the child, so a child of a parent that grew past it (`bench_bulk --large`
makes the 1M join+count inputs) read the parent's RSS as its own baseline and peak
(a state of 0 MB was printed).  `now_mb`: the RSS now.  `reset_peak`: start the
high-water mark again from the RSS now (Linux: `/proc/self/clear_refs`), so that
a child's peak leaves out what it did before (making its workload).
"""

from __future__ import annotations

import os
import resource


def peak_mb() -> float:
    """The peak RSS so far of this program, in MB (`VmHWM`; else `ru_maxrss`)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def now_mb() -> float:
    """The RSS now (Linux), else the peak so far."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return peak_mb()


def reset_peak() -> bool:
    """Reset `peak_mb` to the RSS now (writing 5 to `/proc/self/clear_refs`);
    False where that is not possible (the peak then stays the program's)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
