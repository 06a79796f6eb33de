//! The `mail` corpus: a mailing list's traffic in a real IMAP server (Debian's Dovecot), read
//! by a real IMAP client (curl, one connection a message, through roam's proxy).
//!
//! Mail repeats itself in ways the web does not: a reply carries the message it answers, a
//! forward carries its attachments again, every post of a list ends with the list's footer.
//! How much of that a byte-level cache can find depends on how the correspondent's mail client
//! quotes ([`Quoting`]): a top-posted reply keeps the original verbatim under an
//! "Original Message" block, where a bottom-posted one prefixes each line with `> ` so that no
//! line, and hardly a 256-byte chunk, is as it was read.
//!
//! **The list** (our model; the thesis has no mail corpus): a dozen correspondents of a
//! technical list discuss the PostgreSQL manual ([`super::corpus`]); each writes with one mail
//! client's quoting, drawn from the seed, a third each. The text is real: paragraphs of the
//! manual's pages ([`super::wiki::articles`]), wrapped at 72 columns as mail clients wrap.
//! Messages come in time order: a new thread (a third of them; one in five of those attaches a
//! page of the manual, base64 as MIME has it), a reply to the latest message of one of the
//! eight most recent threads, or now and then a forward of an earlier message with its
//! attachment.
//!
//! **The reading**: the mailbox holds the first half of the messages when the reader comes,
//! who reads them all, in order; between the readings the second half is delivered (the
//! replies to what was read, [`Mailbox::before`]) and the reader reads those. A phone's mail
//! client keeps what it has read, so nothing is read twice.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use base64::Engine as _;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::trial::{Site, Workload};
use super::wiki::Articles;
use crate::harness::service::lock;
use crate::servers::dovecot::{self, Dovecot};

/// How a correspondent's mail client quotes the message it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quoting {
    /// Outlook's top-posting: the new text, then the original verbatim under its headers.
    Top,
    /// mutt's and Thunderbird's bottom-posting: the whole original, each line prefixed `> `,
    /// then the new text.
    Bottom,
    /// Inline and trimmed: the original's first paragraph quoted with `> `, then the new text.
    Trimmed,
}

/// Correspondents on the list.
const PEOPLE: usize = 12;
/// Of the messages, the share that starts a thread.
const NEW_THREAD: f64 = 1.0 / 3.0;
/// Of new threads, the share with an attachment.
const ATTACHES: f64 = 0.2;
/// Of the other messages, the share that forwards an earlier message with an attachment.
const FORWARDS: f64 = 0.1;
/// Threads a reply may answer: the most recent ones.
const ACTIVE_THREADS: usize = 8;
/// Pages of the manual a post may attach.
pub const ATTACHABLE: usize = 40;
/// Columns a mail client wraps its text at.
const WRAP: usize = 72;
/// What the list appends to every post.
const FOOTER: &str = "_______________________________________________\r\npgsql-lab mailing \
                      list\r\npgsql-lab@lists.lab\r\nhttps://lists.lab/mailman/listinfo/\
                      pgsql-lab\r\n";

/// One message of the list, as delivered.
#[derive(Clone, Debug)]
pub struct Message {
    /// The whole RFC 5322 message, CRLF line ends (as IMAP serves it).
    pub bytes: Vec<u8>,
    /// Its text part (what a reply quotes), CRLF line ends.
    text: String,
    subject: String,
    from: usize,
    /// Its attachment: file name and contents.
    attachment: Option<(String, Vec<u8>)>,
    id: String,
}

/// The list's messages in delivery order; the first [`Mailbox::before`] are there at the
/// first reading, the rest arrive between the readings.
#[derive(Clone, Debug)]
pub struct Mailbox {
    /// The messages.
    pub messages: Vec<Message>,
    /// How many are in the mailbox at the first reading.
    pub before: usize,
}

