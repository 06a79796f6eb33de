# Gaps between WiFi sessions on the Meatballs thesis's walk (seconds): exponential with mean
# 30.4 s (as quantiles, to 0.99), so that with sessions of 67.6 s on average WiFi is in reach
# 69% of the time (seed 000 Table 4.2). Constructed, not measured: docs/traces.md.
0 0
1.6 0.05
3.2 0.10
6.8 0.20
10.8 0.30
15.5 0.40
21.1 0.50
27.8 0.60
36.6 0.70
48.9 0.80
70.0 0.90
91.0 0.95
139.9 0.99
