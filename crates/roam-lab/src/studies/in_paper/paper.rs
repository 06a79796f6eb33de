//! What the paper reported for each cell we reproduce (Higgins et al., MobiCom 2010, §5, and
//! the dissertation's chapter 2; the digest is `../shared/spec/intentional-networking.md`,
//! "Evaluation"). The paper reports roam's advantage as ratios against its three one-link
//! strategies (idealized aggregation, and migration to the best-latency or best-bandwidth
//! network), so each claim is a bound on roam's advantage, which the report checks with the
//! geometric mean of the per-seed ratios. The paper did not measure MPTCP.

/// Which metric of an application a claim is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The interactive metric (a latency or a time; lower is better).
    Interactive,
    /// The background metric (a throughput, or the time to finish background work).
    Background,
}

/// One claim of the paper: for `app` on the scenarios `on` selects, against every system in
/// `against`, roam's advantage on `side` is at least `at_least` (the other system's
/// interactive metric over roam's; for the background metric roam's relative standing, above
/// 1 when roam is better, as `report::compare::advantages` computes it). `text` quotes the paper.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// Application.
    pub app: &'static str,
    /// The scenarios the claim covers.
    pub on: On,
    /// The systems it compares roam with.
    pub against: &'static [&'static str],
    /// Interactive or background.
    pub side: Side,
    /// The least advantage that meets it.
    pub at_least: f64,
    /// The paper's words, briefly.
    pub text: &'static str,
}

/// Scenarios a claim covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// The crowded hotspot.
    Hotspot,
    /// Intermittent WiFi over a wide-area 3G link.
    Intermittent,
    /// The two measured vehicular drives.
    Drives,
}

impl On {
    /// Whether `scenario` is one of these.
    pub fn covers(self, scenario: &str) -> bool {
        match self {
            On::Hotspot => scenario == "hotspot",
            On::Intermittent => scenario == "intermittent",
            On::Drives => scenario.starts_with("vehicular"),
        }
    }
}

const AGG: &[&str] = &["aggregation"];
const MIGRATION: &[&str] = &["best-latency", "best-bandwidth"];
const ALL: &[&str] = &["aggregation", "best-latency", "best-bandwidth"];

/// Every claim of the paper's evaluation that a cell of the lab measures. Where the paper
/// gives a range ("5-8x" over two traces) the lower end is the bound; where it reports a cost
/// ("background 18% longer") the bound is that cost; "up to" claims are checked as "better".
#[rustfmt::skip]
pub const CLAIMS: &[Claim] = &[
    // File system (BlueFS, the lighttpd build).
    claim("fs", On::Hotspot, AGG, Side::Interactive, 1.14, "interactive 14% faster"),
    claim("fs", On::Hotspot, AGG, Side::Background, 1.09, "write-back 9% sooner"),
    claim("fs", On::Hotspot, &["best-latency"], Side::Interactive, 3.0, "interactive 3x faster"),
    claim("fs", On::Hotspot, &["best-bandwidth"], Side::Interactive, 4.0, "interactive 4x faster"),
    claim("fs", On::Intermittent, AGG, Side::Interactive, 1.0 / 0.6, "interactive latency 40% lower (1.67x)"),
    claim("fs", On::Intermittent, ALL, Side::Background, 1.01, "total time 1% better"),
    claim("fs", On::Drives, AGG, Side::Interactive, 5.0, "interactive 5-8x faster"),
    claim("fs", On::Drives, AGG, Side::Background, 1.0 / 1.07, "write-back 1-7% longer"),
    claim("fs", On::Drives, MIGRATION, Side::Interactive, 7.0, "interactive 7-8x faster"),
    claim("fs", On::Drives, MIGRATION, Side::Background, 1.05, "write-back 5-17% better"),
    // Mail (Thunderbird).
    claim("mail", On::Hotspot, AGG, Side::Interactive, 5.0, "on-demand 5x faster"),
    claim("mail", On::Hotspot, AGG, Side::Background, 1.0 / 1.18, "background 18% longer"),
    claim("mail", On::Intermittent, AGG, Side::Interactive, 8.0, "on-demand 8x faster"),
    claim("mail", On::Intermittent, AGG, Side::Background, 1.0 / 1.01, "background 1% longer"),
    claim("mail", On::Hotspot, MIGRATION, Side::Interactive, 8.0, "on-demand 8-23x faster"),
    claim("mail", On::Intermittent, MIGRATION, Side::Interactive, 8.0, "on-demand 8-23x faster"),
    claim("mail", On::Hotspot, MIGRATION, Side::Background, 1.0, "background up to 3x better"),
    claim("mail", On::Intermittent, MIGRATION, Side::Background, 1.0, "background up to 3x better"),
    claim("mail", On::Drives, ALL, Side::Interactive, 7.0, "on-demand 7-13x faster"),
    claim("mail", On::Drives, AGG, Side::Background, 1.0 / 1.03, "background within 1-3%"),
    claim("mail", On::Drives, MIGRATION, Side::Background, 1.0, "background better"),
    // Sensing.
    claim("sensing", On::Hotspot, AGG, Side::Interactive, 1.0, "urgent equal (~30 ms)"),
    claim("sensing", On::Hotspot, AGG, Side::Background, 0.995, "bulk within 0.5% of 29 KB/s"),
    claim("sensing", On::Hotspot, &["best-latency"], Side::Interactive, 4.0, "urgent over 4x faster"),
    claim("sensing", On::Intermittent, AGG, Side::Interactive, 1.41, "urgent 41% faster (1.41x; or 1.69x if 41% less latency)"),
    claim("sensing", On::Intermittent, AGG, Side::Background, 1.25, "bulk 25% higher"),
    claim("sensing", On::Drives, ALL, Side::Interactive, 2.0, "urgent 2-5x faster"),
    claim("sensing", On::Drives, AGG, Side::Background, 1.01, "bulk 1-6% higher"),
    claim("sensing", On::Drives, MIGRATION, Side::Background, 1.0, "bulk up to 29% higher"),
];

const fn claim(
    app: &'static str,
    on: On,
    against: &'static [&'static str],
    side: Side,
    at_least: f64,
    text: &'static str,
) -> Claim {
    Claim {
        app,
        on,
        against,
        side,
        at_least,
        text,
    }
}

/// The claims about `app` on `scenario` against `system`.
pub fn claims<'a>(
    app: &'a str,
    scenario: &'a str,
    system: &'a str,
) -> impl Iterator<Item = &'static Claim> + 'a {
    CLAIMS
        .iter()
        .filter(move |c| c.app == app && c.on.covers(scenario) && c.against.contains(&system))
}

/// The paper's words for `app` on `scenario` against `system`, for the report's column.
pub fn claim_text(app: &str, scenario: &str, system: &str) -> String {
    if system == "mptcp" {
        return "not measured in the paper".into();
    }
    claims(app, scenario, system)
        .map(|c| c.text)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The paper's trace table (its Table 2), for the report's side-by-side with ours.
pub const TRACE_TABLE: &str = "\
| trace | 3G down median / max | 3G up median / max | WiFi available | WiFi session median / longest | length |
|---|---|---|---|---|---|
| paper trace 1 | 382 kbit/s / 1.3 Mbit/s | 57 / 78 kbit/s | 7% | 11 s / 72 s | 138 min |
| paper trace 2 | 368 kbit/s / 1.2 Mbit/s | 40 / 74 kbit/s | 27% | 7 s / 131 s | 36 min |
";
