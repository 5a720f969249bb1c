use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;

use super::*;
use crate::streams::store::inner::{scan_prefix, SharedBytesStore as Shared};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn scanned(
    store: &dyn StoreLayer,
    from: Bound<&[u8]>,
    to: Bound<&[u8]>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut all = Vec::new();
    store.scan(from, to, &mut |k, v| {
        all.push((k.to_vec(), v.to_vec()));
        true
    });
    all
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Appends to the value (an empty suffix deletes the key).
    Update(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
    Prefix(Vec<u8>),
    /// Scans from a key and stops after the first entries.
    ScanFirst(Vec<u8>, usize),
    Flush,
    /// The writes so far go to a commit in flight (the changelog taken): the next commit
    /// commits them and not what is written meanwhile. Only where there is a write buffer.
    Seal,
    Commit,
    /// A commit followed by a checkpoint.
    Checkpoint,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct short keys, some prefixes of others, so that operations meet.
    proptest::collection::vec(0u8..4, 0..3)
}

fn op() -> impl Strategy<Value = Op> {
    let value = || proptest::collection::vec(any::<u8>(), 0..6);
    prop_oneof![
        4 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => key().prop_map(Op::Delete),
        3 => (key(), proptest::collection::vec(any::<u8>(), 0..3)).prop_map(|(k, v)| Op::Update(k, v)),
        2 => key().prop_map(Op::Get),
        1 => (key(), key()).prop_map(|(a, b)| Op::Range(a, b)),
        1 => key().prop_map(Op::Prefix),
        1 => (key(), 1usize..3).prop_map(|(k, n)| Op::ScanFirst(k, n)),
        1 => Just(Op::Flush),
        1 => Just(Op::Seal),
        1 => Just(Op::Commit),
        1 => Just(Op::Checkpoint),
    ]
}

/// The configurations every property runs over: each layer alone and together, the cache
/// small enough to evict often.
fn configs() -> Vec<LayerConfig> {
    let mut all = Vec::new();
    for logging in [false, true] {
        for cache_max_bytes in [0, 200] {
            for write_buffer in [false, true] {
                all.push(LayerConfig {
                    logging,
                    cache: LayerConfig::own_cache(cache_max_bytes),
                    write_buffer,
                });
            }
        }
    }
    all
}

/// What a run leaves: the layers, the inner store, the changelog taken at commits, the
/// model, the model as of the last commit and as of the last checkpoint, and whether it
/// ended with a commit in flight.
struct Run {
    store: Box<dyn StoreLayer>,
    inner: Shared,
    changelog: Vec<ChangelogRecord>,
    model: Model,
    committed: Model,
    checkpointed: Model,
    sealed: bool,
}

/// Runs `ops` on the layers of `config` and on a `BTreeMap`, checking every read.
fn run(config: &LayerConfig, ops: &[Op]) -> Result<Run, TestCaseError> {
    run_over(config, ops, Shared::default())
}

/// [`run`] over `inner`.
fn run_over(config: &LayerConfig, ops: &[Op], inner: Shared) -> Result<Run, TestCaseError> {
    let later = inner.is_later();
    // A budget of the store's own, not shared with another run of the same configuration.
    let cache = config
        .cache
        .as_ref()
        .map(|c| CacheBudget::new(c.max_bytes()));
    let mut store = LayerConfig {
        cache,
        ..config.clone()
    }
    .build(Box::new(inner.clone()), ChangelogKeys::SAME);
    let mut model = Model::new();
    let mut committed = Model::new();
    let mut checkpointed = Model::new();
    let mut changelog = Vec::new();
    let mut offset = 0;
    // The model and changelog offset of the interval whose commit is in flight.
    let mut sealed: Option<(Model, i64)> = None;
    for op in ops {
        match op {
            Op::Put(k, v) => {
                store.put(k, Some(v));
                model.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                store.put(k, None);
                model.remove(k);
            }
            Op::Update(k, suffix) => {
                store.update(k, &mut |old, out| {
                    if suffix.is_empty() {
                        return false;
                    }
                    out.extend_from_slice(old.unwrap_or_default());
                    out.extend_from_slice(suffix);
                    true
                });
                if suffix.is_empty() {
                    model.remove(k);
                } else {
                    model
                        .entry(k.clone())
                        .or_default()
                        .extend_from_slice(suffix);
                }
            }
            Op::Get(k) => {
                let mut out = vec![9];
                let found = store.get_into(k, &mut out);
                prop_assert_eq!(found.then(|| out[1..].to_vec()), model.get(k).cloned());
            }
            Op::Range(a, b) => {
                let expected: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| *k >= a && *k <= b)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(
                    scanned(&*store, Bound::Included(a), Bound::Included(b)),
                    expected
                );
            }
            Op::Prefix(p) => {
                let expected: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut found = Vec::new();
                scan_prefix(
                    p,
                    |from, to, visit| store.scan(from, to, visit),
                    &mut |k, v| {
                        found.push((k.to_vec(), v.to_vec()));
                        true
                    },
                );
                prop_assert_eq!(found, expected);
            }
            Op::ScanFirst(from, n) => {
                let expected: Vec<_> = model
                    .range::<Vec<u8>, _>((Bound::Excluded(from), Bound::Unbounded))
                    .take(*n)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut found = Vec::new();
                store.scan(Bound::Excluded(from), Bound::Unbounded, &mut |k, v| {
                    found.push((k.to_vec(), v.to_vec()));
                    found.len() < *n
                });
                prop_assert_eq!(found, expected);
            }
            Op::Flush => store.flush(),
            Op::Seal if !config.write_buffer || sealed.is_some() => store.flush(),
            Op::Seal => {
                store.flush();
                changelog.extend(store.take_changelog());
                offset += 1;
                store.seal();
                sealed = Some((model.clone(), offset));
                // Nothing sealed reaches the inner store before its commit.
                let held = store.held_bytes();
                store.checkpoint(Checkpoint::Wait);
                prop_assert_eq!(store.held_bytes(), held);
            }
            Op::Commit | Op::Checkpoint => {
                // Nothing is written after a commit that is not of a sealed interval.
                let everything = sealed.is_none();
                let committing = match sealed.take() {
                    // The commit in flight succeeds; what was written since stays open.
                    Some((at_seal, sealed_offset)) => {
                        store.commit(Some(sealed_offset));
                        committed = at_seal;
                        sealed_offset
                    }
                    None => {
                        store.flush();
                        changelog.extend(store.take_changelog());
                        offset += 1;
                        store.commit(Some(offset));
                        committed = model.clone();
                        offset
                    }
                };
                if matches!(op, Op::Checkpoint) {
                    let held = store.held_bytes();
                    store.checkpoint(Checkpoint::Wait);
                    checkpointed = committed.clone();
                    if later {
                        // The batch on its way still takes its memory, and no more.
                        prop_assert!(store.held_bytes() <= held);
                    } else if everything {
                        prop_assert_eq!(store.held_bytes(), 0);
                    }
                }
                if !config.write_buffer {
                    prop_assert_eq!(inner.contents(), committed.clone());
                }
                prop_assert_eq!(store.changelog_offset(), Some(committing));
            }
        }
        prop_assert_eq!(store.len(), model.len());
        if config.write_buffer && !later {
            // The inner store holds the state of the last checkpoint and nothing newer.
            prop_assert_eq!(inner.contents(), checkpointed.clone());
        }
    }
    prop_assert_eq!(
        scanned(&*store, Bound::Unbounded, Bound::Unbounded),
        model.clone().into_iter().collect::<Vec<_>>()
    );
    Ok(Run {
        store,
        inner,
        changelog,
        model,
        committed,
        checkpointed,
        sealed: sealed.is_some(),
    })
}

