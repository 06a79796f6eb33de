//! The `wiki` corpus: a MediaWiki (Debian's `mediawiki`, served by php-fpm behind nginx, its
//! database in SQLite) whose articles are the PostgreSQL manual's pages, edited between the
//! reader's two readings.
//!
//! What a reader downloads from a wiki is mostly not the article: MediaWiki wraps every page in
//! its skin (navigation, the sidebar, ResourceLoader's configuration), about 15 kB that every
//! page repeats, and a page's article changes a little with each edit. That is the redundancy
//! of real web traffic the thesis's traces held (ch. IV), produced here by the real software.
//!
//! **The articles** are the older manual version's pages ([`super::corpus::docs`]), converted to
//! wikitext by [`wikitext`]: headings, paragraphs, lists, preformatted blocks, and links
//! between pages as wiki links (a page's title is its file name's stem: `sql-select.html`
//! becomes `Sql-select`). Tables and markup inside paragraphs become plain text.
//!
//! **The edits** (the week between the readings, [`edits`]): a seeded third of the wiki's
//! articles each get one or two of the edits wiki editors make: a paragraph deleted, a
//! paragraph copied in from another article (real text, not generated), two paragraphs swapped.
//! The model of *which* edits is ours (the thesis gives none); the text is the manual's.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::corpus::Docs;

/// Articles: (title, wikitext).
pub type Articles = Vec<(String, String)>;

/// The wiki's articles (title, wikitext): every page of the older manual, converted (once
/// per process).
pub fn articles(docs: &Docs) -> Result<Articles> {
    static DONE: Mutex<Option<(PathBuf, Articles)>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((dir, a)) = &*done {
        if *dir == docs.old.1 {
            return Ok(a.clone());
        }
    }
    let mut a = Vec::with_capacity(docs.pages.len());
    for page in &docs.pages {
        let f = docs.old.1.join(page);
        let html = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        a.push((title(page), wikitext(&String::from_utf8_lossy(&html))));
    }
    *done = Some((docs.old.1.clone(), a.clone()));
    Ok(a)
}

/// A page's title in the wiki: its file name's stem, first letter capitalised as MediaWiki
/// does (`sql-select.html` is `Sql-select`).
pub fn title(page: &str) -> String {
    let stem = page.strip_suffix(".html").unwrap_or(page);
    let mut c = stem.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The wikitext of one manual page (its HTML): block elements become wiki blocks, links to
/// other pages wiki links, everything else plain text. Text that wikitext would read as markup
/// (`[`, `{`, `|`, `'`, `<`, `*`, `#`, `=` and `:` at a line's start) is written as character
/// references, so the article shows the manual's words and nothing else.
pub fn wikitext(html: &str) -> String {
    let body = html.find("<body").map(|i| &html[i..]).unwrap_or(html);
    let mut out = Blocks::default();
    let mut rest = body;
    let mut link: Option<String> = None;
    let mut link_text = String::new();
    let mut skip = 0usize;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('<') {
            // A tag runs to its `>`; one never closed runs to the end of the page.
            let (tag, next) = match after.find('>') {
                Some(i) => (&after[..i], &after[i + 1..]),
                None => (after, ""),
            };
            rest = next;
            let closing = tag.starts_with('/');
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_ascii_lowercase();
            match name.as_str() {
                // The manual's navigation bars: the wiki has its own.
                "div" if !closing && (tag.contains("navheader") || tag.contains("navfooter")) => {
                    skip = 1;
                }
                "div" if skip > 0 => {
                    skip = if closing { skip - 1 } else { skip + 1 };
                }
                _ if skip > 0 => {}
                "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                    if closing {
                        out.end_heading();
                    } else {
                        out.start(Block::Heading);
                    }
                }
                "p" | "dt" | "dd" | "tr" | "div" | "table" | "br" => out.start(Block::Paragraph),
                // A table's cells, side by side in their row's paragraph.
                "td" | "th" if !closing => out.text(" "),
                "li" if !closing => out.start(Block::Item),
                "li" => {}
                "pre" => {
                    if closing {
                        out.start(Block::Paragraph);
                    } else {
                        out.start(Block::Pre);
                    }
                }
                "a" if !closing => {
                    link = href(tag)
                        .filter(|h| h.ends_with(".html"))
                        .map(|h| title(&h));
                    link_text.clear();
                }
                "a" => {
                    match link.take() {
                        // Inside a preformatted block a link is its text.
                        Some(t) if out.kind != Block::Pre && !link_text.trim().is_empty() => {
                            out.raw(&format!("[[{t}|{}]]", escape(link_text.trim(), false)));
                        }
                        _ => out.text(&link_text),
                    }
                    link_text.clear();
                }
                _ => {}
            }
            continue;
        }
        let end = rest.find('<').unwrap_or(rest.len());
        let text = unescape(&rest[..end]);
        rest = &rest[end..];
        if skip > 0 {
            continue;
        }
        if link.is_some() {
            link_text.push_str(&text);
        } else {
            out.text(&text);
        }
    }
    out.finish()
}

