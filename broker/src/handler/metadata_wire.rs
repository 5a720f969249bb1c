//! Metadata requests read, and responses written, one topic at a time: a request naming a
//! million topics is never held as a million decoded structs, nor its answer as a million
//! response structs. What the broker holds for a request is its frame, the set of distinct
//! topics it names and the encoded answer. The topics are decoded and encoded by the
//! protocol crate's own per-topic codecs; only the arrays around them and the response's
//! top-level fields are written here, and a test holds the bytes to what the codec writes for
//! the whole response.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{MetadataResponseBroker, MetadataResponseTopic};
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::types::MAX_COLLECTION_SIZE;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The topics a Metadata request names, kept encoded, and the fields after them.
#[derive(Debug)]
pub(super) struct WantedTopics {
    /// The encoded elements of the topics array; `None` asks for every topic.
    elements: Option<Bytes>,
    /// Where each element's topic id and name are in `elements`, in request order.
    positions: Vec<Position>,
    version: i16,
    /// Whether the request lets the broker create the topics it names.
    pub(super) allow_auto_topic_creation: bool,
}

/// Where one named topic is in the request: its topic id (v10 and later) at `at`, its name
/// (if not null) at `name`, as (start, length).
#[derive(Debug, Clone, Copy)]
struct Position {
    at: u32,
    name: Option<(u32, u32)>,
}

impl WantedTopics {
    /// Reads a Metadata request body (v1 and later), checking every topic as the codec does.
    pub(super) fn read(body: &mut Bytes, version: i16) -> anyhow::Result<Self> {
        let flexible = version >= 9;
        let count = if flexible {
            unsigned_varint(body)?.checked_sub(1).map(widen)
        } else {
            match i32_of(body)? {
                -1 => None,
                n => Some(
                    usize::try_from(n)
                        .map_err(|_| anyhow::anyhow!("Array length is negative ({n})"))?,
                ),
            }
        };
        let (elements, positions) = match count {
            None => (None, Vec::new()),
            Some(n) => {
                // Every element takes at least one byte: a count above the bytes left is
                // malformed, refused before anything is read for it.
                if n > body.remaining() {
                    anyhow::bail!(
                        "Array length {n} exceeds the {} bytes remaining",
                        body.remaining()
                    );
                }
                if n > MAX_COLLECTION_SIZE {
                    anyhow::bail!(
                        "Tried to read a collection of size {n}, which exceeds the maximum \
                         allowed size of {MAX_COLLECTION_SIZE}"
                    );
                }
                let elements = body.clone();
                let mut positions = Vec::with_capacity(n);
                for _ in 0..n {
                    let at = elements.len() - body.len();
                    positions.push(position(body, at, version)?);
                    // The codec checks the element (string lengths, UTF-8, tagged fields).
                    MetadataRequestTopic::decode(body, version)?;
                }
                let used = elements.len() - body.len();
                (Some(elements.slice(..used)), positions)
            }
        };
        // The fields after the topics, read by the codec behind an empty topics array.
        let mut rest = BytesMut::with_capacity(4 + body.len());
        if flexible {
            rest.put_u8(1);
        } else {
            rest.put_i32(0);
        }
        rest.extend_from_slice(body);
        let mut rest = rest.freeze();
        let tail = MetadataRequest::decode(&mut rest, version)?;
        body.advance(body.len() - rest.len());
        Ok(Self {
            elements,
            positions,
            version,
            allow_auto_topic_creation: tail.allow_auto_topic_creation,
        })
    }

    /// Whether the request asks for every topic.
    pub(super) fn all(&self) -> bool {
        self.elements.is_none()
    }

