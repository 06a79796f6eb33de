//! The lab's news site: content that changes every hour on a schedule, a layout that does not.
//!
//! What Precog is for (the thesis, ch. V, Figs. 13-14: 8-88% of a mobile site's URLs are new
//! in each 6-hourly snapshot) made reproducible: [`write_hour`] writes the site as it stands at
//! hour `h` of the lab's week, the same for the same seed.
//!
//! - Five sections; each gets [`NEW_PER_HOUR`] new stories an hour, and a story stays listed
//!   for [`LIFETIME`] hours.
//! - The front page's top stories and each section's list are **reordered every hour** (a
//!   "hotness" drawn per hour), so "the third headline box" holds another story each hour.
//! - A story's page lives at a URL that **carries the hour** (`/world/h97/1234-...html`, as
//!   editions and cache-busted URLs do): a URL seen yesterday is gone today, though the
//!   story's text, and its image (`/img/1234.bmp`, a stable URL), are the same bytes.
//! - The layout (the navigation bar, the boxes, the ids) never changes, so an action recorded
//!   at one hour replays at any other.
//!
//! Pages share a stylesheet and a script (stable URLs) as real sites do; images are random
//! bytes (incompressible, as JPEGs are).

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;
use std::path::Path;

/// The sections, in the navigation bar's order.
pub const SECTIONS: [&str; 5] = ["world", "sports", "tech", "business", "science"];
/// New stories per section per hour.
pub const NEW_PER_HOUR: u32 = 2;
/// Hours a story stays listed.
pub const LIFETIME: u32 = 12;
/// Stories on the front page.
pub const TOP: usize = 8;
/// Stories listed on a section's page.
pub const LISTED: usize = 10;

const WORDS: [&str; 24] = [
    "council", "market", "storm", "league", "vote", "court", "chip", "launch", "rally", "drought",
    "merger", "final", "budget", "river", "summit", "study", "orbit", "strike", "harvest",
    "record", "engine", "border", "festival", "signal",
];

/// One story: its id, section and the hour it was published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Story {
    /// Unique over the week.
    pub id: u32,
    /// Index into [`SECTIONS`].
    pub section: usize,
    /// Hour of publication.
    pub born: u32,
}

impl Story {
    fn rng(self, seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed ^ (u64::from(self.id) << 20) ^ 0x5e55)
    }

    /// The story's headline (stable).
    pub fn title(self, seed: u64) -> String {
        let mut r = self.rng(seed);
        let w: Vec<&str> = (0..5).map(|_| WORDS[r.gen_range(0..WORDS.len())]).collect();
        let mut t = w.join(" ");
        t[..1].make_ascii_uppercase();
        t
    }

    fn slug(self, seed: u64) -> String {
        self.title(seed).to_ascii_lowercase().replace(' ', "-")
    }

    /// The story's URL at `hour`.
    pub fn url(self, hour: u32, seed: u64) -> String {
        format!(
            "/{}/h{hour}/{}-{}.html",
            SECTIONS[self.section],
            self.id,
            self.slug(seed)
        )
    }

    /// Its image's URL (stable).
    pub fn image(self) -> String {
        format!("/img/{}.bmp", self.id)
    }

    fn body(self, seed: u64) -> String {
        let mut r = self.rng(seed);
        let mut s = String::new();
        for _ in 0..r.gen_range(6..14) {
            s.push_str("<p>");
            for _ in 0..r.gen_range(40..90) {
                s.push_str(WORDS[r.gen_range(0..WORDS.len())]);
                s.push(' ');
            }
            s.push_str("</p>\n");
        }
        s
    }

    /// A valid image of random pixels (a 24-bit BMP): incompressible, as photographs in
    /// JPEG are, and one a browser decodes. (Random bytes served as an image are not: Blink
    /// gives up on such a load after its first bytes and leaves a truncated cache entry.)
    fn image_bytes(self, seed: u64) -> Vec<u8> {
        let mut r = self.rng(seed ^ 0x1a6e);
        let (w, h) = (100u32, r.gen_range(66..200u32));
        let row = (w * 3).div_ceil(4) * 4;
        let pixels = row * h;
        let mut b = Vec::with_capacity(54 + pixels as usize);
        b.extend_from_slice(b"BM");
        b.extend_from_slice(&(54 + pixels).to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&54u32.to_le_bytes());
        b.extend_from_slice(&40u32.to_le_bytes());
        b.extend_from_slice(&w.to_le_bytes());
        b.extend_from_slice(&h.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&24u16.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&pixels.to_le_bytes());
        b.extend_from_slice(&[0; 16]);
        b.extend((0..pixels).map(|_| r.gen::<u8>()));
        b
    }
}

