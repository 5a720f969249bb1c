//! The Fetch response (v4–v12) encoded by hand as a list of parts: encoded fields, and the
//! file ranges of stored batches between them, so the batches go from the page cache to the
//! socket with `sendfile` and never through the broker's memory. Its bytes equal what the
//! codec writes for the same response (a test holds it to that).

use bytes::{BufMut, Bytes, BytesMut};

use crate::storage::FileRange;

/// A piece of a response frame.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// Bytes to write.
    Bytes(Bytes),
    /// Part of a segment file to send as it is.
    File(FileRange),
}

/// The records of one partition in a fetch response.
#[derive(Debug, Clone)]
pub(crate) enum Records {
    /// Batches in memory.
    Bytes(Bytes),
    /// Batches in a segment file.
    File(FileRange),
}

impl Records {
    fn len(&self) -> usize {
        match self {
            Records::Bytes(b) => b.len(),
            Records::File(range) => range.len as usize,
        }
    }
}

/// One partition's answer.
#[derive(Debug, Clone)]
pub(crate) struct PartitionAnswer {
    pub(crate) index: i32,
    pub(crate) error_code: i16,
    pub(crate) high_watermark: i64,
    pub(crate) last_stable_offset: i64,
    pub(crate) log_start_offset: i64,
    /// `None` is written as a null array (read_uncommitted).
    pub(crate) aborted_transactions: Option<Vec<(i64, i64)>>,
    pub(crate) records: Records,
}

/// One topic's answers.
#[derive(Debug, Clone)]
pub(crate) struct TopicAnswer {
    pub(crate) name: Bytes,
    pub(crate) partitions: Vec<PartitionAnswer>,
}

/// Writes the response frame (size, header and body) as parts.
pub(crate) fn encode(correlation_id: i32, version: i16, topics: &[TopicAnswer]) -> Vec<Part> {
    let flexible = version >= 12;
    let mut parts = Vec::new();
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0); // the size, filled in at the end
    buf.put_i32(correlation_id);
    if flexible {
        buf.put_u8(0); // response header tagged fields
    }
    buf.put_i32(0); // throttle_time_ms
    if version >= 7 {
        buf.put_i16(0); // error_code
        buf.put_i32(0); // session_id: no fetch session
    }
    put_len(&mut buf, topics.len(), flexible);
    let mut size = 0usize;
    for topic in topics {
        if flexible {
            put_unsigned_varint(&mut buf, topic.name.len() as u32 + 1);
        } else {
            buf.put_i16(topic.name.len() as i16);
        }
        buf.extend_from_slice(&topic.name);
        put_len(&mut buf, topic.partitions.len(), flexible);
        for p in &topic.partitions {
            buf.put_i32(p.index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            buf.put_i64(p.last_stable_offset);
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            match &p.aborted_transactions {
                None if flexible => buf.put_u8(0),
                None => buf.put_i32(-1),
                Some(aborted) => {
                    put_len(&mut buf, aborted.len(), flexible);
                    for &(producer_id, first_offset) in aborted {
                        buf.put_i64(producer_id);
                        buf.put_i64(first_offset);
                        if flexible {
                            buf.put_u8(0);
                        }
                    }
                }
            }
            if version >= 11 {
                buf.put_i32(-1); // preferred_read_replica
            }
            let len = p.records.len();
            if flexible {
                put_unsigned_varint(&mut buf, len as u32 + 1);
            } else {
                buf.put_i32(len as i32);
            }
            if len > 0 {
                size += buf.len();
                parts.push(Part::Bytes(buf.split().freeze()));
                size += len;
                parts.push(match &p.records {
                    Records::Bytes(b) => Part::Bytes(b.clone()),
                    Records::File(range) => Part::File(range.clone()),
                });
            }
            if flexible {
                buf.put_u8(0); // partition tagged fields
            }
        }
        if flexible {
            buf.put_u8(0); // topic tagged fields
        }
    }
    if flexible {
        buf.put_u8(0); // response tagged fields
    }
    size += buf.len();
    parts.push(Part::Bytes(buf.freeze()));
    // The frame's size excludes its own four bytes; it sits at the front of the first part.
    let frame_size = (size - 4) as i32;
    if let Some(Part::Bytes(first)) = parts.first_mut() {
        let mut with_size = BytesMut::from(&first[..]);
        with_size[..4].copy_from_slice(&frame_size.to_be_bytes());
        *first = with_size.freeze();
    }
    parts
}

/// An array's length.
fn put_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_unsigned_varint(buf, len as u32 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

fn put_unsigned_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{FetchResponse, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    use super::*;
    use crate::handler::RequestContext;

    fn flatten(parts: &[Part]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|p| match p {
                Part::Bytes(b) => b.to_vec(),
                Part::File(_) => panic!("no files in this test"),
            })
            .collect()
    }

    fn arb_partition() -> impl Strategy<Value = PartitionAnswer> {
        (
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i64>(),
            proptest::option::of(proptest::collection::vec(
                (any::<i64>(), any::<i64>()),
                0..3,
            )),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(
                |(index, error_code, hw, lso, aborted, records)| PartitionAnswer {
                    index,
                    error_code,
                    high_watermark: hw,
                    last_stable_offset: lso,
                    log_start_offset: hw / 2,
                    aborted_transactions: aborted,
                    records: Records::Bytes(Bytes::from(records)),
                },
            )
    }

    proptest! {
        #[test]
        fn equals_the_codecs_encoding(
            version in 4i16..=12,
            correlation_id: i32,
            topics in proptest::collection::vec(
                ("[a-z]{1,12}", proptest::collection::vec(arb_partition(), 0..4)), 0..3),
        ) {
            let answers: Vec<TopicAnswer> = topics
                .iter()
                .map(|(name, partitions)| TopicAnswer {
                    name: Bytes::from(name.clone()),
                    partitions: partitions.clone(),
                })
                .collect();
            let response = FetchResponse::default().with_responses(
                topics
                    .iter()
                    .map(|(name, partitions)| {
                        FetchableTopicResponse::default()
                            .with_topic(TopicName(StrBytes::from_string(name.clone())))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|p| {
                                        let mut data = PartitionData::default()
                                            .with_partition_index(p.index)
                                            .with_error_code(p.error_code)
                                            .with_high_watermark(p.high_watermark)
                                            .with_last_stable_offset(p.last_stable_offset)
                                            .with_aborted_transactions(p.aborted_transactions.as_ref().map(|a| {
                                                a.iter()
                                                    .map(|&(id, first)| {
                                                        AbortedTransaction::default()
                                                            .with_producer_id(ProducerId(id))
                                                            .with_first_offset(first)
                                                    })
                                                    .collect()
                                            }))
                                            .with_records(Some(match &p.records {
                                                Records::Bytes(b) => b.clone(),
                                                Records::File(_) => unreachable!(),
                                            }));
                                        if version >= 5 {
                                            data = data.with_log_start_offset(p.log_start_offset);
                                        }
                                        data
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            let ctx = RequestContext {
                api: kafka_protocol::messages::ApiKey::Fetch,
                version,
                correlation_id,
                client_id: None,
                peer: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            };
            let expected = ctx.encode(&response).unwrap();
            prop_assert_eq!(flatten(&encode(correlation_id, version, &answers)), expected.to_vec());
        }
    }
}
