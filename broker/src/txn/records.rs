//! The records of `__transaction_state`, in Kafka's own layout (`TransactionLogKey` version 0,
//! `TransactionLogValue` version 0), so the topic reads the same as Kafka's: the key is the
//! transactional id; the value is the producer id and epoch, the timeout, the state, the
//! partitions of the transaction and two timestamps. A null value deletes the entry.

use bytes::{BufMut, Bytes, BytesMut};

use super::state::{TxnMetadata, TxnState};
use crate::internal_records::{put_string, Reader};

/// The key of a transactional id's record.
pub(crate) fn encode_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    put_string(&mut buf, transactional_id);
    buf.freeze()
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
pub(crate) fn encode_value(txn: &TxnMetadata) -> Bytes {
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
        buf.put_i32(topics.len() as i32);
        for (topic, partitions) in topics {
            put_string(&mut buf, topic);
            buf.put_i32(partitions.len() as i32);
            for p in partitions {
                buf.put_i32(p);
            }
        }
    }
    buf.put_i64(txn.last_update_ms);
    buf.put_i64(txn.start_ms);
    buf.freeze()
}

/// A stored transaction state; `None` if the bytes are not one.
pub(crate) fn decode_value(bytes: &[u8]) -> Option<TxnMetadata> {
    let mut r = Reader(bytes);
    // Version 1 (Kafka 4) adds tagged fields at the end, which are not needed here.
    if !(0..=1).contains(&r.i16()?) {
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
        let count = r.i32()?;
        if count < 0 || count as usize > r.0.len() / 4 {
            return None;
        }
        for _ in 0..count {
            partitions.insert((topic.clone(), r.i32()?));
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
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
        let back = decode_value(&encode_value(&txn)).unwrap();
        assert_eq!(back.producer_id, 42);
        assert_eq!(back.producer_epoch, 3);
        assert_eq!(back.state, TxnState::Ongoing);
        assert_eq!(back.partitions, txn.partitions);
        assert_eq!(
            (back.start_ms, back.last_update_ms),
            (txn.start_ms, txn.last_update_ms)
        );
        assert_eq!(
            decode_key(&encode_key("copier-1")).as_deref(),
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
        assert_eq!(hex(&encode_value(&txn)), value);
        assert_eq!(hex(&encode_key("copier-1")), "00000008636f706965722d31");
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
