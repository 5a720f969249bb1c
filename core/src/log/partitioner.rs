//! The Java client's partitioners, so that eddy and every Java application put a key in the
//! same partition: murmur2 for keyed records, a sticky choice for records without a key.

/// Murmur2 as `org.apache.kafka.common.utils.Utils.murmur2` computes it, bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition the Java client's default partitioner picks for a key:
/// `toPositive(murmur2(key)) % partitions`.
///
/// # Panics
/// If `partitions` is not positive.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) & 0x7fff_ffff) % partitions
}

/// The choice of partition for records without a key (KIP-480): all of them go to one
/// partition until the batch being built there is sent, then the next batch goes to another,
/// chosen at random. Batches fill up instead of being spread thin over every partition.
///
/// The partitioner is a pure state machine: the producer tells it when a batch was completed,
/// and it draws from a small deterministic generator seeded by the caller.
#[derive(Debug, Clone)]
pub struct StickyPartitioner {
    current: Option<i32>,
    state: u64,
}

impl StickyPartitioner {
    /// A partitioner whose random choices follow from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            current: None,
            // xorshift must not start at zero.
            state: seed | 1,
        }
    }

    /// The partition for the next record without a key, among `partitions` partitions.
    ///
    /// # Panics
    /// If `partitions` is not positive.
    pub fn partition(&mut self, partitions: i32) -> i32 {
        assert!(partitions > 0, "a topic has at least one partition");
        match self.current {
            Some(p) if p < partitions => p,
            _ => {
                let p = self.draw(partitions, None);
                self.current = Some(p);
                p
            }
        }
    }

    /// The partition records without a key go to now, if one was chosen.
    pub fn current(&self) -> Option<i32> {
        self.current
    }

    /// The batch of the current partition was completed: the next record without a key goes
    /// to another partition, if there is another.
    pub fn batch_completed(&mut self, partitions: i32) {
        let previous = self.current;
        self.current = (partitions > 0).then(|| self.draw(partitions, previous));
    }

    fn draw(&mut self, partitions: i32, avoid: Option<i32>) -> i32 {
        loop {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let p = (self.state % partitions as u64) as i32;
            if partitions == 1 || Some(p) != avoid {
                return p;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (key, Utils.murmur2(key), partition of 6, partition of 100), printed by the Java client
    /// 4.4.0 (`org.apache.kafka.common.utils.Utils`).
    const JAVA_VECTORS: &[(&str, i32, i32, i32)] = &[
        ("", 275646681, 3, 81),
        ("a", -1563381124, 4, 24),
        ("ab", 316155434, 2, 34),
        ("abc", 479470107, 3, 7),
        ("21", -973932308, 0, 40),
        ("foobar", -790332482, 0, 66),
        ("key-0", 29210041, 1, 41),
        ("key-1", 193331640, 0, 40),
        ("order-1234", 202518744, 0, 44),
        ("a-little-bit-long-string", -985981536, 2, 12),
        (
            "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58897971,
            5,
            77,
        ),
        ("\u{e9}t\u{e9} \u{2603}", 265277273, 5, 73),
    ];

    #[test]
    fn murmur2_matches_the_java_client() {
        for &(key, hash, p6, p100) in JAVA_VECTORS {
            assert_eq!(murmur2(key.as_bytes()), hash, "murmur2({key:?})");
            assert_eq!(partition_for_key(key.as_bytes(), 6), p6, "{key:?} of 6");
            assert_eq!(
                partition_for_key(key.as_bytes(), 100),
                p100,
                "{key:?} of 100"
            );
        }
        let all_bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(murmur2(&all_bytes), -1948347274);
    }

    #[test]
    fn sticky_partitioner_sticks_until_a_batch_completes() {
        let mut sticky = StickyPartitioner::new(42);
        let first = sticky.partition(8);
        assert!((0..8).contains(&first));
        for _ in 0..100 {
            assert_eq!(sticky.partition(8), first);
        }
        sticky.batch_completed(8);
        let second = sticky.partition(8);
        assert_ne!(
            second, first,
            "a completed batch moves to another partition"
        );
        assert!((0..8).contains(&second));
    }

    #[test]
    fn sticky_partitioner_spreads_batches_and_follows_a_shrinking_topic() {
        let mut sticky = StickyPartitioner::new(7);
        let mut seen = [0u32; 4];
        for _ in 0..400 {
            seen[sticky.partition(4) as usize] += 1;
            sticky.batch_completed(4);
        }
        assert!(seen.iter().all(|&n| n > 50), "uneven spread: {seen:?}");
        let mut one = StickyPartitioner::new(3);
        assert_eq!(one.partition(1), 0);
        one.batch_completed(1);
        assert_eq!(one.partition(1), 0);
    }
}
