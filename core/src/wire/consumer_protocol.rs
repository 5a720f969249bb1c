//! The consumer protocol's assignment (`ConsumerProtocolAssignment`): what a group leader
//! gives each member in SyncGroup when the group's protocol type is `consumer`. The broker
//! never reads it; tools do, to show which member holds which partition.
//!
//! ```text
//! version: i16 | topics: [topic: string(i16 length), partitions: [i32]] | user_data: bytes (v0+)
//! ```

use super::WireError;

/// The partitions assigned to a member, by topic.
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<(String, Vec<i32>)>, WireError> {
    let mut r = bytes;
    let _version = take_i16(&mut r)?;
    let topics = take_count(&mut r, 6)?;
    let mut out = Vec::with_capacity(topics);
    for _ in 0..topics {
        let len = usize::try_from(take_i16(&mut r)?)
            .map_err(|_| WireError::Corrupt("a null topic in an assignment".into()))?;
        let name = take(&mut r, len)?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| WireError::Corrupt("a topic name that is not UTF-8".into()))?;
        let count = take_count(&mut r, 4)?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(i32::from_be_bytes(
                take(&mut r, 4)?.try_into().expect("4 bytes"),
            ));
        }
        out.push((name, partitions));
    }
    Ok(out)
}

/// Encodes an assignment (version 0, no user data), as a group leader's client does.
pub fn encode_assignment(topics: &[(String, Vec<i32>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (topic, partitions) in topics {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
        out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

fn take<'a>(r: &mut &'a [u8], n: usize) -> Result<&'a [u8], WireError> {
    if r.len() < n {
        return Err(WireError::Truncated("consumer protocol assignment"));
    }
    let (head, rest) = r.split_at(n);
    *r = rest;
    Ok(head)
}

fn take_i16(r: &mut &[u8]) -> Result<i16, WireError> {
    Ok(i16::from_be_bytes(take(r, 2)?.try_into().expect("2 bytes")))
}

/// A count of items of at least `min_size` bytes each, checked against what remains.
fn take_count(r: &mut &[u8], min_size: usize) -> Result<usize, WireError> {
    let n = i32::from_be_bytes(take(r, 4)?.try_into().expect("4 bytes"));
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= r.len() / min_size)
        .ok_or_else(|| WireError::Corrupt(format!("a count of {n} in an assignment")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_what_the_java_client_writes() {
        // ConsumerProtocol.serializeAssignment(new Assignment([orders-0, orders-2])) in the
        // Java client 4.4.0, version 0: topic "orders", partitions [0, 2], no user data.
        let java: &[u8] = &[
            0, 0, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's', 0, 0, 0, 2, 0, 0, 0, 0, 0,
            0, 0, 2, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(
            decode_assignment(java).unwrap(),
            vec![("orders".to_string(), vec![0, 2])]
        );
        assert_eq!(
            encode_assignment(&[("orders".to_string(), vec![0, 2])]),
            java
        );
    }

    proptest! {
        #[test]
        fn round_trips(topics in proptest::collection::vec(("[a-z]{1,10}", proptest::collection::vec(0i32..100, 0..5)), 0..4)) {
            prop_assert_eq!(decode_assignment(&encode_assignment(&topics))?, topics);
        }

        #[test]
        fn garbage_never_panics(bytes: Vec<u8>) {
            let _ = decode_assignment(&bytes);
        }
    }
}
