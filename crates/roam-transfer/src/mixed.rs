//! Mixed-size datasets (the FastHLA paper, Algorithm 1 as the spec reconstructs it): files of very
//! different sizes want different parameters (many small files want concurrency, a few large
//! ones parallelism), so the files are clustered by size, each cluster gets its own parameters,
//! and if the clusters' channels (cc × p each) add up to more than the user allows, each
//! cluster's share is scaled down in proportion to its bytes.
//!
//! Clustering: the files sorted by size are cut where neighbouring sizes differ by more than
//! [`GAP`] times (at most [`MAX_CLUSTERS`] clusters, cut at the widest such gaps): a dataset of
//! 100 KB pages and 3 MB images splits in two, one of similar files stays whole.

use crate::params::Params;

/// Neighbouring sizes further apart than this factor start a new cluster.
pub const GAP: f64 = 4.0;
/// Most clusters a dataset is cut into.
pub const MAX_CLUSTERS: usize = 4;

/// Files of similar size and the parameters they are moved with.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeCluster {
    /// Indices into the dataset.
    pub files: Vec<usize>,
    /// Their total size, bytes.
    pub bytes: u64,
    /// Their mean size, bytes.
    pub mean_size: f64,
    /// The parameters for them.
    pub params: Params,
}

/// Cluster `sizes` by size, give each cluster `params_for(mean size, file count)`, and scale the
/// clusters down so that their channels add up to at most `max_channels` (each keeps at least
/// one): concurrency shrinks first, parallelism only once concurrency is 1.
pub fn plan(
    sizes: &[u64],
    params_for: impl Fn(f64, usize) -> Params,
    max_channels: u32,
) -> Vec<SizeCluster> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    // Gaps between neighbours, widest first, that exceed GAP.
    let ratio = |i: usize| (sizes[order[i + 1]].max(1) as f64) / (sizes[order[i]].max(1) as f64);
    let mut cuts: Vec<usize> = (0..order.len().saturating_sub(1))
        .filter(|&i| ratio(i) > GAP)
        .collect();
    cuts.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)));
    cuts.truncate(MAX_CLUSTERS - 1);
    cuts.sort_unstable();
    let mut clusters = Vec::new();
    let mut start = 0;
    for end in cuts.iter().map(|c| c + 1).chain([order.len()]) {
        if end > start {
            let files: Vec<usize> = order[start..end].to_vec();
            let bytes = files.iter().fold(0u64, |t, &i| t.saturating_add(sizes[i]));
            let mean_size = bytes as f64 / files.len() as f64;
            let params = params_for(mean_size, files.len());
            clusters.push(SizeCluster {
                files,
                bytes,
                mean_size,
                params,
            });
        }
        start = end;
    }
    let max = max_channels.max(clusters.len() as u32);
    scale(&mut clusters, max);
    clusters
}

/// Scale the clusters' channels down to `max` in all, each cluster to its share of the bytes.
fn scale(clusters: &mut [SizeCluster], max: u32) {
    // Saturating: parameters come checked ([`Params::validate`]), but a product of two u32
    // must not be what brings a client down if one was not.
    let channels = |p: &Params| p.cc.saturating_mul(p.p);
    let total = clusters
        .iter()
        .fold(0u32, |t, c| t.saturating_add(channels(&c.params)));
    if total <= max {
        return;
    }
    let bytes = clusters
        .iter()
        .fold(0u64, |t, c| t.saturating_add(c.bytes))
        .max(1);
    for c in clusters.iter_mut() {
        let share = ((max as f64 * c.bytes as f64 / bytes as f64).floor() as u32).max(1);
        let want = channels(&c.params);
        if want <= share {
            continue;
        }
        // Concurrency first, then parallelism.
        let cc = (share / c.params.p.max(1)).max(1);
        let p = if cc == 1 {
            share.clamp(1, c.params.p.max(1))
        } else {
            c.params.p
        };
        c.params.cc = cc.min(c.params.cc);
        c.params.p = p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_size(mean: f64, _count: usize) -> Params {
        if mean < 1e6 {
            Params {
                cc: 16,
                p: 1,
                bs: 65536,
                ..Params::default()
            }
        } else {
            Params {
                cc: 4,
                p: 4,
                bs: 65536,
                ..Params::default()
            }
        }
    }

    #[test]
    fn pages_and_images_split_into_two_clusters() {
        let mut sizes: Vec<u64> = (0..20).map(|i| 56_000 + i * 5_000).collect();
        sizes.extend((0..5).map(|i| 2_000_000 + i * 300_000));
        let c = plan(&sizes, by_size, 1000);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].files.len(), 20);
        assert_eq!(c[1].files.len(), 5);
        assert_eq!((c[0].params.cc, c[1].params.p), (16, 4));
        // Similar files stay together.
        assert_eq!(plan(&[100, 120, 150, 300], by_size, 100).len(), 1);
        assert!(plan(&[], by_size, 10).is_empty());
    }

    #[test]
    fn channels_are_scaled_down_by_bytes_to_the_limit() {
        let mut sizes: Vec<u64> = vec![100_000; 20]; // 2 MB of pages
        sizes.extend([8_000_000; 2]); // 16 MB of images
        let c = plan(&sizes, by_size, 10);
        let channels: u32 = c.iter().map(|x| x.params.cc * x.params.p).sum();
        assert!(channels <= 10, "{c:?}");
        // The images have 8/9 of the bytes: most of the channels.
        assert!(
            c[1].params.cc * c[1].params.p > c[0].params.cc * c[0].params.p,
            "{c:?}"
        );
        assert!(c.iter().all(|x| x.params.cc >= 1 && x.params.p >= 1));
    }
}