/// The stories listed at `hour`, per section (published in the last [`LIFETIME`] hours).
pub fn live(hour: u32) -> Vec<Story> {
    let mut out = vec![];
    for born in hour.saturating_sub(LIFETIME - 1)..=hour {
        for section in 0..SECTIONS.len() {
            for k in 0..NEW_PER_HOUR {
                let id = (born * SECTIONS.len() as u32 + section as u32) * NEW_PER_HOUR + k;
                out.push(Story { id, section, born });
            }
        }
    }
    out
}

/// `stories` in hour `hour`'s order (its hotness, drawn per hour).
fn ranked(mut stories: Vec<Story>, hour: u32, seed: u64) -> Vec<Story> {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ (u64::from(hour) << 32) ^ 0x407);
    let mut keyed: Vec<(f64, Story)> = stories
        .drain(..)
        .map(|s| {
            // Fresher stories are hotter, with noise: the order moves every hour.
            let age = f64::from(hour - s.born);
            (r.gen::<f64>() * 6.0 - age, s)
        })
        .collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
    keyed.into_iter().map(|k| k.1).collect()
}

/// The stories on the front page at `hour`, in its order.
pub fn front(hour: u32, seed: u64) -> Vec<Story> {
    ranked(live(hour), hour, seed)
        .into_iter()
        .take(TOP)
        .collect()
}

/// The stories section `section` (an index into [`SECTIONS`]) lists at `hour`, in its order.
pub fn listed(section: usize, hour: u32, seed: u64) -> Vec<Story> {
    ranked(live(hour), hour, seed)
        .into_iter()
        .filter(|s| s.section == section)
        .take(LISTED)
        .collect()
}

/// The site's layout: as usual, or changed (a banner above the content, a new first link in
/// the navigation bar, a sponsored box second in every list), as a redesign moves things.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The layout every hour has.
    Usual,
    /// The changed one (`roam bench precog`'s test of locators).
    Changed,
}

fn page(layout: Layout, title: &str, main: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title>\
         <link rel=\"stylesheet\" href=\"/static/site.css\"><script src=\"/static/app.js\"></script>\
         </head><body><header id=\"masthead\"><a id=\"home\" href=\"/index.html\">The Lab Times</a></header>\
         <nav id=\"nav\">"
    );
    if layout == Layout::Changed {
        s.push_str("<a href=\"/live.html\">live</a> ");
    }
    for sec in SECTIONS {
        let _ = write!(
            s,
            "<a id=\"nav-{sec}\" href=\"/{sec}/index.html\">{sec}</a> "
        );
    }
    let banner = if layout == Layout::Changed {
        "<div class=\"banner\"><a href=\"/live.html\">Breaking: follow live</a></div>"
    } else {
        ""
    };
    let _ = writeln!(s, "</nav><main id=\"main\">{banner}{main}</main><footer id=\"footer\">hour edition</footer></body></html>");
    s
}

fn boxes(layout: Layout, list: &[Story], hour: u32, seed: u64) -> String {
    let mut s = String::new();
    for (i, st) in list.iter().enumerate() {
        if i == 1 && layout == Layout::Changed {
            s.push_str("<div class=\"story sponsored\"><a class=\"headline\" href=\"/sponsored.html\">Sponsored</a></div>");
        }
        let _ = write!(
            s,
            "<div class=\"story\"><a class=\"headline\" href=\"{}\">{}</a><img src=\"{}\" alt=\"\"></div>",
            st.url(hour, seed),
            st.title(seed),
            st.image()
        );
    }
    s
}

/// Write the site as it stands at `hour` into `dir` (created): the front page, each
/// section's page, every live story's page, the images and the shared files.
pub fn write_hour(dir: &Path, hour: u32, seed: u64) -> Result<()> {
    write_hour_as(dir, hour, seed, Layout::Usual, false)
}

/// The speculation rules a page offers when the site uses them: prefetch any same-site link
/// the pointer rests on (Chrome's `moderate` eagerness: about 200 ms of hover, or a press).
pub const SPECULATION_RULES: &str = "<script type=\"speculationrules\">{\"prefetch\":[{\"where\":{\"href_matches\":\"/*\"},\"eagerness\":\"moderate\"}]}</script>";

