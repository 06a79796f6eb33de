#!/usr/bin/env python3
"""Turn an `strace -f -ttt -y` log of a build into roam's file-system trace (format v1).

Only files under BUILD_DIR count (the build tree, which BlueFS would hold; system headers and
compilers stay on the local disk). Reads and writes of one file that continue where the last
one ended within 50 ms are merged. Output on stdout:

    # comment lines
    F <id> <size> <path relative to BUILD_DIR>
    O <t_ms> <R|W> <id> <offset> <length>

Recorded with (see docs/lab.md):
    strace -f -qq -ttt -y -s 0 -e signal=none \
      -e trace=openat,read,write,pread64,pwrite64 -o build.strace \
      sh -c './configure ... && make -j2'
"""
import re
import sys

if len(sys.argv) != 3:
    sys.exit("usage: fs-trace-from-strace.py BUILD_DIR STRACE_LOG")
root = sys.argv[1].rstrip("/") + "/"
line_re = re.compile(
    r"^(\d+)\s+(\d+\.\d+)\s+(openat|read|write|pread64|pwrite64)\((.*)\)\s+=\s+(-?\d+)(<[^>]*>)?")
fd_re = re.compile(r"^(\d+)<([^>]*)>")

pos = {}        # (pid, fd) -> offset
files = {}      # path -> id
sizes = {}      # id -> size
ops = []        # [t_ms, kind, id, off, len, last_t]
t0 = None
bad = 0
for n, line in enumerate(open(sys.argv[2], errors="replace"), 1):
    m = line_re.match(line)
    if not m:
        continue
    pid, t, call, args, ret, retpath = m.groups()
    t = float(t)
    ret = int(ret)
    if t0 is None:
        t0 = t
    if call == "openat":
        if ret >= 0 and retpath:
            path = retpath[1:-1]
            trunc = "O_TRUNC" in args
            append = "O_APPEND" in args
            if path.startswith(root):
                fid = files.setdefault(path, len(files) + 1)
                if trunc:
                    sizes[fid] = 0
                pos[(pid, ret)] = sizes.get(fid, 0) if append else 0
        continue
    f = fd_re.match(args)
    if not f or ret <= 0:
        continue
    fd, path = int(f.group(1)), f.group(2)
    if not path.startswith(root):
        continue
    fid = files.setdefault(path, len(files) + 1)
    if call in ("pread64", "pwrite64"):
        try:
            off = int(args.rsplit(",", 1)[1])
        except ValueError:
            bad += 1
            continue
    else:
        off = pos.get((pid, fd), 0)
        pos[(pid, fd)] = off + ret
    kind = "R" if call in ("read", "pread64") else "W"
    tms = (t - t0) * 1000.0
    sizes[fid] = max(sizes.get(fid, 0), off + ret)
    last = ops[-1] if ops else None
    if last and last[1] == kind and last[2] == fid and last[3] + last[4] == off \
            and tms - last[5] <= 50:
        last[4] += ret
        last[5] = tms
    else:
        ops.append([tms, kind, fid, off, ret, tms])

print("# roam fs trace v1")
print(f"# source: strace of a cold-cache build; {len(files)} files, {len(ops)} operations")
print(f"# read bytes {sum(o[4] for o in ops if o[1] == 'R')}, "
      f"written bytes {sum(o[4] for o in ops if o[1] == 'W')}")
for path, fid in sorted(files.items(), key=lambda x: x[1]):
    rel = path[len(root):].replace(" ", "_") or "."
    print(f"F {fid} {sizes.get(fid, 0)} {rel}")
for o in ops:
    print(f"O {int(o[0])} {o[1]} {o[2]} {o[3]} {o[4]}")
if bad:
    print(f"warning: {bad} lines not understood", file=sys.stderr)
