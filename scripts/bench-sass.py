#!/usr/bin/env python3
"""SASS benchmarks: fencelint side by side with `wc -l` and with NVIDIA's disassembler.

Usage:
  scripts/bench-sass.py listing [--runs N] FILE...
      `fencelint check FILE` (SASS text or JSON already on disk) against `wc -l FILE`,
      alternating, N runs each (default 5): medians, the ratio fencelint/wc, throughput and
      fencelint's peak resident set (the kernel's, from `wait4`).
      `--cache cold` empties the page cache before each run of either command, so both read
      the file from the disk (root only); `--cache both` prints a warm and a cold row.
  scripts/bench-sass.py disassemble [--format cuobjdump|nvdisasm|json] --out FILE CUBIN...
      Writes the listing of the cubins to FILE (to have a large listing to measure).
  scripts/bench-sass.py library [--arch sm_90] [--runs N] LIB
      `fencelint check LIB --arch sm_90` against
      `cuobjdump -sass --gpu-architecture sm_90 LIB > /dev/null`, alternating, N runs each
      (default 1; each run takes minutes): medians, the ratio fencelint/cuobjdump, and the
      peak resident set of fencelint itself and of the largest disassembler process.

Environment: FENCELINT (default target/release/fencelint, built when missing),
FENCELINT_CUDA_BIN (the folder with cuobjdump and nvdisasm; default: PATH).
The load average is printed with every result: these machines are noisy.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fencelint_binary():
    path = os.environ.get("FENCELINT") or os.path.join(REPO, "target/release/fencelint")
    if not os.path.exists(path):
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "fencelint-cli"], cwd=REPO, check=True)
    return path


def tool(name):
    folder = os.environ.get("FENCELINT_CUDA_BIN")
    path = os.path.join(folder, name) if folder else shutil.which(name)
    if not path or not os.path.exists(path):
        sys.exit(f"bench-sass: `{name}` not found; set FENCELINT_CUDA_BIN")
    return path


def tree_hwm(root_pid):
    """Peak resident set (kB) of `root_pid` and of its largest descendant, from /proc."""
    own, largest = 0, 0
    try:
        with open(f"/proc/{root_pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    own = int(line.split()[1])
        children = []
        for task in os.listdir(f"/proc/{root_pid}/task"):
            with open(f"/proc/{root_pid}/task/{task}/children") as f:
                children += [int(p) for p in f.read().split()]
        for child in children:
            c_own, c_largest = tree_hwm(child)
            largest = max(largest, c_own, c_largest)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return own, largest


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """CPU seconds of `pid` itself (all its threads) and of its children it has waited for."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Fields 14-17 of stat(5): utime stime cutime cstime; [0] here is field 3.
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def run(cmd, stdout=subprocess.DEVNULL, ok=(0,), cpu=None, exact=False):
    """Wall time and peak memory (own, largest child) of one run, sampled from /proc. With
    `exact`, for a command that starts no other process, the own peak is the kernel's (from
    `wait4`), not sampled. With `cpu` (a list), appends the CPU seconds of the process itself
    and of its tools, as last sampled."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    peak = [0, 0]
    last_cpu = [None]
    done = threading.Event()

    def sample():
        while not done.is_set():
            own, child = tree_hwm(proc.pid)
            peak[0], peak[1] = max(peak[0], own), max(peak[1], child)
            last_cpu[0] = cpu_seconds(proc.pid) or last_cpu[0]
            done.wait(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    stderr = proc.stderr.read()
    # Reaped here, not by `communicate`, for the kernel's own peak: a high-water mark sampled
    # every 50 ms missed a rise of 600 MB in the last milliseconds of a run. It is the peak of
    # the process or of any child it waited for, whichever is larger.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode not in ok:
        sys.exit(f"bench-sass: {cmd[0]} exited {proc.returncode}: {stderr.decode()[-600:]}")
    if cpu is not None and last_cpu[0] is not None:
        cpu.append(last_cpu[0])
    return wall, max(peak[0], usage.ru_maxrss if exact else 0), peak[1]


def load():
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


DROP_CACHES = "/proc/sys/vm/drop_caches"


def drop_page_cache():
    """Empties the kernel's page cache, so that the next run reads the file from the disk."""
    os.sync()
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as err:
        sys.exit(f"bench-sass: --cache cold needs to write {DROP_CACHES} (run as root): {err}")


