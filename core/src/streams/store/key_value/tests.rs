use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::serde::{I64Serde, StringSerde};
use crate::streams::store::{InMemoryBytesStore, LayerConfig, LayeredKeyValueStore, Scratch};

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
    Prefix(Vec<u8>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct short keys, so that operations meet.
    proptest::collection::vec(0u8..4, 0..3)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (key(), proptest::collection::vec(any::<u8>(), 0..4)).prop_map(|(k, v)| Op::Put(k, v)),
        key().prop_map(Op::Delete),
        key().prop_map(Op::Get),
        (key(), key()).prop_map(|(a, b)| Op::Range(a, b)),
        key().prop_map(Op::Prefix),
    ]
}

fn pairs(entries: Vec<(Bytes, Bytes)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

proptest! {
    /// The key-value store in memory answers every operation as a `BTreeMap` does, and
    /// replaying its changelog into an empty store rebuilds the same contents.
    #[test]
    fn the_in_memory_store_behaves_as_a_btreemap(ops in proptest::collection::vec(op(), 0..60)) {
        let mut store = LayeredKeyValueStore::in_memory("counts");
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    store.put(Bytes::from(k.clone()), Some(Bytes::from(v.clone())));
                    model.insert(k, v);
                }
                Op::Delete(k) => {
                    store.put(Bytes::from(k.clone()), None);
                    model.remove(&k);
                }
                Op::Get(k) => {
                    prop_assert_eq!(store.get(&k).map(|v| v.to_vec()), model.get(&k).cloned());
                }
                Op::Range(a, b) => {
                    let expected: Vec<_> = model
                        .iter()
                        .filter(|(k, _)| **k >= a && **k <= b)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    prop_assert_eq!(pairs(store.range(&a, &b)), expected);
                }
                Op::Prefix(p) => {
                    let expected: Vec<_> = model
                        .iter()
                        .filter(|(k, _)| k.starts_with(&p))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    prop_assert_eq!(pairs(store.prefix_scan(&p)), expected);
                }
            }
            prop_assert_eq!(store.len(), model.len());
        }
        let all: Vec<_> = model.into_iter().collect();
        prop_assert_eq!(pairs(store.all()), all.clone());
        let mut rebuilt = LayeredKeyValueStore::in_memory("counts");
        for record in store.layers_mut().take_changelog() {
            rebuilt.restore(record);
        }
        rebuilt.layers_mut().commit(None);
        prop_assert_eq!(pairs(rebuilt.all()), all);
        prop_assert!(store.layers_mut().take_changelog().is_empty());
    }
}

#[test]
fn the_typed_view_serializes_keys_and_values_and_logs_every_write() {
    let mut inner = LayeredKeyValueStore::in_memory("counts");
    let serdes = KeyValueSerdes {
        keys: Arc::new(StringSerde),
        values: Arc::new(I64Serde),
    };
    let mut scratch = Scratch::default();
    let mut counts = KeyValueStore::new(&mut inner, &serdes, &mut scratch);
    counts.put(&"b".to_string(), Some(&2)).unwrap();
    counts.put(&"a".to_string(), Some(&1)).unwrap();
    counts.put(&"c".to_string(), Some(&3)).unwrap();
    assert_eq!(counts.get(&"a".to_string()).unwrap(), Some(1));
    assert_eq!(counts.delete(&"c".to_string()).unwrap(), Some(3));
    assert_eq!(counts.get(&"c".to_string()).unwrap(), None);
    assert_eq!(
        counts.range(&"a".to_string(), &"b".to_string()).unwrap(),
        [("a".to_string(), 1), ("b".to_string(), 2)]
    );
    let changelog = counts.bytes().layers_mut().take_changelog();
    assert_eq!(changelog.len(), 4);
    assert_eq!(
        changelog[3],
        ChangelogRecord {
            key: Bytes::from("c"),
            value: None
        }
    );
    assert_eq!(changelog[1].value.as_deref(), Some(&1i64.to_be_bytes()[..]));
}

#[test]
fn a_store_without_logging_keeps_no_changelog() {
    let mut store = LayeredKeyValueStore::new(
        "quiet",
        Box::new(InMemoryBytesStore::new()),
        LayerConfig::default(),
    );
    store.put(Bytes::from("k"), Some(Bytes::from("v")));
    assert_eq!(store.get(b"k"), Some(Bytes::from("v")));
    assert!(store.layers_mut().take_changelog().is_empty());
}