/// A correspondent's name and address.
fn person(i: usize) -> (String, String) {
    const NAMES: [&str; PEOPLE] = [
        "Ada Park",
        "Bo Lind",
        "Chen Wu",
        "Dara Okafor",
        "Emil Roth",
        "Fay Nunez",
        "Gus Hale",
        "Hana Sato",
        "Ivo Marek",
        "Jo Bauer",
        "Kim Ortiz",
        "Lev Adler",
    ];
    let name = NAMES[i % PEOPLE];
    let addr = format!("{}@lab.example", name.to_lowercase().replace(' ', "."));
    (name.to_string(), addr)
}

/// The paragraphs of the manual long enough to be a message's text, unwrapped.
fn paragraphs(articles: &Articles) -> Vec<String> {
    articles
        .iter()
        .flat_map(|(_, text)| text.split("\n\n"))
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| (120..=1500).contains(&p.len()))
        .collect()
}

/// `text` wrapped at [`WRAP`] columns, CRLF line ends.
fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > WRAP {
            out.push_str(&line);
            out.push_str("\r\n");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&line);
        out.push_str("\r\n");
    }
    out
}

/// Every line of `text` prefixed with `> ` (an already quoted line gets `>`).
fn quoted(text: &str) -> String {
    let mut out = String::new();
    for line in text.split_terminator("\r\n") {
        out.push_str(if line.starts_with('>') { ">" } else { "> " });
        out.push_str(line);
        out.push_str("\r\n");
    }
    out
}

/// `bytes` in base64, 76-character lines (RFC 2045).
fn base64_lines(bytes: &[u8]) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut out = String::with_capacity(b.len() + b.len() / 38);
    for chunk in b.as_bytes().chunks(76) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push_str("\r\n");
    }
    out
}