/// [`write_hour`] with the given layout, and with [`SPECULATION_RULES`] in every page if
/// `speculation`.
pub fn write_hour_as(
    dir: &Path,
    hour: u32,
    seed: u64,
    layout: Layout,
    speculation: bool,
) -> Result<()> {
    let put = |rel: &str, bytes: &[u8]| -> Result<()> {
        let with_rules;
        let bytes = if speculation && rel.ends_with(".html") {
            with_rules = String::from_utf8_lossy(bytes).replacen(
                "</head>",
                &format!("{SPECULATION_RULES}</head>"),
                1,
            );
            with_rules.as_bytes()
        } else {
            bytes
        };
        let p = dir.join(rel.trim_start_matches('/'));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    let stories = ranked(live(hour), hour, seed);
    put("/static/site.css", css().as_bytes())?;
    put("/static/app.js", script().as_bytes())?;
    let top = front(hour, seed);
    put(
        "/index.html",
        page(
            layout,
            "The Lab Times",
            &format!("<div id=\"top\">{}</div>", boxes(layout, &top, hour, seed)),
        )
        .as_bytes(),
    )?;
    for (i, sec) in SECTIONS.iter().enumerate() {
        let list = listed(i, hour, seed);
        put(
            &format!("/{sec}/index.html"),
            page(
                layout,
                sec,
                &format!(
                    "<h1>{sec}</h1><div id=\"stories\">{}</div>",
                    boxes(layout, &list, hour, seed)
                ),
            )
            .as_bytes(),
        )?;
    }
    for (k, st) in stories.iter().enumerate() {
        // Related: the next stories of the same section in this hour's order.
        let related: Vec<Story> = stories
            .iter()
            .cycle()
            .skip(k + 1)
            .take(stories.len())
            .filter(|s| s.section == st.section && s.id != st.id)
            .copied()
            .take(4)
            .collect();
        let main = format!(
            "<article id=\"article\"><h1>{}</h1><img src=\"{}\" alt=\"\">{}</article>\
             <aside id=\"related\">{}</aside>",
            st.title(seed),
            st.image(),
            st.body(seed),
            boxes(layout, &related, hour, seed)
        );
        put(
            &st.url(hour, seed),
            page(layout, &st.title(seed), &main).as_bytes(),
        )?;
        put(&st.image(), &st.image_bytes(seed))?;
    }
    if layout == Layout::Changed {
        put("/live.html", page(layout, "live", "<p>live</p>").as_bytes())?;
        put(
            "/sponsored.html",
            page(layout, "sponsored", "<p>sponsored</p>").as_bytes(),
        )?;
    }
    Ok(())
}

fn css() -> String {
    let mut s = String::from("body{font-family:serif;margin:0 auto;max-width:40em}\n");
    for i in 0..400 {
        let _ = writeln!(s, ".c{i}{{margin:{}px;padding:{}px}}", i % 17, i % 13);
    }
    s
}

fn script() -> String {
    let mut s = String::from("// The site's script: nothing a replay needs.\n");
    for i in 0..1500 {
        let _ = writeln!(s, "function f{i}(x){{return x*{}+{};}}", i % 31, i % 7);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stories_live_and_urls_move_with_the_hour() {
        let now = live(100);
        assert_eq!(
            now.len(),
            (LIFETIME * NEW_PER_HOUR) as usize * SECTIONS.len()
        );
        let next = live(101);
        let kept = now.iter().filter(|s| next.contains(s)).count();
        assert_eq!(kept, now.len() - (NEW_PER_HOUR as usize * SECTIONS.len()));
        let s = now[0];
        assert_ne!(s.url(100, 7), s.url(101, 7));
        assert_eq!(s.title(7), s.title(7));
        assert_eq!(s.image(), format!("/img/{}.bmp", s.id));
    }

    #[test]
    fn the_order_moves_every_hour() {
        let a = ranked(live(100), 100, 1);
        let b = ranked(live(100), 101, 1);
        assert_ne!(a, b);
        assert_eq!(a, ranked(live(100), 100, 1));
    }

    #[test]
    fn a_written_hour_holds_its_pages() {
        let d = std::env::temp_dir().join(format!("roam-news-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        write_hour(&d, 30, 3).unwrap();
        let front = std::fs::read_to_string(d.join("index.html")).unwrap();
        assert!(front.contains("id=\"top\"") && front.matches("class=\"story\"").count() == TOP);
        let st = ranked(live(30), 30, 3)[0];
        assert!(d.join(st.url(30, 3).trim_start_matches('/')).is_file());
        assert!(d.join("world/index.html").is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
