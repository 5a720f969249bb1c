use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use eddy_core::streams::store::{
    Checkpoint, InMemoryBytesStore, KeyValueBytesStore, LayerConfig, LayeredKeyValueStore,
};
use proptest::prelude::*;

use super::*;

fn tree(dir: &Path) -> sled::Tree {
    open(dir).unwrap().open_tree("counts").unwrap()
}

/// A key-value store of counts by name.
fn counts() -> StoreBuilder {
    StoreBuilder::key_value(
        "counts",
        eddy_core::serde::StringSerde,
        eddy_core::serde::I64Serde,
    )
}

fn contents(store: &dyn BytesStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut all = Vec::new();
    store.scan(Bound::Unbounded, Bound::Unbounded, &mut |k, v| {
        all.push((k.to_vec(), v.to_vec()));
        true
    });
    all
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Update(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Empty keys and 0xff bytes included: the entries' prefix must not show.
    proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xff)], 0..3)
}

fn op() -> impl Strategy<Value = Op> {
    let value = || proptest::collection::vec(any::<u8>(), 0..4);
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        key().prop_map(Op::Delete),
        (key(), value()).prop_map(|(k, v)| Op::Update(k, v)),
        key().prop_map(Op::Get),
        (key(), key()).prop_map(|(a, b)| Op::Range(a, b)),
        proptest::collection::vec((key(), proptest::option::of(value())), 0..4).prop_map(Op::Batch),
    ]
}

fn apply(store: &mut dyn BytesStore, op: &Op, offset: i64) -> Option<String> {
    match op {
        Op::Put(k, v) => store.put(k, v),
        Op::Delete(k) => store.delete(k),
        Op::Update(k, suffix) => store.update(k, &mut |old, out| {
            out.extend_from_slice(old.unwrap_or_default());
            out.extend_from_slice(suffix);
            !suffix.is_empty()
        }),
        Op::Get(k) => {
            let mut out = Vec::new();
            return Some(format!("{:?}", store.get_into(k, &mut out).then_some(out)));
        }
        Op::Range(a, b) => {
            let mut found = Vec::new();
            store.scan(Bound::Included(a), Bound::Excluded(b), &mut |k, v| {
                found.push((k.to_vec(), v.to_vec()));
                true
            });
            return Some(format!("{found:?}"));
        }
        Op::Batch(writes) => {
            let mut writes = writes.iter().map(|(k, v)| (&k[..], v.as_deref()));
            store.write_batch(&mut writes, Some(offset));
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The store in sled answers every operation as the store in memory does, and a store
    /// reopened over the same files holds the same entries and changelog offset.
    #[test]
    fn the_sled_store_answers_as_the_store_in_memory(
        ops in proptest::collection::vec(op(), 0..40),
        tiny_pages in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        // Pages of an entry or two, a sled batch each: every batch splits and joins pages.
        let size = if tiny_pages {
            PageSize { target: 6, max: 12, min: 3, most_batch_bytes: 1 }
        } else {
            PageSize::default()
        };
        let mut sled = SledBytesStore::with_page_size(tree(dir.path()), size, ScanLock::default());
        let mut memory = InMemoryBytesStore::new();
        for (i, op) in ops.iter().enumerate() {
            let offset = i64::try_from(i).unwrap();
            prop_assert_eq!(apply(&mut sled, op, offset), apply(&mut memory, op, offset));
            prop_assert_eq!(sled.len(), memory.len());
            prop_assert_eq!(sled.pages.as_ref().unwrap().check(), Ok(()));
        }
        prop_assert_eq!(contents(&sled), contents(&memory));
        prop_assert_eq!(sled.changelog_offset(), memory.changelog_offset());
        prop_assert_eq!(sled.failure(), None);
        sled.flush();
        drop(sled);
        let reopened = SledBytesStore::new(tree(dir.path()));
        prop_assert_eq!(contents(&reopened), contents(&memory));
        prop_assert_eq!(reopened.changelog_offset(), memory.changelog_offset());
    }
}

#[test]
fn a_store_written_one_entry_a_key_is_rewritten_as_pages_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let expected: Vec<(Vec<u8>, Vec<u8>)> = (0..3_000u32)
        .map(|i| {
            (
                i.to_be_bytes().to_vec(),
                vec![7; usize::try_from(i % 50).unwrap()],
            )
        })
        .collect();
    for (key, value) in &expected {
        let legacy: Vec<u8> = [&[paged::LEGACY_ENTRY][..], key].concat();
        tree.insert(legacy, &value[..]).unwrap();
    }
    tree.insert(CHANGELOG_OFFSET, &41i64.to_be_bytes()).unwrap();
    let store = SledBytesStore::new(tree.clone());
    assert_eq!(store.failure(), None);
    assert_eq!(store.changelog_offset(), Some(41));
    assert_eq!(contents(&store), expected);
    assert_eq!(store.pages.as_ref().unwrap().check(), Ok(()));
    assert_eq!(tree.scan_prefix([paged::LEGACY_ENTRY]).count(), 0);
    let pages = tree.scan_prefix([paged::PAGE]).count();
    assert!(pages > 1 && pages < 100, "{pages} pages");
}

#[test]
fn a_damaged_page_fails_the_store_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    tree.insert([paged::PAGE], &[9, 0, 0, 0, 1][..]).unwrap();
    let store = SledBytesStore::new(tree);
    assert!(!store.get_into(b"k", &mut Vec::new()));
    let failure = store.failure().expect("a failure");
    assert!(failure.contains("damaged"), "{failure}");
}