    /// The topics named, each once where first named (Kafka answers a set of names), in
    /// request order. Found by sorting the positions, not by a set of names: a request naming
    /// a million topics costs the broker a few bytes per topic beyond its frame.
    pub(super) fn distinct(&self) -> Distinct<'_> {
        let Some(elements) = &self.elements else {
            return Distinct {
                wanted: self,
                first: Vec::new(),
                next: 0,
            };
        };
        // By name, or by topic id for a null name (which before v10, when requests carry no
        // topic id, names nothing, and every such entry is the same).
        let key = |p: &Position| -> (bool, &[u8]) {
            let bytes = |range| elements.get(range).unwrap_or_default();
            match p.name {
                Some((start, len)) => (false, bytes(span(start, len))),
                None if self.version >= 10 => (true, bytes(span(p.at, 16))),
                None => (true, &[]),
            }
        };
        let mut order: Vec<u32> = (0..self.positions.len())
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        order.sort_unstable_by(|&a, &b| {
            let (pa, pb) = (
                &self.positions[span(a, 0).start],
                &self.positions[span(b, 0).start],
            );
            key(pa).cmp(&key(pb)).then(a.cmp(&b))
        });
        let mut first = vec![false; self.positions.len()];
        let mut previous: Option<(bool, &[u8])> = None;
        for &i in &order {
            let here = key(&self.positions[span(i, 0).start]);
            if previous != Some(here) {
                first[span(i, 0).start] = true;
            }
            previous = Some(here);
        }
        Distinct {
            wanted: self,
            first,
            next: 0,
        }
    }

    /// The topic named at `p` (its name was checked as UTF-8 when the request was read).
    fn topic_at(&self, elements: &Bytes, p: &Position) -> Option<MetadataRequestTopic> {
        let name = match p.name {
            Some((start, len)) => Some(TopicName(
                StrBytes::from_utf8(elements.slice(span(start, len))).ok()?,
            )),
            None => None,
        };
        let mut topic = MetadataRequestTopic::default().with_name(name);
        if self.version >= 10 {
            let id: [u8; 16] = elements.get(span(p.at, 16))?.try_into().ok()?;
            topic = topic.with_topic_id(uuid::Uuid::from_bytes(id));
        }
        Some(topic)
    }
}

/// The distinct topics of a request, decoded one at a time as they are answered.
#[derive(Debug)]
pub(super) struct Distinct<'a> {
    wanted: &'a WantedTopics,
    /// Whether each position is the first to name its topic.
    first: Vec<bool>,
    next: usize,
}

impl Distinct<'_> {
    /// How many distinct topics the request names.
    pub(super) fn how_many(&self) -> usize {
        self.first.iter().filter(|f| **f).count()
    }
}

impl Iterator for Distinct<'_> {
    type Item = MetadataRequestTopic;

    fn next(&mut self) -> Option<MetadataRequestTopic> {
        let elements = self.wanted.elements.as_ref()?;
        while self.next < self.first.len() {
            let i = self.next;
            self.next += 1;
            if self.first[i] {
                return self.wanted.topic_at(elements, &self.wanted.positions[i]);
            }
        }
        None
    }
}

/// The byte range of `len` bytes from `start`.
fn span(start: u32, len: u32) -> std::ops::Range<usize> {
    let start = widen(start);
    start..start.saturating_add(widen(len))
}

/// Where the topic id and name of the element at `at` (the front of `element`) are.
fn position(element: &Bytes, at: usize, version: i16) -> anyhow::Result<Position> {
    let mut ahead = element.clone();
    let mut name_at = at;
    if version >= 10 {
        if ahead.remaining() < 16 {
            anyhow::bail!("the request ends inside a topic id");
        }
        ahead.advance(16);
        name_at += 16;
    }
    let before = ahead.remaining();
    let len = if version >= 9 {
        unsigned_varint(&mut ahead)?.checked_sub(1).map(widen)
    } else {
        if ahead.remaining() < 2 {
            anyhow::bail!("the request ends inside a string length");
        }
        usize::try_from(ahead.get_i16()).ok()
    };
    let name = match len {
        Some(len) => {
            let start = name_at + (before - ahead.remaining());
            Some((u32::try_from(start)?, u32::try_from(len)?))
        }
        None => None,
    };
    Ok(Position {
        at: u32::try_from(at)?,
        name,
    })
}

/// A Metadata response frame written as its topics come.
#[derive(Debug)]
pub(super) struct ResponseWriter {
    frame: BytesMut,
    version: i16,
    /// Topics still to write, as the array's length promised.
    left: usize,
}

/// The response's fields other than its topics.
#[derive(Debug)]
pub(super) struct ResponseHead<'a> {
    pub(super) correlation_id: i32,
    pub(super) brokers: &'a [MetadataResponseBroker],
    pub(super) cluster_id: Option<&'a StrBytes>,
    pub(super) controller_id: i32,
}