proptest! {
    /// Every combination of layers answers reads, scans and lengths as a `BTreeMap` does.
    #[test]
    fn layered_stores_behave_as_a_btreemap(ops in proptest::collection::vec(op(), 0..60)) {
        for config in configs() {
            run(&config, &ops)?;
        }
    }

    /// Replaying a logged store's changelog into an empty store rebuilds its contents, the
    /// cache and the write buffer notwithstanding; a write buffer holds what it restores
    /// until a checkpoint takes it, with the offset it reaches, to the inner store.
    #[test]
    fn replaying_the_changelog_rebuilds_the_store(ops in proptest::collection::vec(op(), 0..60)) {
        for config in configs().into_iter().filter(|c| c.logging) {
            let Run { mut store, mut changelog, model, .. } = run(&config, &ops)?;
            store.flush();
            changelog.extend(store.take_changelog());
            prop_assert!(store.take_changelog().is_empty());
            for write_buffer in [false, true] {
                let inner = Shared::default();
                let mut rebuilt = LayerConfig { write_buffer, ..LayerConfig::default() }
                    .build(Box::new(inner.clone()), ChangelogKeys::SAME);
                for record in &changelog {
                    rebuilt.restore(&record.key, record.value.as_deref());
                }
                let end = i64::try_from(changelog.len()).unwrap_or(i64::MAX);
                rebuilt.commit(Some(end));
                rebuilt.settle_restored();
                prop_assert_eq!(
                    scanned(&*rebuilt, Bound::Unbounded, Bound::Unbounded),
                    model.clone().into_iter().collect::<Vec<_>>()
                );
                prop_assert_eq!(rebuilt.changelog_offset(), Some(end));
                if write_buffer && !changelog.is_empty() {
                    prop_assert!(inner.contents().is_empty());
                    prop_assert!(rebuilt.held_bytes() > 0);
                }
                rebuilt.checkpoint(Checkpoint::Wait);
                prop_assert_eq!(inner.contents(), model.clone());
                prop_assert_eq!(inner.changelog_offset(), Some(end));
            }
        }
    }

    /// A write buffer over an inner store that applies its batches on another thread reads
    /// the same as over one that applies them at once, while they are applied and after.
    #[test]
    fn batches_applied_later_read_the_same(ops in proptest::collection::vec(op(), 0..60)) {
        for config in configs().into_iter().filter(|c| c.write_buffer) {
            let Run { mut store, inner, committed, checkpointed, sealed, .. } =
                run_over(&config, &ops, Shared::later())?;
            store.checkpoint(Checkpoint::Wait);
            // Its batch on its way, the store still reads as committed and written.
            prop_assert_eq!(store.len(), run(&config, &ops)?.model.len());
            drop(store);
            // Dropped, the buffer waited for its last batch: the inner store holds every
            // committed write (with a commit in flight, as of the last checkpoint).
            prop_assert_eq!(inner.contents(), if sealed { checkpointed } else { committed });
        }
    }

    /// A run of writes put at once (as a cache flush sends it) leaves every layer as the same
    /// writes put one by one: reads, held bytes, the changelog, and what an abort or a
    /// checkpoint then leaves — merged into a write buffer or, out of order, key by key.
    #[test]
    fn a_run_put_at_once_is_the_same_as_its_writes_one_by_one(
        before in proptest::collection::vec(op(), 0..40),
        run in proptest::collection::btree_map(key(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..6)), 0..8),
        reversed in any::<bool>(),
        then_abort in any::<bool>(),
    ) {
        let mut run: Vec<(&[u8], Option<&[u8]>)> =
            run.iter().map(|(k, v)| (&k[..], v.as_deref())).collect();
        if reversed {
            run.reverse();
        }
        for config in configs().into_iter().filter(|c| c.cache.is_none()) {
            let Run { store: mut at_once, inner: inner_at_once, .. } = run_over(&config, &before, Shared::default())?;
            let Run { store: mut one_by_one, inner: inner_one_by_one, .. } = run_over(&config, &before, Shared::default())?;
            at_once.put_run(&run);
            for &(key, value) in &run {
                one_by_one.put(key, value);
            }
            let all = Bound::<&[u8]>::Unbounded;
            prop_assert_eq!(scanned(&*at_once, all, all), scanned(&*one_by_one, all, all));
            prop_assert_eq!(at_once.held_bytes(), one_by_one.held_bytes());
            prop_assert_eq!(at_once.take_changelog(), one_by_one.take_changelog());
            for store in [&mut at_once, &mut one_by_one] {
                if then_abort {
                    store.abort();
                } else {
                    store.commit(Some(1_000));
                }
            }
            prop_assert_eq!(scanned(&*at_once, all, all), scanned(&*one_by_one, all, all));
            prop_assert_eq!(at_once.held_bytes(), one_by_one.held_bytes());
            at_once.checkpoint(Checkpoint::Wait);
            one_by_one.checkpoint(Checkpoint::Wait);
            prop_assert_eq!(inner_at_once.contents(), inner_one_by_one.contents());
        }
    }

    /// A write buffer's open interval dropped (the transaction aborted) leaves the inner
    /// store as the last checkpoint left it, the store reads as the last commit left it,
    /// and a checkpoint then brings the inner store to that state.
    #[test]
    fn an_aborted_write_buffer_reads_as_the_last_commit(
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        for config in configs().into_iter().filter(|c| c.write_buffer) {
            let Run { mut store, inner, committed, checkpointed, sealed, .. } =
                run(&config, &ops)?;
            store.abort();
            prop_assert_eq!(inner.contents(), checkpointed.clone());
            if store.failure().is_some() {
                // Only a key written both in an interval whose commit was in flight and after
                // it leaves the store unable to go back.
                prop_assert!(sealed);
                continue;
            }
            prop_assert_eq!(
                scanned(&*store, Bound::Unbounded, Bound::Unbounded),
                committed.clone().into_iter().collect::<Vec<_>>()
            );
            prop_assert_eq!(store.len(), committed.len());
            prop_assert!(store.changelog().is_empty());
            store.checkpoint(Checkpoint::Wait);
            prop_assert_eq!(inner.contents(), committed.clone());
            prop_assert_eq!(store.held_bytes(), 0);
        }
    }
}