#[test]
fn a_damaged_changelog_offset_is_a_failure_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    tree.insert(CHANGELOG_OFFSET, &b"short"[..]).unwrap();
    let mut store = SledBytesStore::new(tree);
    let failure = store.failure().expect("a failure");
    assert!(failure.contains("5 bytes"), "{failure}");
    // A failed store reads nothing and keeps nothing.
    store.put(b"k", b"v");
    assert!(!store.get_into(b"k", &mut Vec::new()));
    assert!(SledBytesStore::failed("gone").failure().is_some());
}

#[test]
fn a_task_store_over_sled_keeps_only_committed_writes_under_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let stores = SledStores::new(dir.path());
    let definition = counts();
    let config = LayerConfig {
        logging: true,
        cache: None,
        write_buffer: true,
    };
    let mut store = LayeredKeyValueStore::new("counts", stores.inner("0_0", &definition), config);
    store.put_slice(b"a", Some(b"1"));
    store.layers_mut().commit(Some(1));
    store.layers_mut().checkpoint(Checkpoint::Wait);
    store.put_slice(b"a", Some(b"2"));
    store.layers_mut().commit(Some(2));
    store.put_slice(b"b", Some(b"3"));
    assert_eq!(store.get(b"a").as_deref(), Some(&b"2"[..]));
    // The transaction aborted: the store reads as its last commit left it.
    store.layers_mut().abort();
    assert_eq!(store.get(b"a").as_deref(), Some(&b"2"[..]));
    assert_eq!(store.get(b"b"), None);
    // A crash before the next checkpoint: sled holds the first interval, with its offset,
    // and never saw the third.
    drop(store);
    stores.close("0_0").unwrap();
    let reopened = stores.inner("0_0", &definition);
    assert_eq!(reopened.failure(), None);
    assert_eq!(contents(&*reopened), [(b"a".to_vec(), b"1".to_vec())]);
    assert_eq!(reopened.changelog_offset(), Some(1));
    assert!(stores.task_dir("0_0").is_dir());
}

#[test]
fn the_state_on_disk_is_found_with_the_offsets_its_stores_reached() {
    let dir = tempfile::tempdir().unwrap();
    let stores = SledStores::new(dir.path());
    let store = |name: &str| {
        StoreBuilder::key_value(
            name,
            eddy_core::serde::StringSerde,
            eddy_core::serde::I64Serde,
        )
    };
    let mut counts = stores.inner("0_1", &store("counts"));
    counts.write_batch(&mut std::iter::once((&b"a"[..], Some(&b"1"[..]))), Some(40));
    let mut totals = stores.inner("0_1", &store("totals"));
    totals.write_batch(&mut std::iter::empty(), Some(2));
    // A store that never committed reports no offset.
    let _unlogged = stores.inner("1_0", &store("seen"));
    drop((counts, totals, _unlogged));
    stores.close("0_1").unwrap();
    stores.close("1_0").unwrap();
    std::fs::create_dir(dir.path().join("not-a-store")).unwrap();

    let found = stores.offsets_on_disk();
    assert_eq!(
        found,
        [
            ("0_1".to_string(), vec![40, 2]),
            ("1_0".to_string(), vec![])
        ]
    );
    // Reading them leaves nothing open: a task's store opens again.
    let reopened = stores.inner("0_1", &store("counts"));
    assert_eq!(reopened.changelog_offset(), Some(40));
}

