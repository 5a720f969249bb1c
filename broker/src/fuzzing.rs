//! Entry points for the coverage-guided fuzz targets in `fuzz/` (feature `fuzzing`, not for
//! applications): what a socket or a file hands the broker, driven the way the broker drives
//! it. Each function returns normally for any input; a panic is a finding.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::config::BrokerConfig;
use crate::group::records::{GroupValue, OffsetValue, OffsetsKey};
use crate::handler;
use crate::state::BrokerState;
use crate::txn::records as txn_records;

/// A broker's state on a data directory, to hand request frames to.
pub struct Requests {
    state: Arc<BrokerState>,
    runtime: tokio::runtime::Runtime,
}

impl Requests {
    /// A broker on `dir`, with a topic `t` of two partitions to aim requests at.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let config = BrokerConfig {
            data_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        };
        let state = BrokerState::open(config, ("127.0.0.1".into(), 9092))?;
        if state.metadata.topic("t").is_none() {
            state
                .create_topic("t", 2, Default::default(), false)
                .map_err(std::io::Error::other)?;
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Self {
            state: Arc::new(state),
            runtime,
        })
    }

    /// Decodes one request frame (without its size) and runs the part of its handler that
    /// runs before the connection reads its next request (a produce's appends included), as a
    /// connection does. What the reply then waits for is not awaited.
    pub fn handle(&self, frame: &[u8]) {
        let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 5555));
        self.runtime.block_on(async {
            let mut reply = handler::handle(&self.state, Bytes::copy_from_slice(frame), peer);
            while let Ok(handler::Reply::InOrder(work)) = reply {
                reply = work.await;
            }
        });
    }
}

/// Decodes a record of `__consumer_offsets` or `__transaction_state` as the coordinators do
/// when they replay their topics; whatever decodes must encode back to the same bytes' meaning.
pub fn coordinator_record(key: &[u8], value: &[u8]) {
    if let Some(decoded) = OffsetsKey::decode(key) {
        let again = decoded.encode().expect("a decoded key encodes");
        assert_eq!(OffsetsKey::decode(&again).as_ref(), Some(&decoded));
    }
    if let Some(decoded) = OffsetValue::decode(value) {
        let again = decoded.encode().expect("a decoded offset encodes");
        assert_eq!(OffsetValue::decode(&again).as_ref(), Some(&decoded));
    }
    if let Some(decoded) = GroupValue::decode(value) {
        let again = decoded.encode().expect("a decoded group encodes");
        assert_eq!(GroupValue::decode(&again).as_ref(), Some(&decoded));
    }
    if let Some(id) = txn_records::decode_key(key) {
        let again = txn_records::encode_key(&id).expect("a decoded id encodes");
        assert_eq!(
            txn_records::decode_key(&again).as_deref(),
            Some(id.as_str())
        );
    }
    if let Some(decoded) = txn_records::decode_value(value) {
        let again = txn_records::encode_value(&decoded).expect("a decoded state encodes");
        let back = txn_records::decode_value(&again).expect("an encoded state decodes");
        assert_eq!(
            (
                back.producer_id,
                back.producer_epoch,
                back.state,
                &back.partitions
            ),
            (
                decoded.producer_id,
                decoded.producer_epoch,
                decoded.state,
                &decoded.partitions
            )
        );
    }
}
