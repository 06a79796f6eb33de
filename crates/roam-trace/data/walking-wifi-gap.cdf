# Gaps between WiFi sessions while walking (seconds): exponential with mean 255 s (as
# quantiles, to 0.99), so that with sessions of 56 s on average WiFi is in reach 18% of the
# time, as in the IMP thesis's walking trace (seed 000 §3.5). Constructed, not measured:
# docs/traces.md.
0 0
13.1 0.05
26.9 0.10
56.9 0.20
91.0 0.30
130.3 0.40
176.8 0.50
233.7 0.60
307.1 0.70
410.6 0.80
587.4 0.90
764.2 0.95
1174.8 0.99
