use eddy_core::streams::store::{
    Checkpoint, KeyValueBytesStore, LayerConfig, LayeredKeyValueStore, StoreBuilder, StoreSupplier,
};

use super::*;
use crate::store::sled_store::tests::contents;

/// A key-value store of counts by name.
fn counts() -> StoreBuilder {
    StoreBuilder::key_value(
        "counts",
        eddy_core::serde::StringSerde,
        eddy_core::serde::I64Serde,
    )
}

/// A store's layers under exactly-once without a record cache.
fn logged_and_buffered() -> LayerConfig {
    LayerConfig {
        logging: true,
        cache: None,
        write_buffer: true,
    }
}

#[test]
fn a_task_store_over_sled_keeps_only_committed_writes_under_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let stores = SledStores::new(dir.path());
    let definition = counts();
    let config = logged_and_buffered();
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
    assert!(stores.database_dir().is_dir());
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
fn state_kept_in_a_database_per_task_moves_into_the_instances_database() {
    let dir = tempfile::tempdir().unwrap();
    {
        let old = open(&dir.path().join("0_1"), default_page_cache()).unwrap();
        let tree = old.open_tree("counts").unwrap();
        // An entry per key under the prefix of the stores written before pages.
        for (key, value) in [(&b"a"[..], &b"1"[..]), (b"b", b"22")] {
            tree.insert([&[0u8][..], key].concat(), value).unwrap();
        }
        tree.insert(CHANGELOG_OFFSET, &40i64.to_be_bytes()).unwrap();
        old.flush().unwrap();
    }
    std::fs::create_dir(dir.path().join("not-a-store")).unwrap();
    let stores = SledStores::new(dir.path());
    assert_eq!(stores.offsets_on_disk(), [("0_1".to_string(), vec![40])]);
    assert!(!dir.path().join("0_1").exists());
    assert!(dir.path().join("not-a-store").is_dir());
    let counts = stores.inner("0_1", &counts());
    assert_eq!(counts.failure(), None);
    assert_eq!(counts.changelog_offset(), Some(40));
    assert_eq!(
        contents(&*counts),
        [
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"22".to_vec())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_tasks_state_is_dropped_once_unused_for_the_cleanup_delay() {
    let dir = tempfile::tempdir().unwrap();
    let delay = Duration::from_secs(600);
    let definition = counts();
    let write = |stores: &SledStores, task: &str| {
        let mut store = stores.inner(task, &definition);
        store.write_batch(&mut [(&b"a"[..], Some(&b"1"[..]))].into_iter(), Some(1));
        store
    };
    {
        let stores = SledStores::new(dir.path());
        drop(write(&stores, "0_0"));
        drop(write(&stores, "0_1"));
    }
    // Found on disk at start, run here again (0_1) or not (0_0), and one new task (1_0).
    let stores = SledStores::new(dir.path());
    stores.open().unwrap();
    let running = write(&stores, "0_1");
    let new = write(&stores, "1_0");
    tokio::time::advance(delay / 2).await;
    // 1_0 moves away: its state is kept for the delay from then.
    drop(new);
    assert!(stores.clean_released(delay).unwrap().is_empty());
    tokio::time::advance(delay / 2).await;
    assert_eq!(stores.clean_released(delay).unwrap(), ["0_0"]);
    assert!(stores.is_cleaned("0_0") && !stores.is_cleaned("1_0"));
    let tasks: Vec<String> = stores
        .offsets_on_disk()
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(tasks, ["0_1", "1_0"]);
    tokio::time::advance(delay).await;
    // A task with a store open keeps its state however long.
    assert_eq!(stores.clean_released(delay).unwrap(), ["1_0"]);
    assert_eq!(stores.offsets_on_disk(), [("0_1".to_string(), vec![1])]);
    assert_eq!(contents(&*running), [(b"a".to_vec(), b"1".to_vec())]);
    // A task cleaned away that comes back starts from nothing, and is no longer cleaned.
    let back = stores.inner("0_0", &definition);
    assert!(!stores.is_cleaned("0_0"));
    assert_eq!(back.changelog_offset(), None);
    assert!(contents(&*back).is_empty());
}

#[test]
fn a_task_gives_up_the_pages_it_holds_when_its_last_store_closes() {
    let dir = tempfile::tempdir().unwrap();
    let stores = SledStores::new(dir.path());
    let definition = counts();
    let config = logged_and_buffered();
    let keys: Vec<String> = (0..2_000).map(|i| format!("key-{i}")).collect();
    let open =
        |task| LayeredKeyValueStore::new("counts", stores.inner(task, &definition), config.clone());
    let mut store = open("0_0");
    for key in &keys {
        store.put_slice(key.as_bytes(), Some(b"1"));
    }
    store.layers_mut().commit(Some(1));
    store.layers_mut().checkpoint(Checkpoint::Wait);
    drop(store);
    assert_eq!(stores.held_pages.held(), 0);
    // Opened again: its reads go to sled, and hold the pages they fetch.
    let store = open("0_0");
    let other = open("1_0");
    for key in &keys {
        assert_eq!(store.get(key.as_bytes()).as_deref(), Some(&b"1"[..]));
    }
    assert!(stores.held_pages.held() > 0, "no page held");
    drop(store);
    assert_eq!(
        stores.held_pages.held(),
        0,
        "the closed task's pages are still held"
    );
    drop(other);
}
