#!/usr/bin/env python3
"""Where a file-system replay's time went: sum the reads that waited, by burst size.

Reads the `fs-waits.csv` a lab trial writes into its log directory (`roam lab in-paper
--apps fs --emu-logs DIR`; one subdirectory per trial). For each trial directory given:
reads that waited, grouped by how many blocks they fetched on demand at once (0: waiting for
a prefetch already asked for), with their count, total and median wait. Then two lower
bounds on the waits of reads that fetched on demand, from the link parameters alone (no
background traffic, no TCP dynamics, replies of BLOCK bytes):

- two links: the request goes one way over the lower-latency link; the burst's replies are
  split between the links so that the last arrives soonest;
- one aggregated link: the sum of the bandwidths at the lower latency (the paper's idealized
  aggregation).

Then, where the trial logged `at_s` (the wait's start on the emulator's clock) and the
emulator's per-link logs are beside it, every burst of 25+ blocks with each link's state
then: available or not, and the bytes it delivered downstream during the wait against its
capacity, with the deepest queue delay (whether the burst met an outage, or a queue).

Usage: fs-waits.py [--links RATE_MBIT:RTT_MS,RATE_MBIT:RTT_MS] TRIAL_DIR...
(default links: the crowded hotspot, 0.6 Mbit/s at 20 ms and 2.0 Mbit/s at 400 ms)
"""
import csv
import os
import sys

BLOCK = 4096 + 21  # a block and the reply's header


def parse_links(text):
    links = []
    for part in text.split(","):
        try:
            rate, rtt = part.split(":")
            links.append((float(rate) * 1e6 / 8, float(rtt) / 1e3))
        except ValueError:
            sys.exit(f"fs-waits.py: --links: `{part}` is not RATE_MBIT:RTT_MS")
    if len(links) != 2:
        sys.exit("fs-waits.py: --links takes exactly two links")
    return links


def two_link_bound(n, links):
    (ra, ta), (rb, tb) = sorted(links, key=lambda l: l[1])
    best = float("inf")
    for k in range(n + 1):  # k replies over the lower-latency link
        a = ta / 2 + k * BLOCK / ra if k else 0
        b = tb / 2 + (n - k) * BLOCK / rb if n - k else 0
        best = min(best, max(a, b))
    return ta / 2 + best


def aggregated_bound(n, links):
    rate = sum(r for r, _ in links)
    rtt = min(t for _, t in links)
    return rtt + n * BLOCK / rate


def group(demanded):
    if demanded == 0:
        return "0 (prefetch)"
    if demanded == 1:
        return "1"
    if demanded <= 8:
        return "2-8"
    if demanded <= 24:
        return "9-24"
    return "25+"


def link_log(d, name):
    """(t_s, delivered bytes, capacity bytes in the bin, max queue delay ms, available)
    per logged bin of `name.down.csv` in `d`, or None without one."""
    path = os.path.join(d, f"{name}.down.csv")
    if not os.path.exists(path):
        return None
    out = []
    with open(path, newline="") as f:
        for line, r in enumerate(csv.DictReader(f), start=2):
            try:
                out.append((
                    float(r["t_s"]),
                    int(r["delivered_bytes"]),
                    float(r["capacity_mbit"]) * 1e6 / 8 * 0.1,
                    float(r["queue_delay_max_ms"]),
                    int(r["available"]),
                ))
            except (KeyError, TypeError, ValueError):
                sys.exit(f"fs-waits.py: {path}:{line}: not a link log row")
    return out


def print_bursts(d, rows):
    logs = {n: link_log(d, n) for n in ("wifi", "cell", "link")}
    logs = {n: v for n, v in logs.items() if v}
    if not logs or not rows or "at_s" not in rows[0]:
        return
    print("  bursts of 25+ blocks (at_s, blocks, wait) and each link downstream meanwhile:")
    for r in rows:
        if int(r["demanded"]) < 25:
            continue
        at, waited = float(r["at_s"]), float(r["waited_ms"]) / 1e3
        parts = []
        for name, bins in logs.items():
            before = [b for b in bins if b[0] <= at]
            up = before[-1][4] if before else "?"
            during = [b for b in bins if at <= b[0] < at + waited + 0.1]
            got = sum(b[1] for b in during) // 1000
            cap = int(sum(b[2] for b in during)) // 1000
            q = max((b[3] for b in during), default=0)
            state = {1: "up", 0: "out"}.get(up, "?")
            parts.append(f"{name} {state} {got}/{cap} KB q{q:.0f} ms")
        print(f"  {at:8.2f} s {r['demanded']:>4} {waited:6.2f} s | " + " | ".join(parts))


def main(argv):
    links = parse_links("0.6:20,2.0:400")
    dirs = []
    i = 0
    while i < len(argv):
        if argv[i] == "--links":
            if i + 1 >= len(argv):
                sys.exit("fs-waits.py: --links needs a value")
            links = parse_links(argv[i + 1])
            i += 2
        else:
            dirs.append(argv[i])
            i += 1
    if not dirs:
        sys.exit(__doc__)
    for d in dirs:
        path = os.path.join(d, "fs-waits.csv")
        try:
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
        except OSError as e:
            sys.exit(f"fs-waits.py: {path}: {e.strerror}")
        groups = {}
        two = agg = demand_total = 0.0
        for line, r in enumerate(rows, start=2):
            try:
                demanded, waited = int(r["demanded"]), float(r["waited_ms"]) / 1e3
            except (KeyError, TypeError, ValueError):
                sys.exit(f"fs-waits.py: {path}:{line}: expected demanded and waited_ms")
            groups.setdefault(group(demanded), []).append(waited)
            if demanded:
                demand_total += waited
                two += two_link_bound(demanded, links)
                agg += aggregated_bound(demanded, links)
        print(f"{d}: {len(rows)} reads waited, {sum(sum(v) for v in groups.values()):.1f} s")
        print("  demand burst (blocks) | reads | total s | median ms")
        order = ["0 (prefetch)", "1", "2-8", "9-24", "25+"]
        for g in [g for g in order if g in groups]:
            v = sorted(groups[g])
            print(f"  {g:>21} | {len(v):5} | {sum(v):7.1f} | {v[len(v) // 2] * 1e3:9.0f}")
        print(
            f"  reads with demand fetches: waited {demand_total:.1f} s; lower bound over the "
            f"two links {two:.1f} s, over one aggregated link {agg:.1f} s"
        )
        print_bursts(d, rows)


if __name__ == "__main__":
    main(sys.argv[1:])