/// The list's mail for `seed`: `2 * per_reading` messages, half before the first reading.
/// `attachments` are files a post may attach (name, contents).
pub fn mailbox(
    articles: &Articles,
    attachments: &[(String, Vec<u8>)],
    seed: u64,
    per_reading: usize,
) -> Result<Mailbox> {
    let paras = paragraphs(articles);
    if paras.len() < 10 {
        bail!(
            "the manual gave {} paragraphs: too few for mail",
            paras.len()
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x3a1b);
    let styles: Vec<Quoting> = (0..PEOPLE)
        .map(|i| [Quoting::Top, Quoting::Bottom, Quoting::Trimmed][(i + seed as usize) % 3])
        .collect();
    let text = |rng: &mut ChaCha8Rng, n: usize| -> String {
        let mut s = String::new();
        for k in 0..n {
            if k > 0 {
                s.push_str("\r\n");
            }
            s.push_str(&wrap(paras.choose(rng).map(String::as_str).unwrap_or("")));
        }
        s
    };
    let mut messages: Vec<Message> = Vec::new();
    // Each thread: the indices of its messages.
    let mut threads: Vec<Vec<usize>> = Vec::new();
    // The messages with an attachment, which a forward may carry again.
    let mut forwardable: Vec<usize> = Vec::new();
    let total = 2 * per_reading;
    // Sent a few minutes apart, from 2026-11-23 08:00 UTC.
    let mut clock = 1_795_420_800u64;
    for n in 0..total {
        clock += rng.gen_range(60..1800);
        let from = rng.gen_range(0..PEOPLE);
        let m = if threads.is_empty() || rng.gen_bool(NEW_THREAD) {
            let attachment = (rng.gen_bool(ATTACHES) && !attachments.is_empty())
                .then(|| attachments.choose(&mut rng).cloned())
                .flatten();
            let k = rng.gen_range(1..=3);
            let body = text(&mut rng, k);
            let subject = match &attachment {
                Some((name, _)) => format!("Question about {name}"),
                None => format!("Question {}", n + 1),
            };
            threads.push(vec![n]);
            compose(n, from, subject, None, body, attachment, clock)
        } else if !forwardable.is_empty() && rng.gen_bool(FORWARDS) {
            let orig = &messages[*forwardable.choose(&mut rng).unwrap_or(&0)];
            let own = text(&mut rng, 1);
            let body = format!(
                "{own}\r\n{}",
                orig.under("---------- Forwarded message ---------")
            );
            threads.push(vec![n]);
            let subject = format!("Fwd: {}", orig.subject);
            let attachment = orig.attachment.clone();
            compose(n, from, subject, None, body, attachment, clock)
        } else {
            let recent = threads.len().saturating_sub(ACTIVE_THREADS);
            let t = rng.gen_range(recent..threads.len());
            let last = *threads[t].last().unwrap_or(&0);
            let orig = &messages[last];
            let k = rng.gen_range(1..=2);
            let own = text(&mut rng, k);
            let body = orig.answered(styles[from], &own);
            let subject = if orig.subject.starts_with("Re: ") {
                orig.subject.clone()
            } else {
                format!("Re: {}", orig.subject)
            };
            let reply_to = orig.id.clone();
            threads[t].push(n);
            compose(n, from, subject, Some(reply_to), body, None, clock)
        };
        if m.attachment.is_some() {
            forwardable.push(n);
        }
        messages.push(m);
    }
    Ok(Mailbox {
        messages,
        before: per_reading,
    })
}

impl Message {
    /// This message below the line `mark`, as a top-posted reply or a forward carries it: its
    /// sender, its subject, its text verbatim.
    fn under(&self, mark: &str) -> String {
        let (name, addr) = person(self.from);
        format!(
            "{mark}\r\nFrom: {name} <{addr}>\r\nSubject: {}\r\n\r\n{}",
            self.subject, self.text
        )
    }

    /// A reply's text to this message: `own` and the message quoted as `style` quotes.
    fn answered(&self, style: Quoting, own: &str) -> String {
        let (name, _) = person(self.from);
        match style {
            Quoting::Top => format!("{own}\r\n{}", self.under("-----Original Message-----")),
            Quoting::Bottom => format!("{name} wrote:\r\n{}\r\n{own}", quoted(&self.text)),
            Quoting::Trimmed => {
                let first = self.text.split("\r\n\r\n").next().unwrap_or("");
                format!("{name} wrote:\r\n{}\r\n{own}", quoted(first))
            }
        }
    }
}

/// Message `n` as the list delivers it: headers, the text (and the attachment, as
/// multipart/mixed), the footer.
fn compose(
    n: usize,
    from: usize,
    subject: String,
    reply_to: Option<String>,
    text: String,
    attachment: Option<(String, Vec<u8>)>,
    clock: u64,
) -> Message {
    let (name, addr) = person(from);
    let id = format!("<{n}.{clock}@lab.example>");
    let mut h = format!(
        "Return-Path: <{addr}>\r\nReceived: from mx.lab.example by lists.lab with ESMTP id \
         {clock:x}{n:04};\r\n\t{date}\r\nFrom: {name} <{addr}>\r\nTo: pgsql-lab@lists.lab\r\n\
         Subject: {subject}\r\nDate: {date}\r\nMessage-ID: {id}\r\n",
        date = rfc5322_date(clock),
    );
    if let Some(r) = &reply_to {
        h.push_str(&format!("In-Reply-To: {r}\r\nReferences: {r}\r\n"));
    }
    h.push_str("List-Id: <pgsql-lab.lists.lab>\r\nMIME-Version: 1.0\r\n");
    let with_footer = format!("{text}\r\n{FOOTER}");
    let bytes = match &attachment {
        None => format!(
            "{h}Content-Type: text/plain; charset=utf-8; format=flowed\r\n\
             Content-Transfer-Encoding: 8bit\r\n\r\n{with_footer}"
        ),
        Some((file, contents)) => {
            let b = format!("=_lab_{n}_{clock:x}");
            format!(
                "{h}Content-Type: multipart/mixed; boundary=\"{b}\"\r\n\r\n--{b}\r\n\
                 Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: \
                 8bit\r\n\r\n{text}\r\n--{b}\r\nContent-Type: text/html; name=\"{file}\"\r\n\
                 Content-Disposition: attachment; filename=\"{file}\"\r\n\
                 Content-Transfer-Encoding: base64\r\n\r\n{}--{b}--\r\n\r\n{FOOTER}",
                base64_lines(contents)
            )
        }
    };
    Message {
        bytes: bytes.into_bytes(),
        text,
        subject,
        from,
        attachment,
        id,
    }
}

/// `secs` since the epoch as an RFC 5322 date (UTC).
fn rfc5322_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let (h, m, s) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let (y, mo, d) = crate::harness::results::civil_from_days(days as i64);
    format!(
        "{}, {d:02} {} {y} {h:02}:{m:02}:{s:02} +0000",
        DAYS[(days % 7) as usize],
        MONTHS[mo as usize - 1]
    )
}

