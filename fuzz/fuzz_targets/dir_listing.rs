//! Fuzz the directory-listing parser (`roam_transfer::engine::parse_listing`): an arbitrary
//! page, read as an HTML index and as nginx's JSON index, gives files or a clean error, never
//! a panic. Every file it gives lies in the directory listed: its URL is the directory's
//! followed by one path segment, and the name it is saved under is one file name (not empty,
//! `.` or `..`, no `/` or NUL).
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_transfer::engine::parse_listing;

const BASE: &str = "http://files.example/data/";

fuzz_target!(|data: &[u8]| {
    let body = String::from_utf8_lossy(data);
    for json in [false, true] {
        if let Ok(l) = parse_listing(BASE, &body, json) {
            for f in &l.files {
                let url = &f.url;
                let rest = url.strip_prefix(BASE).unwrap_or_else(|| {
                    panic!("{url} (from a listing of {BASE}) is outside the directory")
                });
                assert!(
                    !rest.is_empty() && !rest.contains(['/', '?', '#']),
                    "{url} is not a file of {BASE}"
                );
                let name = &f.name;
                assert!(
                    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']),
                    "{url} is saved as {name:?}, outside the output directory"
                );
            }
        }
    }
});
