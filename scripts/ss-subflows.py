#!/usr/bin/env python3
"""Follow TCP subflows and MPTCP sockets through samples written by scripts/ss-sample.sh.

Usage: scripts/ss-subflows.py SAMPLES [--since T0|TRIAL_LOG_DIR] [--from S] [--to S]
                                      [--ns NAMESPACE] [--port PORT]

Prints, per sample, each socket's addresses with the fields that tell a stalled subflow:
the retransmission timeout and its backoff, segments unacknowledged, bytes not yet sent
(`notsent`: data the MPTCP scheduler handed to this subflow that it has not sent), the
congestion window, and ms since the last send and receive; for an MPTCP socket, its data
sequence numbers (write_seq, snd_una, rcv_nxt). Times are seconds since T0: a Unix time, or
a trial's log directory (`--emu-logs DIR/<trial>`), whose summary.json gives the emulator's
time zero (`started_unix_s`), so that the times line up with its per-link logs; default: the
first sample. --ns keeps one namespace (as printed, e.g. net:[4026532522]); --port keeps the
sockets with that port at either end.
"""
import argparse
import json
import os
import re
import sys

FIELDS = ["rto", "backoff", "unacked", "notsent", "cwnd", "lastsnd", "lastrcv"]
MPTCP_FIELDS = ("write_seq", "snd_una", "rcv_nxt", "subflows:")


def samples(path):
    """(unix time, namespace, [(socket line, info line)]) per sample."""
    cur = None
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    for i, line in enumerate(lines):
        if line.startswith("=== "):
            if cur:
                yield cur
            parts = line.split()
            if len(parts) != 3:
                sys.exit(f"{path}:{i + 1}: expected '=== <time> <namespace>', got {line!r}")
            try:
                cur = (float(parts[1]), parts[2], [])
            except ValueError:
                sys.exit(f"{path}:{i + 1}: bad time {parts[1]!r}")
        elif cur and line.startswith(("tcp", "mptcp")):
            info = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith("\t") else ""
            cur[2].append((line, info))
    if cur:
        yield cur


def time_zero(arg):
    """A Unix time, or the `started_unix_s` of a trial log directory's summary.json."""
    try:
        return float(arg)
    except ValueError:
        pass
    path = os.path.join(arg, "summary.json") if os.path.isdir(arg) else arg
    try:
        with open(path) as f:
            return float(json.load(f)["started_unix_s"])
    except OSError as e:
        sys.exit(f"--since {arg}: {path}: {e.strerror}")
    except (ValueError, KeyError, TypeError):
        sys.exit(f"--since {arg}: {path} has no started_unix_s (written by roam since 2026-11-22)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("samples")
    ap.add_argument("--since", type=time_zero, help="t=0: a Unix time or a trial log directory")
    ap.add_argument("--from", dest="t_from", type=float, default=float("-inf"))
    ap.add_argument("--to", dest="t_to", type=float, default=float("inf"))
    ap.add_argument("--ns")
    ap.add_argument("--port")
    a = ap.parse_args()
    t0 = a.since
    for t, ns, socks in samples(a.samples):
        if t0 is None:
            t0 = t
        rel = t - t0
        if not (a.t_from <= rel <= a.t_to) or (a.ns and ns != a.ns):
            continue
        for line, info in socks:
            f = line.split()
            if len(f) < 6:
                continue
            kind, sendq, local, peer = f[0], f[3], f[4], f[5]
            if a.port and not (local.endswith(":" + a.port) or peer.endswith(":" + a.port)):
                continue
            if kind == "mptcp":
                extra = " ".join(x for x in info.split() if x.startswith(MPTCP_FIELDS))
            else:
                vals = []
                for k in FIELDS:
                    m = re.search(r"\b" + k + r":(\S+)", info)
                    if m:
                        vals.append(f"{k}={m.group(1)}")
                extra = f"sendq={sendq} " + " ".join(vals)
            print(f"{rel:8.1f} {ns} {kind:5} {local} -> {peer} {extra}")


if __name__ == "__main__":
    main()