/// The reading: every message of the first half, in order, then (after the delivery) every
/// message of the second; a pause drawn as the other readers' before each.
pub fn reading(mailbox: &Mailbox, w: Workload, seed: u64) -> Vec<(bool, String, Duration)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x3a1c);
    (0..mailbox.messages.len())
        .map(|i| (i >= mailbox.before, format!("{}", i + 1), w.pause(&mut rng)))
        .collect()
}

/// The mailbox served by Dovecot in the server namespace: the first half there from the
/// start, the second delivered by [`Site::change`]. Pages are UIDs (Dovecot gives UIDs in
/// file-name order, and the files are named in delivery order).
pub(super) struct MailSite {
    mailbox: Mailbox,
    dovecot: Mutex<Option<Dovecot>>,
}

impl MailSite {
    pub(super) fn new(mailbox: Mailbox) -> MailSite {
        MailSite {
            mailbox,
            dovecot: Mutex::new(None),
        }
    }

    /// Start Dovecot with the first half (call in the server namespace).
    pub(super) fn serve(&self) -> Result<()> {
        let first = self.mailbox.messages[..self.mailbox.before]
            .iter()
            .map(|m| m.bytes.as_slice());
        let d = Dovecot::with_messages(first)?;
        *lock(&self.dovecot) = Some(d);
        Ok(())
    }

    fn message(&self, page: &str) -> Result<&Message> {
        page.parse::<usize>()
            .ok()
            .and_then(|uid| uid.checked_sub(1))
            .and_then(|i| self.mailbox.messages.get(i))
            .ok_or_else(|| anyhow!("`{page}` is not a message of the lab's mailbox"))
    }
}

impl Site for MailSite {
    fn nginx(&self) -> Option<(String, PathBuf)> {
        None
    }

    fn url(&self, page: &str) -> String {
        let (user, pass) = dovecot::USER;
        format!(
            "imap://{user}:{pass}@127.0.0.1:{}/INBOX;UID={page}",
            dovecot::IMAP_PORT
        )
    }

    fn target_port(&self) -> u16 {
        dovecot::IMAP_PORT
    }

    fn change(&self) -> Result<()> {
        let guard = lock(&self.dovecot);
        let d = guard
            .as_ref()
            .ok_or_else(|| anyhow!("the mail is delivered before Dovecot started"))?;
        let later = self.mailbox.messages[self.mailbox.before..]
            .iter()
            .map(|m| m.bytes.as_slice());
        d.deliver(self.mailbox.before, later)
    }

    fn check(&self, page: &str, body: &[u8]) -> Result<()> {
        let m = self.message(page)?;
        if body != m.bytes.as_slice() {
            bail!(
                "message {page} arrived altered: {} bytes, {} delivered",
                body.len(),
                m.bytes.len()
            );
        }
        Ok(())
    }
}