/// The child's side of the crash test: batches that set every key to the batch's number,
/// each with that number as its changelog offset, flushed now and then, until killed.
fn write_batches_until_killed(dir: &Path) {
    let mut store = SledBytesStore::new(tree(dir));
    for n in 1i64.. {
        let value = n.to_be_bytes();
        let keys: Vec<[u8; 2]> = (0..50u16).map(u16::to_be_bytes).collect();
        let mut writes = keys.iter().map(|k| (&k[..], Some(&value[..])));
        store.write_batch(&mut writes, Some(n));
        if n % 20 == 0 {
            store.flush();
            println!("flushed {n}");
        }
    }
}

#[test]
fn a_batch_survives_sigkill_whole_or_not_at_all() {
    const CHILD: &str = "EDDY_SLED_CRASH_CHILD";
    if let Some(dir) = std::env::var_os(CHILD) {
        write_batches_until_killed(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "store::sled_store::tests::a_batch_survives_sigkill_whole_or_not_at_all",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let flushed = loop {
        let line = lines.next().expect("the child writes").unwrap();
        if let Some(n) = line.strip_prefix("flushed ") {
            let n: i64 = n.parse().unwrap();
            if n >= 100 {
                break n;
            }
        }
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let store = SledBytesStore::new(tree(dir.path()));
    let offset = store.changelog_offset().expect("an offset survives");
    assert!(offset >= flushed, "{offset} < {flushed}");
    let entries = contents(&store);
    assert_eq!(entries.len(), 50);
    for (_, value) in entries {
        assert_eq!(value, offset.to_be_bytes(), "a batch was applied in part");
    }
}

#[test]
fn a_checkpoint_handed_over_lands_whole_from_the_applier_thread() {
    let dir = tempfile::tempdir().unwrap();
    let stores = SledStores::new(dir.path());
    let definition = counts();
    let mut store = stores.inner("0_0", &definition);
    let writes: eddy_core::streams::store::SharedWrites = std::sync::Arc::new(
        (0..1000u32)
            .map(|i| (Box::from(&i.to_be_bytes()[..]), Some(Box::from(&b"v"[..]))))
            .collect(),
    );
    let pending = store
        .write_batch_later(writes, Some(7))
        .expect("a store of an application applies it on its thread");
    pending.wait().unwrap();
    assert_eq!(contents(&*store).len(), 1000);
    assert_eq!(store.changelog_offset(), Some(7));
    drop(store);
    stores.close("0_0").unwrap();
    let reopened = stores.inner("0_0", &definition);
    assert_eq!(reopened.changelog_offset(), Some(7));
    assert_eq!(contents(&*reopened).len(), 1000);
}

#[test]
fn a_scan_sees_every_key_once_while_batches_split_and_join_the_pages() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let size = PageSize {
        target: 64,
        max: 128,
        min: 32,
        most_batch_bytes: 256,
    };
    let scans = ScanLock::default();
    let mut writer = SledBytesStore::with_page_size(tree.clone(), size, scans.clone());
    let reader = SledBytesStore::with_page_size(tree, size, scans);
    let kept: Vec<Vec<u8>> = (0..300u32)
        .map(|i| (i * 2).to_be_bytes().to_vec())
        .collect();
    let between: Vec<Vec<u8>> = (0..300u32)
        .map(|i| (i * 2 + 1).to_be_bytes().to_vec())
        .collect();
    let mut writes: Vec<BatchWrite<'_>> = kept.iter().map(|k| (&k[..], Some(&b"v"[..]))).collect();
    writer.write_batch(&mut writes.drain(..), Some(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            // Keys between the kept ones come and go: pages are cut and joined every batch.
            for round in 0..200 {
                let value: &[u8] = if round % 2 == 0 {
                    b"a longer value"
                } else {
                    b"v"
                };
                let mut batch: Vec<BatchWrite<'_>> =
                    kept.iter().map(|k| (&k[..], Some(value))).collect();
                batch.extend(
                    between
                        .iter()
                        .map(|k| (&k[..], (round % 2 == 0).then_some(&b"extra"[..]))),
                );
                writer.write_batch(&mut batch.into_iter(), Some(round));
            }
        });
        for _ in 0..200 {
            let mut seen = Vec::new();
            reader.scan(Bound::Unbounded, Bound::Unbounded, &mut |k, _| {
                if k.len() == 4 && k[3] % 2 == 0 {
                    seen.push(k.to_vec());
                }
                true
            });
            assert_eq!(seen, kept);
        }
    });
    assert_eq!(reader.failure(), None);
}
