//! Which seeds were used while developing or tuning what: `docs/results/seeds-used.txt`, kept
//! by hand and compiled in, so that a report's "held out" statement comes from that record of
//! what was done, not from a threshold on the seed's number ([`seeds_line`]).

use std::collections::BTreeSet;

use crate::report::Row;

/// The record, as kept in the repository.
const RECORD: &str = include_str!("../../../../docs/results/seeds-used.txt");

/// One line of the record: seeds `lo..=hi` were used for `what` in `studies` (`*`: all).
#[derive(Debug, PartialEq, Eq)]
struct Use {
    lo: u64,
    hi: u64,
    studies: Vec<String>,
    what: String,
}

impl Use {
    fn concerns(&self, study: &str) -> bool {
        self.studies.iter().any(|s| s == "*" || s == study)
    }
}

/// The record's lines; a malformed line names itself (a test keeps the kept file valid).
fn parse(text: &str) -> Result<Vec<Use>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [seeds, studies, what @ ..] = &words[..] else {
            return Err(format!(
                "seeds-used.txt:{}: expected SEEDS STUDIES WHAT",
                i + 1
            ));
        };
        if what.is_empty() {
            return Err(format!(
                "seeds-used.txt:{}: expected SEEDS STUDIES WHAT",
                i + 1
            ));
        }
        let (seeds, studies, what) = (*seeds, *studies, what.join(" "));
        let (lo, hi) = seeds.split_once('-').unwrap_or((seeds, seeds));
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("seeds-used.txt:{}: `{seeds}` is not SEED or LO-HI", i + 1))
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            return Err(format!(
                "seeds-used.txt:{}: `{seeds}` runs backwards",
                i + 1
            ));
        }
        out.push(Use {
            lo,
            hi,
            studies: studies.split(',').map(String::from).collect(),
            what,
        });
    }
    Ok(out)
}

/// "seed 7" or "seeds 101-105".
fn range(seeds: &BTreeSet<u64>) -> String {
    match (seeds.first(), seeds.last()) {
        (Some(lo), Some(hi)) if lo == hi => format!("seed {lo}"),
        (Some(lo), Some(hi)) if (hi - lo + 1) as usize == seeds.len() => format!("seeds {lo}-{hi}"),
        _ => format!(
            "seeds {}",
            seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Which seeds `rows` used, and whether they were held out of the development of `study`:
/// each line of the record that lists some of them for the study, or that none does.
pub fn seeds_line(study: &str, rows: &[Row]) -> String {
    let seeds: BTreeSet<u64> = rows.iter().map(|r| r.seed).collect();
    if seeds.is_empty() {
        return "No trials.".into();
    }
    let record = parse(RECORD).unwrap_or_default();
    let uses: Vec<String> = record
        .iter()
        .filter(|u| u.concerns(study) && seeds.iter().any(|s| (u.lo..=u.hi).contains(s)))
        .map(|u| {
            let these: BTreeSet<u64> = seeds
                .iter()
                .copied()
                .filter(|s| (u.lo..=u.hi).contains(s))
                .collect();
            format!("{} were used for {}", range(&these), u.what)
        })
        .collect();
    if uses.is_empty() {
        format!(
            "Trials used {} (held out: docs/results/seeds-used.txt lists none of them as used \
             while developing or tuning {study}).",
            range(&seeds)
        )
    } else {
        format!(
            "Trials used {}; not held out of everything (docs/results/seeds-used.txt): {}.",
            range(&seeds),
            uses.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(seeds: &[u64]) -> Vec<Row> {
        seeds
            .iter()
            .map(|&seed| Row {
                app: "a".into(),
                scenario: "s".into(),
                system: "roam".into(),
                trial: 1,
                seed,
                metric: "m".into(),
                value: 1.0,
                unit: String::new(),
            })
            .collect()
    }

    /// The kept record parses, and its statements depend on it, not on the seed's number.
    #[test]
    fn the_record_decides_what_is_held_out() {
        let record = parse(RECORD).unwrap();
        let named = record
            .iter()
            .find(|u| !u.concerns("no-such-study"))
            .expect("the record names a study");
        let study = named.studies[0].clone();
        let line = seeds_line(&study, &rows(&[named.lo]));
        assert!(
            line.contains("not held out") && line.contains(&named.what),
            "{line}"
        );
        // The same seeds, for a study no line names: held out.
        let line = seeds_line("no-such-study", &rows(&[named.lo, named.lo + 2]));
        let (a, b) = (named.lo, named.lo + 2);
        assert!(
            line.starts_with(&format!("Trials used seeds {a}, {b} (held out")),
            "{line}"
        );
        let line = seeds_line("no-such-study", &rows(&[1, 2, 3]));
        assert!(
            line.contains("seeds 1-3 were used for developing"),
            "{line}"
        );
        assert_eq!(seeds_line("x", &[]), "No trials.");
        assert!(parse("1-x * what").unwrap_err().contains(":1:"));
        assert!(parse("5-1 * what").unwrap_err().contains("backwards"));
        assert!(parse("5 *").unwrap_err().contains("expected"));
    }
}