#[test]
fn the_cache_sends_a_key_down_once_however_often_it_changes() {
    let inner = Shared::default();
    let config = LayerConfig {
        logging: true,
        cache: LayerConfig::own_cache(10_000),
        write_buffer: false,
    };
    let mut store = config.build(Box::new(inner.clone()), ChangelogKeys::SAME);
    for i in 0..1_000u32 {
        store.put(b"hot", Some(&i.to_be_bytes()));
        store.put(&i.to_be_bytes(), Some(b"cold"));
        store.put(&i.to_be_bytes(), None);
    }
    // Nothing went down yet for the hot key, which was written last and last in use.
    let mut value = Vec::new();
    assert!(store.get_into(b"hot", &mut value));
    assert_eq!(value, 999u32.to_be_bytes());
    assert!(!inner.contents().contains_key(&b"hot"[..]));
    store.flush();
    let changelog = store.take_changelog();
    let hot: Vec<_> = changelog.iter().filter(|r| &r.key[..] == b"hot").collect();
    assert_eq!(hot.len(), 1);
    assert_eq!(hot[0].value.as_deref(), Some(&999u32.to_be_bytes()[..]));
    // The cache stayed within its bytes: the cold keys were evicted along the way, each
    // sent down as the tombstone it ended as, and fewer times than it was written.
    assert!(changelog.len() < 2_000, "{} records", changelog.len());
    assert_eq!(inner.contents().len(), 1);
}