/// The files a post may attach: the first `n` pages of the manual (by name) with their HTML.
pub fn manual_pages(dir: &Path, pages: &[String], n: usize) -> Result<Vec<(String, Vec<u8>)>> {
    pages
        .iter()
        .take(n)
        .map(|p| {
            let f = dir.join(p);
            std::fs::read(&f)
                .map(|b| (p.clone(), b))
                .map_err(|e| anyhow!("reading {}: {e}", f.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn articles() -> Articles {
        (0..30)
            .map(|i| {
                let para = |k: usize| {
                    format!(
                        "Paragraph {k} of article {i}: the planner chooses a join order by \
                         estimating the cost of each path, and the executor runs the plan it \
                         chose, row by row, until the result is complete."
                    )
                };
                (
                    format!("A{i}"),
                    format!("{}\n\n{}\n\n{}", para(1), para(2), para(3)),
                )
            })
            .collect()
    }

    #[test]
    fn replies_carry_what_they_answer_as_their_client_quotes_it() {
        let files = vec![("page.html".to_string(), vec![b'x'; 5000])];
        let mb = mailbox(&articles(), &files, 7, 40).unwrap();
        assert_eq!((mb.messages.len(), mb.before), (80, 40));
        let again = mailbox(&articles(), &files, 7, 40).unwrap();
        assert!(mb
            .messages
            .iter()
            .zip(&again.messages)
            .all(|(a, b)| a.bytes == b.bytes));
        let (mut top, mut bottom, mut fwd) = (0, 0, 0);
        for m in &mb.messages {
            let s = String::from_utf8(m.bytes.clone()).unwrap();
            assert!(!s.replace("\r\n", "").contains('\n'), "bare LF in {s}");
            assert!(s.ends_with(FOOTER), "{s}");
            // Wrapped, but for quoting's marks.
            assert!(
                s.lines().all(|l| l.trim_start_matches('>').len() <= 78),
                "{s}"
            );
            top += usize::from(s.contains("-----Original Message-----"));
            bottom += usize::from(s.contains("\r\n> "));
            if m.subject.starts_with("Fwd: ") {
                fwd += 1;
                assert!(s.contains(&base64_lines(&files[0].1)), "{s}");
            }
        }
        assert!(top > 3 && bottom > 3 && fwd > 0, "{top} {bottom} {fwd}");
        // A top-posted reply holds its original's text byte for byte.
        let reply = mb
            .messages
            .iter()
            .find(|m| String::from_utf8_lossy(&m.bytes).contains("-----Original"))
            .unwrap();
        let s = String::from_utf8_lossy(&reply.bytes);
        let id = s
            .lines()
            .find_map(|l| l.strip_prefix("In-Reply-To: "))
            .unwrap();
        let orig = mb.messages.iter().find(|m| m.id == id).unwrap();
        assert!(s.contains(&orig.text));
    }

    #[test]
    fn the_reading_reads_each_message_once_the_later_ones_after_the_delivery() {
        let mb = mailbox(&articles(), &[], 3, 10).unwrap();
        let w = Workload::for_duration(Duration::from_secs(60));
        let r = reading(&mb, w, 3);
        let pages: Vec<&str> = r.iter().map(|x| x.1.as_str()).collect();
        assert_eq!(pages.first(), Some(&"1"));
        assert_eq!(pages.len(), 20);
        assert!(r[..10].iter().all(|x| !x.0) && r[10..].iter().all(|x| x.0));
        let site = MailSite::new(mb.clone());
        site.check("3", &mb.messages[2].bytes).unwrap();
        assert!(site.check("3", b"other").is_err());
        assert!(site.check("99", b"").is_err());
        assert!(site.change().is_err(), "delivered with no Dovecot");
    }

    #[test]
    fn dates_are_rfc5322() {
        assert_eq!(rfc5322_date(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(
            rfc5322_date(1_795_420_800),
            "Mon, 23 Nov 2026 08:00:00 +0000"
        );
    }
}
