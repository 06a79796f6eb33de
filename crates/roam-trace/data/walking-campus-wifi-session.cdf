# WiFi session lengths on the Meatballs thesis's walk (seconds): median 41 s, longest 5 min
# (seed 000 Table 4.2), as quantiles between which lengths are uniform; constructed, not
# measured: docs/traces.md.
3 0.00
9 0.10
20 0.25
41 0.50
90 0.75
160 0.90
240 0.97
300 1.00
