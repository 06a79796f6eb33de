//! Fuzz the HLA server's upload path (`roam_transfer::server`): an arbitrary `POST /logs` body
//! is parsed (`parse_lines`, the syntax; `parse_upload`, what the server takes) into records
//! or refused with a reason, never a panic; records re-encoded as the uploader writes them
//! (`serde_json`, one a line) parse to the same records; and what an accepted upload can make
//! the server do, learn (`learn`), finishes without a panic and gives an update that a device
//! takes whole: it parses as an `Update` and `Update::sanitize` drops nothing of it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_transfer::broker::Update;
use roam_transfer::hla::Record;
use roam_transfer::model::Kind;
use roam_transfer::server::{learn, parse_lines, parse_upload};

fuzz_target!(|data: &[u8]| {
    let Ok(records) = parse_lines(data) else {
        assert!(parse_upload(data).is_err(), "an upload that does not parse is refused");
        return;
    };
    let Ok(accepted) = parse_upload(data) else {
        return check_round_trip(&records);
    };
    assert_eq!(accepted, records);
    for r in &accepted {
        if let Err(e) = r.validate() {
            panic!("an accepted record is invalid: {e}");
        }
    }
    // The learner by the input's length: each gets its share of the inputs.
    let kind = Kind::ALL[data.len() % Kind::ALL.len()];
    let u = learn(&accepted, kind).expect("accepted records are learnt from");
    let served = serde_json::to_vec(&u).expect("an update serialises");
    let mut fetched: Update = serde_json::from_slice(&served).expect("the served update parses");
    let dropped = fetched.sanitize();
    assert!(dropped.is_empty(), "a device drops of the update: {dropped:?}");
    // Last, so that a round trip's failure leaves the learning fuzzed all the same.
    check_round_trip(&records);
});

fn check_round_trip(records: &[Record]) {
    let mut again = Vec::new();
    for r in records {
        again.extend(serde_json::to_vec(r).expect("a record serialises"));
        again.push(b'\n');
    }
    let back = parse_lines(&again).expect("re-encoded records parse");
    assert_eq!(back, records, "records re-encoded parse to the same records");
}
