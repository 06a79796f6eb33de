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