impl ResponseWriter {
    /// Starts a v1–v12 response of `topics` topics: the frame's size, its header and every
    /// field before the topics.
    pub(super) fn new(
        version: i16,
        head: &ResponseHead<'_>,
        topics: usize,
    ) -> anyhow::Result<Self> {
        let flexible = version >= 9;
        let mut frame = BytesMut::with_capacity(256);
        frame.put_i32(0); // the size, once known
        frame.put_i32(head.correlation_id);
        if flexible {
            frame.put_u8(0); // the response header's tagged fields
        }
        if version >= 3 {
            frame.put_i32(0); // throttle_time_ms
        }
        put_array_len(&mut frame, head.brokers.len(), flexible)?;
        for broker in head.brokers {
            broker.encode(&mut frame, version)?;
        }
        if version >= 2 {
            put_nullable_string(&mut frame, head.cluster_id.map(|s| s.as_bytes()), flexible)?;
        }
        if version >= 1 {
            frame.put_i32(head.controller_id);
        }
        put_array_len(&mut frame, topics, flexible)?;
        Ok(Self {
            frame,
            version,
            left: topics,
        })
    }

    /// Writes the next topic.
    pub(super) fn topic(&mut self, topic: &MetadataResponseTopic) -> anyhow::Result<()> {
        self.left = self
            .left
            .checked_sub(1)
            .ok_or_else(|| anyhow::anyhow!("more topics than the response's array holds"))?;
        topic.encode(&mut self.frame, self.version)
    }

    /// The whole frame, size included.
    pub(super) fn finish(mut self) -> anyhow::Result<Bytes> {
        if self.left != 0 {
            anyhow::bail!("{} topics missing from the response", self.left);
        }
        if (8..=10).contains(&self.version) {
            self.frame.put_i32(i32::MIN); // cluster_authorized_operations: not asked for
        }
        if self.version >= 9 {
            self.frame.put_u8(0); // tagged fields
        }
        let size = i32::try_from(self.frame.len() - 4)?;
        self.frame[..4].copy_from_slice(&size.to_be_bytes());
        Ok(self.frame.freeze())
    }
}

fn widen(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn i32_of(buf: &mut Bytes) -> anyhow::Result<i32> {
    if buf.remaining() < 4 {
        anyhow::bail!("the request ends inside an array length");
    }
    Ok(buf.get_i32())
}

fn unsigned_varint(buf: &mut Bytes) -> anyhow::Result<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        if !buf.has_remaining() {
            anyhow::bail!("the request ends inside a varint");
        }
        let byte = buf.get_u8();
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    anyhow::bail!("a varint longer than 5 bytes")
}

fn put_unsigned_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