#[test]
fn a_cache_keeps_past_a_flush_the_entries_it_finds_again_and_drops_those_it_does_not() {
    let below = Unbuffered::new(Box::new(crate::streams::store::InMemoryBytesStore::new()));
    let mut cache = RecordCache::new(Box::new(below), 1 << 20);
    let key = |i: u32| i.to_be_bytes();
    // The same hundred keys in every interval: each is found again after a flush.
    for _ in 0..2 {
        for i in 0..100 {
            cache.put(&key(i), Some(b"hot"));
        }
        cache.flush();
    }
    for i in 0..50 {
        cache.put(&key(i), Some(b"hot"));
    }
    cache.flush();
    assert_eq!(cache.cached(), 100, "entries found again are kept");
    // An interval of keys never seen before finds none of the kept entries: those not
    // written since the last flush go; the interval's own stay until the next.
    for i in 1_000..2_000 {
        cache.put(&key(i), Some(b"cold"));
    }
    cache.flush();
    assert_eq!(cache.cached(), 1_000);
    assert_eq!(cache.bytes(), 1_000 * (4 + 4 + 64));
    let mut read = Vec::new();
    let hot = (0..100).map(|i| (i, &b"hot"[..]));
    let cold = (1_000..2_000).map(|i| (i, &b"cold"[..]));
    for (i, value) in hot.chain(cold) {
        read.clear();
        assert!(cache.get_into(&key(i), &mut read), "key {i}");
        assert_eq!(read, value);
    }
}

