# Gaps between WiFi sessions on the Meatballs thesis's walk (seconds): exponential with mean
# 25 s (as quantiles, to 0.99), so that with sessions of 56 s on average WiFi is in reach
# 56 / (56 + 25) = 69% of the time, as in seed 000 §4.4.2. Constructed, not measured:
# docs/traces.md.
0 0
1.3 0.05
2.6 0.10
5.6 0.20
8.9 0.30
12.8 0.40
17.3 0.50
22.9 0.60
30.1 0.70
40.2 0.80
57.6 0.90
74.9 0.95
115.1 0.99