fn put_array_len(buf: &mut BytesMut, len: usize, flexible: bool) -> anyhow::Result<()> {
    if flexible {
        let len = u32::try_from(len)?
            .checked_add(1)
            .ok_or_else(|| anyhow::anyhow!("an array of {len} elements"))?;
        put_unsigned_varint(buf, len);
    } else {
        buf.put_i32(i32::try_from(len)?);
    }
    Ok(())
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&[u8]>, flexible: bool) -> anyhow::Result<()> {
    match (s, flexible) {
        (None, true) => buf.put_u8(0),
        (None, false) => buf.put_i16(-1),
        (Some(s), true) => put_unsigned_varint(buf, u32::try_from(s.len())? + 1),
        (Some(s), false) => buf.put_i16(i16::try_from(s.len())?),
    }
    if let Some(s) = s {
        buf.put_slice(s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::metadata_response::MetadataResponsePartition;
    use kafka_protocol::messages::{BrokerId, MetadataResponse, ResponseHeader};
    use kafka_protocol::protocol::HeaderVersion;

    use super::*;

    fn topics() -> Vec<MetadataResponseTopic> {
        let partition = |p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(1)])
        };
        vec![
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))
                .with_partitions(vec![partition(0), partition(1)]),
            MetadataResponseTopic::default()
                .with_error_code(3)
                .with_name(Some(TopicName(StrBytes::from_static_str("missing")))),
        ]
    }

    #[test]
    fn the_frame_is_what_the_codec_writes_for_the_whole_response() {
        let brokers = vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("localhost"))
            .with_port(9092)];
        let cluster_id = StrBytes::from_static_str("cluster");
        for version in 1..=12 {
            let mut expected = MetadataResponse::default()
                .with_brokers(brokers.clone())
                .with_topics(topics())
                .with_controller_id(BrokerId(1));
            if version >= 2 {
                expected = expected.with_cluster_id(Some(cluster_id.clone()));
            }
            let header = ResponseHeader::default().with_correlation_id(7);
            let header_version = MetadataResponse::header_version(version);
            let mut codec = BytesMut::new();
            codec.put_i32(0);
            header.encode(&mut codec, header_version).unwrap();
            expected.encode(&mut codec, version).unwrap();
            let size = i32::try_from(codec.len() - 4).unwrap();
            codec[..4].copy_from_slice(&size.to_be_bytes());

            let head = ResponseHead {
                correlation_id: 7,
                brokers: &brokers,
                cluster_id: Some(&cluster_id),
                controller_id: 1,
            };
            let mut writer = ResponseWriter::new(version, &head, 2).unwrap();
            for topic in topics() {
                writer.topic(&topic).unwrap();
            }
            assert_eq!(writer.finish().unwrap(), codec.freeze(), "v{version}");
        }
    }

    #[test]
    fn a_writer_holds_to_the_count_it_promised() {
        let head = ResponseHead {
            correlation_id: 1,
            brokers: &[],
            cluster_id: None,
            controller_id: 1,
        };
        assert!(ResponseWriter::new(12, &head, 1).unwrap().finish().is_err());
        let mut writer = ResponseWriter::new(12, &head, 1).unwrap();
        writer.topic(&topics()[0]).unwrap();
        assert!(writer.topic(&topics()[1]).is_err());
    }

    #[test]
    fn null_names_before_topic_ids_are_one_topic_and_no_panic() {
        // v9: two topics with null names (no topic id before v10), then the flags.
        let mut body = Bytes::from_static(&[3, 0, 0, 0, 0, 1, 0, 0, 0]);
        let wanted = WantedTopics::read(&mut body, 9).unwrap();
        assert!(body.is_empty());
        let distinct = wanted.distinct();
        assert_eq!(distinct.how_many(), 1);
        assert_eq!(distinct.map(|t| t.name).collect::<Vec<_>>(), [None]);
    }

    #[test]
    fn requests_read_as_the_codec_reads_them() {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        for version in 1..=12 {
            let named = |name: &'static str| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str(name))))
            };
            let by_id = |n: u8| {
                MetadataRequestTopic::default()
                    .with_name(None)
                    .with_topic_id(uuid::Uuid::from_bytes([n; 16]))
            };
            let mut cases = vec![
                (Some(vec![named("a"), named("b"), named("a")]), false),
                (
                    Some(vec![named("b"), named("ab"), named("b"), named("a")]),
                    true,
                ),
                (Some(vec![]), true),
                (None, true),
            ];
            if version >= 10 {
                cases.push((Some(vec![by_id(1), named("a"), by_id(2), by_id(1)]), true));
            }
            for (topics, auto) in cases {
                let request = MetadataRequest::default()
                    .with_topics(topics.clone())
                    .with_allow_auto_topic_creation(auto || version < 4);
                let mut body = BytesMut::new();
                request.encode(&mut body, version).unwrap();
                let mut body = body.freeze();
                let wanted = WantedTopics::read(&mut body, version).unwrap();
                assert!(body.is_empty(), "v{version}: {} bytes left", body.len());
                assert_eq!(wanted.allow_auto_topic_creation, auto || version < 4);
                assert_eq!(wanted.all(), topics.is_none());
                // Each topic once, where first named.
                let mut seen = Vec::new();
                let mut distinct = topics.clone().unwrap_or_default();
                distinct.retain(|t| {
                    // By name when it names one, by topic id otherwise.
                    let key = t.name.clone().map(|n| n.0).ok_or(t.topic_id);
                    let new = !seen.contains(&key);
                    seen.push(key);
                    new
                });
                let read = wanted.distinct();
                assert_eq!(read.how_many(), distinct.len(), "v{version}");
                assert_eq!(read.collect::<Vec<_>>(), distinct, "v{version}");
            }
        }
    }
}