def listing(args):
    fencelint = fencelint_binary()
    print(f"cores {os.cpu_count()}, fencelint {fencelint}")
    print(f"{'file':<40} {'cache':>5} {'MB':>7} {'wc -l s':>8} {'fencelint s':>12} {'ratio':>6} {'MB/s':>7} {'peak MB':>8} {'load':>14}")
    caches = ["warm", "cold"] if args.cache == "both" else [args.cache]
    for path in args.files:
        size = os.path.getsize(path) / 1e6
        for cache in caches:
            wc, lint, peak = [], [], 0
            for _ in range(args.runs):
                # Warm: the file is in the page cache (the runs before read it). Cold: every
                # run starts from an empty cache and reads the file from the disk.
                if cache == "cold":
                    drop_page_cache()
                wc.append(run(["wc", "-l", path])[0])
                if cache == "cold":
                    drop_page_cache()
                wall, own, _ = run([fencelint, "check", "--quiet", "--format", "short", path], ok=(0, 1), exact=True)
                lint.append(wall)
                peak = max(peak, own)
            w, f = statistics.median(wc), statistics.median(lint)
            print(f"{os.path.basename(path):<40} {cache:>5} {size:>7.0f} {w:>8.2f} {f:>12.2f} {f / w:>6.2f} {size / f:>7.0f} {peak / 1024:>8.0f} {load():>14}")


def disassemble(args):
    with open(args.out, "wb") as out:
        for cubin in args.cubins:
            if args.format == "cuobjdump":
                cmd = [tool("cuobjdump"), "-sass", cubin]
            elif args.format == "nvdisasm":
                cmd = [tool("nvdisasm"), "-c", "-g", cubin]
            else:
                cmd = [tool("nvdisasm"), "-json", "-c", cubin]
            subprocess.run(cmd, stdout=out, check=True)
    print(f"{args.out}: {os.path.getsize(args.out) / 1e6:.0f} MB")


def library(args):
    fencelint = fencelint_binary()
    cuobjdump = tool("cuobjdump")
    print(f"cores {os.cpu_count()}, fencelint {fencelint}, {cuobjdump}")
    reference, lint, own_peak, tool_peak = [], [], 0, 0
    for _ in range(args.runs):
        cpu = []
        reference.append(run([cuobjdump, "-sass", "--gpu-architecture", args.arch, args.lib], cpu=cpu)[0])
        cpu_note = f", CPU {sum(cpu[0]):.1f} s" if cpu else ""
        print(f"  cuobjdump: {reference[-1]:.1f} s{cpu_note} (load {load()})", flush=True)
        cpu = []
        wall, own, child = run(
            [fencelint, "check", "--quiet", "--format", "short", "--tool-timeout", "7200",
             "--arch", args.arch, args.lib],
            ok=(0, 1),
            cpu=cpu,
        )
        lint.append(wall)
        own_peak, tool_peak = max(own_peak, own), max(tool_peak, child)
        # Sampled every 50 ms: the last sample misses at most the final moments of the run.
        cpu_note = f", CPU {cpu[0][0]:.1f} s fencelint + {cpu[0][1]:.1f} s tools" if cpu else ""
        print(f"  fencelint: {wall:.1f} s{cpu_note} (load {load()})", flush=True)
    r, f = statistics.median(reference), statistics.median(lint)
    print(f"cuobjdump -sass {r:.1f} s, fencelint check {f:.1f} s, ratio {f / r:.2f}; "
          f"fencelint peak {own_peak / 1024:.0f} MB, largest tool process {tool_peak / 1024:.0f} MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("listing")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--cache", choices=["warm", "cold", "both"], default="warm",
                   help="cold empties the page cache before every run (root only)")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=listing)
    p = sub.add_parser("disassemble")
    p.add_argument("--format", choices=["cuobjdump", "nvdisasm", "json"], default="cuobjdump")
    p.add_argument("--out", required=True)
    p.add_argument("cubins", nargs="+")
    p.set_defaults(func=disassemble)
    p = sub.add_parser("library")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("lib")
    p.set_defaults(func=library)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
