use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use eddy_core::streams::store::InMemoryBytesStore;
use proptest::prelude::*;

use super::*;
use crate::store::supplier::{default_page_cache, open};

fn tree(dir: &Path) -> sled::Tree {
    open(dir, default_page_cache())
        .unwrap()
        .open_tree("counts")
        .unwrap()
}

/// Every entry of `store`, in key order.
pub(crate) fn contents(store: &dyn BytesStore) -> Vec<(Vec<u8>, Vec<u8>)> {
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
        // Pages held beside the bounds: none, one or two at a time, or all of them.
        held in prop_oneof![Just(0usize), Just(100), Just(8 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        // Pages of an entry or two, a sled batch each: every batch splits and joins pages.
        let size = if tiny_pages {
            PageSize { target: 6, max: 12, min: 3, most_batch_bytes: 1 }
        } else {
            PageSize::default()
        };
        let budget = PageBudget::new(held);
        let share = Arc::new(TreeShare::new(budget.clone()));
        let mut sled = SledBytesStore::with_page_size(tree(dir.path()), size, share);
        let mut memory = InMemoryBytesStore::new();
        for (i, op) in ops.iter().enumerate() {
            let offset = i64::try_from(i).unwrap();
            prop_assert_eq!(apply(&mut sled, op, offset), apply(&mut memory, op, offset));
            prop_assert_eq!(sled.len(), memory.len());
            prop_assert_eq!(sled.pages.as_ref().unwrap().check(), Ok(()));
            prop_assert!(budget.held() <= held, "{} held of {held}", budget.held());
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

/// Pages small enough to be cut and joined by a few writes.
const SMALL_PAGES: PageSize = PageSize {
    target: 64,
    max: 128,
    min: 32,
    most_batch_bytes: 256,
};

/// Writes keys `0, 2, 4, …` (the kept ones, each always present), then, on a thread, 200
/// batches that add and remove the keys between them, cutting and joining small pages every
/// batch, while `read` runs 200 times on this thread with a store of its own over the tree.
fn while_batches_split_and_join_the_pages(read: impl Fn(&SledBytesStore, &[Vec<u8>])) {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let size = SMALL_PAGES;
    let share = SharedTree::default();
    let mut writer = SledBytesStore::with_page_size(tree.clone(), size, share.clone());
    let reader = SledBytesStore::with_page_size(tree, size, share);
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
            read(&reader, &kept);
        }
    });
    // The last batch wrote "v" to every kept key: no page held is older.
    for key in &kept {
        let mut value = Vec::new();
        assert!(reader.get_into(key, &mut value), "{key:?} not found");
        assert_eq!(value, b"v", "{key:?}");
    }
    assert_eq!(reader.failure(), None);
    assert_eq!(writer.failure(), None);
}

#[test]
fn a_scan_sees_every_key_once_while_batches_split_and_join_the_pages() {
    while_batches_split_and_join_the_pages(|reader, kept| {
        let mut seen = Vec::new();
        reader.scan(Bound::Unbounded, Bound::Unbounded, &mut |k, _| {
            if k.len() == 4 && k[3] % 2 == 0 {
                seen.push(k.to_vec());
            }
            true
        });
        assert_eq!(seen, kept);
    });
}

#[test]
fn a_read_finds_every_key_while_batches_split_and_join_the_pages() {
    while_batches_split_and_join_the_pages(|reader, kept| {
        let mut value = Vec::new();
        for key in kept {
            value.clear();
            assert!(reader.get_into(key, &mut value), "{key:?} not found");
            assert!(value == b"v" || value == b"a longer value", "{value:?}");
        }
    });
}

#[test]
fn the_bounds_in_memory_follow_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let size = SMALL_PAGES;
    let share = SharedTree::default();
    let mut store = SledBytesStore::with_page_size(tree(dir.path()), size, share.clone());
    let keys: Vec<[u8; 4]> = (0..500u32).map(|i| i.to_be_bytes()).collect();
    for round in 0..6usize {
        // Keys come in, then most go again: pages are cut and joined.
        let mut writes: Vec<BatchWrite<'_>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                (
                    &k[..],
                    (round % 2 == 0 || i % 7 == 0).then_some(&b"value"[..]),
                )
            })
            .collect();
        store.write_batch(&mut writes.drain(..), None);
        let pages = store.pages().expect("pages");
        let in_tree: Vec<Vec<u8>> = pages
            .tree()
            .scan_prefix([super::paged::PAGE])
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        assert!(in_tree.len() > 1, "round {round}: {} pages", in_tree.len());
        assert_eq!(share.bound_keys(), Some(in_tree), "round {round}");
    }
}

#[test]
fn a_held_page_is_rewritten_by_the_batches_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let budget = PageBudget::new(1 << 20);
    let share = Arc::new(TreeShare::new(budget.clone()));
    let mut store = SledBytesStore::with_page_size(tree(dir.path()), SMALL_PAGES, share.clone());
    let keys: Vec<[u8; 4]> = (0..200u32).map(|i| i.to_be_bytes()).collect();
    let read_all = |store: &SledBytesStore, expected: &[u8]| {
        for key in &keys {
            let mut value = Vec::new();
            assert!(store.get_into(key, &mut value), "{key:?} not found");
            assert_eq!(value, expected, "{key:?}");
        }
    };
    for round in 0..4u8 {
        // Values of one length, then of another: pages rewritten in place, then cut.
        let value = vec![round; 1 + usize::from(round) * 3];
        let mut writes: Vec<BatchWrite<'_>> =
            keys.iter().map(|k| (&k[..], Some(&value[..]))).collect();
        store.write_batch(&mut writes.drain(..), None);
        read_all(&store, &value);
        assert!(share.held_bytes() > 0, "round {round}: no page held");
        assert_eq!(budget.held(), share.held_bytes());
    }
    share.forget_pages();
    assert_eq!(budget.held(), 0);
    read_all(&store, &[3; 10]);
    drop(store);
    drop(share);
    assert_eq!(budget.held(), 0, "a dropped tree gives its pages back");
}

#[test]
fn the_pages_held_stay_within_their_budget_and_every_read_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let most = 1_000;
    let budget = PageBudget::new(most);
    let share = Arc::new(TreeShare::new(budget.clone()));
    let mut store = SledBytesStore::with_page_size(tree(dir.path()), SMALL_PAGES, share.clone());
    let keys: Vec<[u8; 4]> = (0..500u32).map(|i| i.to_be_bytes()).collect();
    let mut writes: Vec<BatchWrite<'_>> = keys.iter().map(|k| (&k[..], Some(&k[..]))).collect();
    store.write_batch(&mut writes.drain(..), None);
    let mut most_held = 0;
    for pass in 0..3 {
        for key in keys.iter().rev().skip(pass) {
            let mut value = Vec::new();
            assert!(store.get_into(key, &mut value), "{key:?} not found");
            assert_eq!(value, key);
            most_held = most_held.max(budget.held());
        }
    }
    assert!(most_held <= most, "{most_held} bytes held of {most}");
    // Pages of about 64 bytes count about 192: the budget holds several, not all 60 or so.
    assert!(most_held > most / 2, "{most_held} bytes held of {most}");
}
