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


if __name__ == "__main__":
    main(sys.argv[1:])
