# WiFi sessions while walking (seconds a usable access point stays in reach): uniform from
# 13 s to 99 s, so the median is 56 s and the longest 99 s, the statistics the IMP thesis gives
# for its walking trace (seed 000 §3.5; the trace itself is not available). Constructed, not
# measured: docs/traces.md.
13 0
99 1