/// The `href` of an `a` tag's text, without its fragment.
fn href(tag: &str) -> Option<String> {
    let i = tag.find("href=\"")? + 6;
    let v = &tag[i..];
    let v = &v[..v.find('"')?];
    let v = v.split('#').next().unwrap_or("");
    (!v.is_empty() && !v.contains(':') && !v.contains('/')).then(|| v.to_string())
}

/// HTML's character references that the manual uses, decoded.
fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let r = &rest[i..];
        let Some(semi) = r.find(';').filter(|&j| j <= 10) else {
            out.push('&');
            rest = &r[1..];
            continue;
        };
        let name = &r[1..semi];
        let c = match name {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => name
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &r[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &r[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `s` with what wikitext reads as markup written as character references; `line_start`:
/// `s` begins a line (where `*`, `#`, `:`, `;`, `=` and `-` are markup too; a leading space,
/// also markup there, is trimmed by the caller).
fn escape(s: &str, line_start: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c) in s.chars().enumerate() {
        let first = line_start && i == 0;
        match c {
            '[' | ']' | '{' | '}' | '|' | '\'' | '<' | '>' | '&' | '~' | '_' => {
                out.push_str(&format!("&#{};", c as u32))
            }
            '*' | '#' | ':' | ';' | '=' | '-' if first => out.push_str(&format!("&#{};", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

/// The kind of block being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Block {
    #[default]
    Paragraph,
    Heading,
    Item,
    Pre,
}

/// Wikitext being built, a block at a time.
#[derive(Default)]
struct Blocks {
    done: Vec<String>,
    current: String,
    kind: Block,
}

impl Blocks {
    /// End the current block and begin one of `kind`. A paragraph that opens a list item
    /// (DocBook's `<li><p>`) stays the item.
    fn start(&mut self, kind: Block) {
        if kind == Block::Paragraph && self.kind == Block::Item && self.current.trim().is_empty() {
            return;
        }
        self.flush();
        self.kind = kind;
    }

    fn end_heading(&mut self) {
        self.flush();
        self.kind = Block::Paragraph;
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.current);
        let block = match self.kind {
            Block::Pre => {
                let lines: Vec<String> = text
                    .trim_matches('\n')
                    .lines()
                    .map(|l| format!(" {}", escape(l, false)))
                    .collect();
                lines.join("\n")
            }
            _ => {
                let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
                if words.is_empty() {
                    String::new()
                } else {
                    match self.kind {
                        Block::Heading => format!("== {words} =="),
                        Block::Item => format!("* {words}"),
                        _ => words,
                    }
                }
            }
        };
        if !block.trim().is_empty() {
            self.done.push(block);
        }
    }

    /// Plain text (escaped here).
    fn text(&mut self, s: &str) {
        if self.kind == Block::Pre {
            self.current.push_str(s);
        } else {
            let line_start = self.current.trim().is_empty();
            let t = if line_start { s.trim_start() } else { s };
            self.current.push_str(&escape(t, line_start));
        }
    }

    /// Wikitext as it is (the spaces around it are the text's own).
    fn raw(&mut self, s: &str) {
        self.current.push_str(s);
    }

    fn finish(mut self) -> String {
        self.flush();
        let mut s = self.done.join("\n\n");
        s.push('\n');
        s
    }
}

/// A week's edits at the rate [`edits`] models: one article in [`WEEK_EDITS_ONE_IN`].
pub const WEEK_EDITS_ONE_IN: u32 = 3;

/// Edits: for a seeded one in `one_in` of `articles` (title, wikitext; [`WEEK_EDITS_ONE_IN`]
/// for the dedup corpus's week), the article's new text. Each drawn article gets one or two edits, each one of: a paragraph (not its first)
/// deleted, a paragraph of another article copied in at a random place, or two neighbouring
/// paragraphs swapped (deleting and swapping need three paragraphs: an article with fewer
/// gets a copied paragraph instead, and one whose draws changed nothing is left out).
pub fn edits(articles: &[(String, String)], seed: u64, one_in: u32) -> Vec<(String, String)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x3d17);
    let mut out = Vec::new();
    if articles.len() < 2 {
        return out;
    }
    for (i, (t, text)) in articles.iter().enumerate() {
        if !rng.gen_ratio(1, one_in.max(1)) {
            continue;
        }
        let mut paras: Vec<String> = text
            .split("\n\n")
            .map(|p| p.trim_end().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        for _ in 0..rng.gen_range(1..=2) {
            match rng.gen_range(0..3) {
                0 if paras.len() > 2 => {
                    let k = rng.gen_range(1..paras.len());
                    paras.remove(k);
                }
                2 if paras.len() > 2 => {
                    let k = rng.gen_range(1..paras.len() - 1);
                    paras.swap(k, k + 1);
                }
                _ => {
                    let mut j = rng.gen_range(0..articles.len() - 1);
                    if j >= i {
                        j += 1;
                    }
                    let donor: Vec<&str> = articles[j]
                        .1
                        .split("\n\n")
                        .filter(|p| !p.trim().is_empty() && !p.starts_with("=="))
                        .collect();
                    if let Some(p) = donor.choose(&mut rng) {
                        let at = rng.gen_range(0..=paras.len());
                        paras.insert(at, p.trim_end().to_string());
                    }
                }
            }
        }
        let mut s = paras.join("\n\n");
        s.push('\n');
        if s != *text {
            out.push((t.clone(), s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<html><head><title>SELECT</title></head><body>\
        <div class=\"navheader\"><table><tr><td><a href=\"prev.html\">Prev</a></td></tr></table></div>\
        <h2>Synopsis</h2><p>Use <a href=\"sql-insert.html#x\">INSERT</a> for rows; a &lt; b &amp; c's [x].</p>\
        <pre class=\"synopsis\">SELECT *\n  FROM t;</pre>\
        <ul><li class=\"listitem\"><p>one</p></li><li>two</li></ul>\
        <table><tr><td>smallint</td><td>2 bytes</td></tr></table><h5>Small</h5>\
        <div class=\"navfooter\"><a href=\"next.html\">Next</a></div></body></html>";

    #[test]
    fn a_manual_page_becomes_wikitext_without_its_navigation() {
        let w = wikitext(PAGE);
        assert!(!w.contains("Prev") && !w.contains("Next"), "{w}");
        assert!(w.contains("== Synopsis =="), "{w}");
        assert!(w.contains("Use [[Sql-insert|INSERT]] for rows;"), "{w}");
        // Markup characters of the text are references, so they show as text.
        assert!(w.contains("a &#60; b &#38; c&#39;s &#91;x&#93;."), "{w}");
        assert!(w.contains(" SELECT *\n   FROM t;"), "{w}");
        assert!(w.contains("* one\n\n* two"), "{w}");
        assert!(w.contains("smallint 2 bytes"), "{w}");
        assert!(w.contains("== Small =="), "{w}");
    }

    #[test]
    fn malformed_html_gives_text_not_a_panic() {
        for page in [
            "<body><p>caf\u{e9}<a title=\"caf\u{e9}",
            "<body>&#xZZ; &; &#99999999; <",
            "<",
        ] {
            let _ = wikitext(page);
        }
        assert!(wikitext("<body><p>caf\u{e9} &#233;</p>").contains("caf\u{e9} \u{e9}"));
    }

    #[test]
    fn titles_are_the_file_stems_capitalised() {
        assert_eq!(title("sql-select.html"), "Sql-select");
        assert_eq!(title("index.html"), "Index");
    }

    #[test]
    fn edits_change_about_a_third_of_the_articles_and_only_with_the_corpus_text() {
        let articles: Vec<(String, String)> = (0..300)
            .map(|i| {
                (
                    format!("P{i}"),
                    format!("== H{i} ==\n\nfirst {i}\n\nsecond {i}\n\nthird {i}\n"),
                )
            })
            .collect();
        let e = edits(&articles, 7, WEEK_EDITS_ONE_IN);
        assert!((70..130).contains(&e.len()), "{} edited", e.len());
        let all: std::collections::HashSet<&str> = articles
            .iter()
            .flat_map(|a| a.1.split("\n\n").map(str::trim_end))
            .collect();
        for (t, text) in &e {
            let orig = &articles.iter().find(|a| &a.0 == t).unwrap().1;
            assert_ne!(text, orig);
            for p in text.split("\n\n") {
                assert!(all.contains(p.trim_end()), "{p:?} is not the corpus's");
            }
        }
        assert_eq!(
            e,
            edits(&articles, 7, WEEK_EDITS_ONE_IN),
            "the same seed edits the same way"
        );
        assert_ne!(e, edits(&articles, 8, WEEK_EDITS_ONE_IN));
    }
}
