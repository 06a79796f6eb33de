//! `roam emu plot`: draw an emulator log directory (as Mahimahi's `mm-graph` does): per link,
//! delivered throughput against capacity in each direction, and queueing delay.

use anyhow::{bail, Context, Result};
use roam_core::plot::{Figure, Panel, Series};
use std::collections::BTreeMap;
use std::path::Path;

struct Row {
    t: f64,
    throughput: f64,
    capacity: f64,
    qdelay: f64,
    available: bool,
}

fn read_log(path: &Path) -> Result<Vec<Row>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        if c.len() != 12 {
            bail!(
                "{}:{}: expected 12 columns ({}), found {}",
                path.display(),
                i + 1,
                roam_emu::emulator::LOG_HEADER,
                c.len()
            );
        }
        let num = |j: usize| -> Result<f64> {
            if c[j] == "inf" {
                return Ok(f64::NAN);
            }
            c[j].parse::<f64>().with_context(|| {
                format!(
                    "{}:{}: column {} is not a number: `{}`",
                    path.display(),
                    i + 1,
                    j + 1,
                    c[j]
                )
            })
        };
        rows.push(Row {
            t: num(0)?,
            throughput: num(4)?,
            capacity: num(5)?,
            qdelay: num(6)?,
            available: c[11] == "1",
        });
    }
    Ok(rows)
}

/// Build the figure for a log directory.
pub fn figure(dir: &Path) -> Result<Figure> {
    let mut logs: BTreeMap<String, BTreeMap<String, Vec<Row>>> = BTreeMap::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if let Some(stem) = name.strip_suffix(".csv") {
            if let Some((link, d)) = stem.rsplit_once('.') {
                if d == "up" || d == "down" {
                    logs.entry(link.to_string())
                        .or_default()
                        .insert(d.to_string(), read_log(&p)?);
                }
            }
        }
    }
    if logs.is_empty() {
        bail!("{}: no <link>.<up|down>.csv logs found", dir.display());
    }
    let mut panels = Vec::new();
    for (link, dirs) in &logs {
        let mut series = Vec::new();
        let mut qseries = Vec::new();
        let mut bands: Vec<(f64, f64)> = Vec::new();
        for (d, rows) in dirs.iter().rev() {
            series.push(Series {
                name: format!("{d} delivered"),
                points: rows.iter().map(|r| (r.t, r.throughput)).collect(),
            });
            if rows.iter().any(|r| r.capacity.is_finite()) {
                series.push(Series {
                    name: format!("{d} capacity"),
                    points: rows
                        .iter()
                        .filter(|r| r.capacity.is_finite())
                        .map(|r| (r.t, r.capacity))
                        .collect(),
                });
            }
            qseries.push(Series {
                name: format!("{d} queueing"),
                points: rows.iter().map(|r| (r.t, r.qdelay)).collect(),
            });
            if d == "down" {
                let w = rows.get(1).map_or(0.1, |r| r.t - rows[0].t);
                for r in rows.iter().filter(|r| r.available) {
                    match bands.last_mut() {
                        Some((_, b)) if (*b - r.t).abs() < w / 2.0 => *b = r.t + w,
                        _ => bands.push((r.t, r.t + w)),
                    }
                }
            }
        }
        panels.push(Panel {
            title: format!("{link}: throughput"),
            y_label: "Mbit/s".into(),
            series,
            bands: bands.clone(),
            band_label: Some("available".into()),
        });
        panels.push(Panel {
            title: format!("{link}: queueing delay (mean per interval)"),
            y_label: "ms".into(),
            series: qseries,
            bands,
            band_label: None,
        });
    }
    Ok(Figure {
        title: format!("roam emu log {}", dir.display()),
        x_label: "time (s)".into(),
        panels,
    })
}
