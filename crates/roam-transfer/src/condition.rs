//! A network condition: what a device knows before a transfer (round-trip time, bandwidth, the
//! dataset's mean file size), the features FastHLA's analysis clusters on and its models learn
//! from (the FastHLA paper: historical logs -> parameters per condition).

use serde::{Deserialize, Serialize};

/// A condition: what the device knows before a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// Round-trip time, ms.
    pub rtt_ms: f64,
    /// Bandwidth, Mbit/s.
    pub bandwidth_mbps: f64,
    /// Mean file size of the dataset, bytes.
    pub mean_file_bytes: f64,
}

impl Condition {
    /// The features the analysis clusters on and the models learn from.
    pub fn features(&self) -> [f64; 3] {
        [
            self.rtt_ms.max(0.01).log10(),
            self.bandwidth_mbps.max(0.001).log10(),
            self.mean_file_bytes.max(1.0).log10(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::hla::Record;

    /// The fuzzer's input (fuzz/regressions/hla_upload/): serde_json's default float parsing read
    /// its own output back one ULP off, so stored logs drifted each time they were written and
    /// read; the workspace enables `float_roundtrip`.
    #[test]
    fn a_record_written_and_read_back_is_the_same() {
        let line = include_str!("../../../fuzz/regressions/hla_upload/float-round-trip.jsonl");
        let r: Record = serde_json::from_str(line.trim()).unwrap();
        let again: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(
            r.energy_j_per_100mb.to_bits(),
            again.energy_j_per_100mb.to_bits()
        );
        assert_eq!(r.condition(), again.condition());
    }
}
