#!/usr/bin/env python3
"""Turn an `strace -f -ttt -y` log of a build into roam's file-system trace (format v2).

Only files under BUILD_DIR count (the build tree, which BlueFS would hold; system headers and
compilers stay on the local disk). Reads and writes of one file that continue where the last
one ended within 50 ms are merged. SOURCE_LIST is `tar tf` of the source tarball (its first
path component, the top directory, is dropped): the files that exist before the build. Output
on stdout:

    # comment lines
    F <id> <size> <path relative to BUILD_DIR>
    C <t_ms> <id>
    O <t_ms> <R|W> <id> <offset> <length>

`C` marks the moment file <id> becomes the client's own: the build creates it (it is not in
SOURCE_LIST; marked where it first appears) or truncates it (`O_TRUNC`). From then on its
contents are what the build wrote, so a client cache holds them and never fetches them. (The
offsets of reads and writes are those the converter can follow; `lseek` is not traced, so in a
file the linker writes, reads and writes at the offsets it jumps to are recorded in sequence.)

Recorded with (see docs/lab.md):
    strace -f -qq -ttt -y -s 0 -e signal=none \
      -e trace=openat,read,write,pread64,pwrite64 -o build.strace \
      sh -c './configure ... && make -j2'
"""
import re
import sys

if len(sys.argv) != 4:
    sys.exit("usage: fs-trace-from-strace.py BUILD_DIR STRACE_LOG SOURCE_LIST")
root = sys.argv[1].rstrip("/") + "/"
sources = set()
for entry in open(sys.argv[3]):
    rel = entry.strip().split("/", 1)[1] if "/" in entry.strip() else ""
    if rel and not rel.endswith("/"):
        sources.add(rel)
if not sources:
    sys.exit(f"{sys.argv[3]}: no files listed (expected the output of `tar tf` of the sources)")
line_re = re.compile(
    r"^(\d+)\s+(\d+\.\d+)\s+(openat|read|write|pread64|pwrite64)\((.*)\)\s+=\s+(-?\d+)(<[^>]*>)?")
fd_re = re.compile(r"^(\d+)<([^>]*)>")

pos = {}        # (pid, fd) -> offset
files = {}      # path -> id
sizes = {}      # id -> size
ops = []        # [t_ms, kind, id, off, len, last_t]; kind "C" has no offset or length
last_io = None  # the latest R or W entry of ops (what a read or write may continue)
local = set()   # ids of files the build created or truncated
t0 = None
bad = 0


def make_local(fid, tms):
    """From `tms` on, file `fid` holds only what the build wrote (see `C` above)."""
    if fid not in local:
        local.add(fid)
        ops.append([tms, "C", fid, 0, 0, tms])


def file_id(path, tms):
    fid = files.setdefault(path, len(files) + 1)
    if path[len(root):] not in sources:
        make_local(fid, tms)
    return fid


for n, line in enumerate(open(sys.argv[2], errors="replace"), 1):
    m = line_re.match(line)
    if not m:
        continue
    pid, t, call, args, ret, retpath = m.groups()
    t = float(t)
    ret = int(ret)
    if t0 is None:
        t0 = t
    tms = (t - t0) * 1000.0
    if call == "openat":
        if ret >= 0 and retpath:
            path = retpath[1:-1]
            trunc = "O_TRUNC" in args
            append = "O_APPEND" in args
            if path.startswith(root):
                fid = file_id(path, tms)
                if trunc:
                    sizes[fid] = 0
                    make_local(fid, tms)
                pos[(pid, ret)] = sizes.get(fid, 0) if append else 0
        continue
    f = fd_re.match(args)
    if not f or ret <= 0:
        continue
    fd, path = int(f.group(1)), f.group(2)
    if not path.startswith(root):
        continue
    fid = file_id(path, tms)
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
    sizes[fid] = max(sizes.get(fid, 0), off + ret)
    last = last_io
    if last and last[1] == kind and last[2] == fid and last[3] + last[4] == off \
            and tms - last[5] <= 50:
        last[4] += ret
        last[5] = tms
    else:
        last_io = [tms, kind, fid, off, ret, tms]
        ops.append(last_io)

print("# roam fs trace v2")
print(f"# source: strace of a cold-cache build; {len(files)} files, {len(ops)} operations")
print(f"# read bytes {sum(o[4] for o in ops if o[1] == 'R')}, "
      f"written bytes {sum(o[4] for o in ops if o[1] == 'W')}")
print(f"# created or truncated by the build: {len(local)} files; read bytes of them "
      f"{sum(o[4] for o in ops if o[1] == 'R' and o[2] in local)} (upper bound: counted "
      f"whether read before or after the file became the client's)")
for path, fid in sorted(files.items(), key=lambda x: x[1]):
    rel = path[len(root):].replace(" ", "_") or "."
    print(f"F {fid} {sizes.get(fid, 0)} {rel}")
for o in ops:
    if o[1] == "C":
        print(f"C {int(o[0])} {o[2]}")
    else:
        print(f"O {int(o[0])} {o[1]} {o[2]} {o[3]} {o[4]}")
if bad:
    print(f"warning: {bad} lines not understood", file=sys.stderr)