#[test]
fn an_unlogged_write_sends_a_pending_cached_write_down_first() {
    let config = LayerConfig {
        logging: true,
        cache: LayerConfig::own_cache(10_000),
        write_buffer: false,
    };
    let inner = Shared::default();
    let mut store = config.build(Box::new(inner.clone()), ChangelogKeys::SAME);
    store.put(b"k", Some(b"v"));
    store.put_unlogged(b"k", None);
    let changelog = store.take_changelog();
    assert_eq!(changelog.len(), 1);
    assert_eq!(changelog[0].value.as_deref(), Some(&b"v"[..]));
    assert!(inner.contents().is_empty());
}

#[test]
fn a_write_buffer_keeps_restored_writes_under_the_open_interval_and_off_a_busy_inner_store() {
    let config = LayerConfig {
        logging: true,
        cache: None,
        write_buffer: true,
    };
    let inner = Shared::gated();
    let mut store = config.build(Box::new(inner.clone()), ChangelogKeys::SAME);
    let _opened = inner.opened_on_drop();
    let get = |store: &dyn StoreLayer, key: &[u8]| {
        let mut out = Vec::new();
        store.get_into(key, &mut out).then_some(out)
    };
    store.put(b"a", Some(b"1"));
    store.commit(Some(1));
    store.checkpoint(Checkpoint::Wait);
    // The first batch is still landing: a checkpoint that need not wait leaves the next
    // committed writes held, and the offset with them.
    store.put(b"b", Some(b"2"));
    store.commit(Some(2));
    store.checkpoint(Checkpoint::IfLanded);
    assert!(store.held_bytes() > 0);
    // A write of the open interval is newer than a restored one for the same key: it reads
    // first, and an abort brings back the restored value, not what was there before.
    store.put(b"a", Some(b"open"));
    store.restore(b"a", Some(b"restored"));
    store.restore(b"c", Some(b"3"));
    assert_eq!(get(&*store, b"a").as_deref(), Some(&b"open"[..]));
    assert_eq!(get(&*store, b"c").as_deref(), Some(&b"3"[..]));
    store.abort();
    assert_eq!(get(&*store, b"a").as_deref(), Some(&b"restored"[..]));
    assert!(inner.contents().is_empty());
    inner.open_gate();
    store.commit(Some(5));
    store.checkpoint(Checkpoint::Wait);
    drop(store);
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = [
        (b"a".to_vec(), b"restored".to_vec()),
        (b"b".to_vec(), b"2".to_vec()),
        (b"c".to_vec(), b"3".to_vec()),
    ]
    .into_iter()
    .collect();
    assert_eq!(inner.contents(), expected);
    assert_eq!(inner.changelog_offset(), Some(5));
}

#[test]
fn a_write_buffer_counts_the_memory_of_its_batch_until_the_batch_lands() {
    let config = LayerConfig {
        logging: false,
        cache: None,
        write_buffer: true,
    };
    let inner = Shared::gated();
    let mut store = config.build(Box::new(inner.clone()), ChangelogKeys::SAME);
    let _opened = inner.opened_on_drop();
    for i in 0..100u32 {
        store.put(&i.to_be_bytes(), Some(b"value"));
    }
    let written = store.held_bytes();
    assert!(written >= 100 * 9, "{written}");
    store.commit(Some(1));
    store.checkpoint(Checkpoint::Wait);
    // Handed to the inner store, the writes are still in memory until it has them.
    assert_eq!(store.held_bytes(), written);
    store.put(b"open", Some(b"1"));
    let both = store.held_bytes();
    assert!(both > written, "{both}");
    inner.open_gate();
    store.commit(Some(2));
    // The commit forgets the batch that landed: only the open interval's write is left.
    store.checkpoint(Checkpoint::IfLanded);
    let mut left = store.held_bytes();
    while left >= written {
        std::thread::yield_now();
        store.checkpoint(Checkpoint::IfLanded);
        left = store.held_bytes();
    }
    assert_eq!(left, both - written);
}
