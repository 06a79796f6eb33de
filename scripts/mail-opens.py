#!/usr/bin/env python3
"""Where mail's on-demand time went: the user's opens, per system.

Reads the `mail-opens.csv` a lab trial writes into its log directory (`roam lab in-paper
--apps mail --emu-logs DIR`; one subdirectory per trial, named
`mail-<scenario>-<system>-<trial>`). Per trial: the mean wait of the 5 opens (the report's
`ondemand_ms`), how many came from the network and their mean wait. Per system: the median of
the trial means, and the median and mean wait over every open fetched from the network.

The user opens one message after another, so a slow answer lets the prefetch cache more of
the later picks: the mean of 5 then averages in more near-zero waits, and compares systems
less sharply than the fetches themselves do.

Usage: mail-opens.py TRIAL_DIR...
"""
import csv
import os
import statistics
import sys

SYSTEMS = ["roam", "mptcp", "aggregation", "best-latency", "best-bandwidth"]

def read(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        return [(r["from_network"] == "1", float(r["ms"])) for r in rows]
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"mail-opens.py: {path}: {e}")


def main(dirs):
    if not dirs:
        sys.exit(__doc__.strip().splitlines()[-1])
    systems = {}
    for d in sorted(dirs):
        name = os.path.basename(os.path.normpath(d))
        stem = name.rsplit("-", 1)[0]  # without the trial number
        system = next((x for x in SYSTEMS if stem.endswith("-" + x)), stem)
        opens = read(os.path.join(d, "mail-opens.csv"))
        if not opens:
            print(f"{name}: no opens (the mailbox was never listed)")
            continue
        waits = [ms for _, ms in opens]
        net = [ms for fetched, ms in opens if fetched]
        s = systems.setdefault(system, ([], []))
        s[0].append(statistics.mean(waits))
        s[1].extend(net)
        net_text = f", mean {statistics.mean(net):.0f} ms" if net else ""
        print(
            f"{name}: mean of {len(waits)} opens {statistics.mean(waits):.0f} ms; "
            f"{len(net)} from the network{net_text}"
        )
    for system, (means, net) in systems.items():
        net_text = (
            f"median {statistics.median(net):.0f} ms, mean {statistics.mean(net):.0f} ms"
            if net
            else "none"
        )
        print(
            f"{system}: median of trial means {statistics.median(means):.0f} ms; "
            f"{len(net)} opens from the network: {net_text}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
