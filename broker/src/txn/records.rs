//! The records of `__transaction_state`, in Kafka's own layout (`TransactionLogKey` version 0,
//! `TransactionLogValue` version 0), so the topic reads the same as Kafka's: the key is the
//! transactional id; the value is the producer id and epoch, the timeout, the state, the
//! partitions of the transaction and two timestamps. A null value deletes the entry.

use bytes::{BufMut, Bytes, BytesMut};

use super::state::{TxnMetadata, TxnState};
use crate::internal_records::{i32_len, put_string, Reader, TooLong};

/// The key of a transactional id's record.
pub(crate) fn encode_key(transactional_id: &str) -> Result<Bytes, TooLong> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    put_string(&mut buf, "transactional id", transactional_id)?;
    Ok(buf.freeze())
}

/// The transactional id a key names.
pub(crate) fn decode_key(bytes: &[u8]) -> Option<String> {
    let mut r = Reader(bytes);
    if r.i16()? != 0 {
        return None;
    }
    let id = r.string()?;
    r.is_empty().then_some(id)
}

/// A transaction's state as stored.
pub(crate) fn encode_value(txn: &TxnMetadata) -> Result<Bytes, TooLong> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    buf.put_i64(txn.producer_id);
    buf.put_i16(txn.producer_epoch);
    buf.put_i32(txn.timeout_ms);
    buf.put_i8(txn.state.code());
    // Kafka writes a null list for the states without partitions.
    if txn.partitions.is_empty() {
        buf.put_i32(-1);
    } else {
        let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
        for (topic, partition) in &txn.partitions {
            match topics.last_mut() {
                Some((t, ps)) if *t == topic.as_str() => ps.push(*partition),
                _ => topics.push((topic.as_str(), vec![*partition])),
            }
        }
        buf.put_i32(i32_len("topics", topics.len())?);
        for (topic, partitions) in topics {
            put_string(&mut buf, "topic", topic)?;
            buf.put_i32(i32_len("partitions", partitions.len())?);
            for p in partitions {
                buf.put_i32(p);
            }
        }
    }
    buf.put_i64(txn.last_update_ms);
    buf.put_i64(txn.start_ms);
    Ok(buf.freeze())
}

/// A stored transaction state (`TransactionLogValue` version 0, every byte of it); `None` if
/// the bytes are not one. eddy writes version 0 only, and only eddy writes this topic.
pub(crate) fn decode_value(bytes: &[u8]) -> Option<TxnMetadata> {
    let mut r = Reader(bytes);
    if r.i16()? != 0 {
        return None;
    }
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state = TxnState::from_code(r.i8()?)?;
    let topics = r.i32()?;
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..topics.max(0) {
        let topic = r.string()?;
        let count = usize::try_from(r.i32()?)
            .ok()
            .filter(|&n| n <= r.0.len() / 4)?;
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32()?));
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    if !r.is_empty() {
        return None;
    }
    Some(TxnMetadata {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        start_ms,
        ..TxnMetadata::new(producer_id, timeout_ms)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut txn = TxnMetadata::new(42, 60_000);
        txn.producer_epoch = 3;
        txn.state = TxnState::Ongoing;
        txn.partitions.insert(("orders".into(), 2));
        txn.partitions.insert(("orders".into(), 0));
        txn.partitions.insert(("__consumer_offsets".into(), 17));
        txn.start_ms = 1_700_000_000_000;
        txn.last_update_ms = 1_700_000_000_500;
        let back = decode_value(&encode_value(&txn).unwrap()).unwrap();
        assert_eq!(back.producer_id, 42);
        assert_eq!(back.producer_epoch, 3);
        assert_eq!(back.state, TxnState::Ongoing);
        assert_eq!(back.partitions, txn.partitions);
        assert_eq!(
            (back.start_ms, back.last_update_ms),
            (txn.start_ms, txn.last_update_ms)
        );
        assert_eq!(
            decode_key(&encode_key("copier-1").unwrap()).as_deref(),
            Some("copier-1")
        );
    }

    /// Bytes printed by Kafka 4.4's `MessageUtil.toVersionPrefixedBytes` for a
    /// `TransactionLogValue` v0 (producer 1000, epoch 5, timeout 60000, Ongoing, orders-0 and
    /// orders-1, updated at 2000, started at 1000) and a `TransactionLogKey` ("copier-1").
    #[test]
    fn kafka_layout() {
        let value = "000000000000000003e800050000ea60010000000100066f7264657273\
                     00000002000000000000000100000000000007d000000000000003e8";
        let mut txn = TxnMetadata::new(1000, 60_000);
        txn.producer_epoch = 5;
        txn.state = TxnState::Ongoing;
        txn.partitions.insert(("orders".into(), 1));
        txn.partitions.insert(("orders".into(), 0));
        txn.last_update_ms = 2000;
        txn.start_ms = 1000;
        assert_eq!(hex(&encode_value(&txn).unwrap()), value);
        assert_eq!(
            hex(&encode_key("copier-1").unwrap()),
            "00000008636f706965722d31"
        );
    }

    #[test]
    fn over_long_ids_are_refused_and_leftover_bytes_are_not_a_record() {
        let forged = format!("{}victim", "x".repeat(65_536));
        assert_eq!(encode_key(&forged).unwrap_err().field, "transactional id");
        let mut key = encode_key("copier-1").unwrap().to_vec();
        key.push(0);
        assert_eq!(decode_key(&key), None);
        let txn = TxnMetadata::new(7, 60_000);
        let mut value = encode_value(&txn).unwrap().to_vec();
        assert!(decode_value(&value).is_some());
        value.extend_from_slice(&[0, 0]);
        assert!(decode_value(&value).is_none(), "bytes left over");
        let mut v1 = encode_value(&txn).unwrap().to_vec();
        v1[1] = 1;
        assert!(
            decode_value(&v1).is_none(),
            "version 1 is flexible, not this layout"
        );
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    proptest::proptest! {
        #[test]
        fn garbage_never_panics(bytes: Vec<u8>) {
            let _ = decode_value(&bytes);
            let _ = decode_key(&bytes);
        }
    }
}
