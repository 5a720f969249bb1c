//! Window and session stores over every combination of layers: each answers as the plain
//! store in memory does, and replaying a store's changelog rebuilds it.

use bytes::Bytes;
use proptest::prelude::*;

use super::inner::SharedBytesStore;
use super::*;
use crate::streams::windows::Window;

/// The layers each store runs with: none but logging, a cache small enough to evict, a
/// write buffer committed now and then, and both.
fn layered() -> Vec<LayerConfig> {
    [(200, false), (0, true), (200, true)]
        .into_iter()
        .map(|(cache_max_bytes, write_buffer)| LayerConfig {
            logging: true,
            cache: LayerConfig::own_cache(cache_max_bytes),
            write_buffer,
        })
        .collect()
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Keys that are prefixes of one another, so that key-then-time ranges meet.
    prop_oneof![
        Just(b"a".to_vec()),
        Just(b"ab".to_vec()),
        Just(b"b".to_vec())
    ]
}

#[derive(Debug, Clone)]
enum WindowOp {
    Put(Vec<u8>, i64, u32, Option<u8>),
    Add(Vec<u8>, i64, u8),
    Commit,
}

fn window_op() -> impl Strategy<Value = WindowOp> {
    prop_oneof![
        3 => (key(), -20i64..200, 0u32..2, proptest::option::of(any::<u8>()))
            .prop_map(|(k, t, s, v)| WindowOp::Put(k, t, s, v)),
        3 => (key(), -20i64..200, any::<u8>()).prop_map(|(k, t, v)| WindowOp::Add(k, t, v)),
        1 => Just(WindowOp::Commit),
    ]
}

/// What a window store shows: every window, each key's windows, and emission's walk.
fn window_view(store: &dyn WindowBytesStore) -> Vec<String> {
    let mut view = vec![format!("{:?}", store.all()), format!("len {}", store.len())];
    for key in [&b"a"[..], b"ab", b"b"] {
        view.push(format!("{:?}", store.fetch_range(key, -100, 300)));
        view.push(format!("{:?}", store.fetch(key, 10, 0)));
    }
    view.push(format!("{:?}", store.fetch_all(-100, 300)));
    view.push(format!("{:?}", store.fetch_all(50, 120)));
    view
}

fn apply_window(store: &mut dyn WindowBytesStore, op: &WindowOp) {
    match op {
        WindowOp::Put(k, t, s, v) => store.put(k, *t, *s, v.map(|v| Bytes::from(vec![v]))),
        WindowOp::Add(k, t, v) => store.update_slice(k, *t, &mut |old, out| {
            out.extend_from_slice(old.unwrap_or_default());
            out.push(*v);
            *v != 0
        }),
        WindowOp::Commit => {
            store.layers_mut().flush();
            store.layers_mut().commit(None);
        }
    }
}

#[derive(Debug, Clone)]
enum SessionOp {
    Put(Vec<u8>, i64, i64, Option<u8>),
    Commit,
}

fn session_op() -> impl Strategy<Value = SessionOp> {
    prop_oneof![
        4 => (key(), -20i64..150_000, 0i64..30, proptest::option::of(any::<u8>()))
            .prop_map(|(k, start, length, v)| SessionOp::Put(k, start, start + length, v)),
        1 => Just(SessionOp::Commit),
    ]
}

fn session_view(store: &dyn SessionBytesStore) -> Vec<String> {
    let mut view = vec![format!("{:?}", store.all()), format!("len {}", store.len())];
    for key in [&b"a"[..], b"ab", b"b"] {
        view.push(format!("{:?}", store.find_sessions(key, -100, 200_000)));
        view.push(format!("{:?}", store.find_sessions(key, 100, 1_000)));
    }
    view.push(format!("{:?}", store.sessions_ending(i64::MIN, i64::MAX)));
    view
}

fn apply_session(store: &mut dyn SessionBytesStore, op: &SessionOp) {
    match op {
        SessionOp::Put(k, start, end, v) => store.put(
            k,
            Window {
                start: *start,
                end: *end,
            },
            v.map(|v| Bytes::from(vec![v])),
        ),
        SessionOp::Commit => {
            store.layers_mut().flush();
            store.layers_mut().commit(None);
        }
    }
}

proptest! {
    /// A window store reads the same over any layers, and its changelog rebuilds it.
    #[test]
    fn window_stores_read_the_same_over_any_layers(
        ops in proptest::collection::vec(window_op(), 0..50),
    ) {
        let mut plain = LayeredWindowStore::in_memory("w", 100);
        let mut others: Vec<_> = layered()
            .into_iter()
            .map(|c| LayeredWindowStore::new("w", 100, Box::new(InMemoryBytesStore::new()), c))
            .collect();
        let mut changelog = Vec::new();
        for op in &ops {
            apply_window(&mut plain, op);
            changelog.extend(plain.layers_mut().take_changelog());
            let expected = window_view(&plain);
            for store in &mut others {
                apply_window(store, op);
                prop_assert_eq!(window_view(store), expected.clone());
            }
        }
        let mut rebuilt = LayeredWindowStore::in_memory("w", 100);
        for record in changelog {
            rebuilt.restore(record).unwrap();
        }
        rebuilt.layers_mut().commit(None);
        prop_assert_eq!(window_view(&rebuilt), window_view(&plain));
    }

    /// A session store reads the same over any layers, and its changelog rebuilds it.
    #[test]
    fn session_stores_read_the_same_over_any_layers(
        ops in proptest::collection::vec(session_op(), 0..50),
    ) {
        let mut plain = LayeredSessionStore::in_memory("s", 100);
        let mut others: Vec<_> = layered()
            .into_iter()
            .map(|c| LayeredSessionStore::new("s", 100, Box::new(InMemoryBytesStore::new()), c))
            .collect();
        let mut changelog = Vec::new();
        for op in &ops {
            apply_session(&mut plain, op);
            changelog.extend(plain.layers_mut().take_changelog());
            let expected = session_view(&plain);
            for store in &mut others {
                apply_session(store, op);
                prop_assert_eq!(session_view(store), expected.clone());
            }
        }
        let mut rebuilt = LayeredSessionStore::in_memory("s", 100);
        for record in changelog {
            rebuilt.restore(record).unwrap();
        }
        rebuilt.layers_mut().commit(None);
        prop_assert_eq!(session_view(&rebuilt), session_view(&plain));
    }
}

#[test]
fn a_window_store_reopened_over_its_inner_store_keeps_its_time() {
    // What a store on disk does at a restart: the latest start is read back, so windows
    // past retention stay dropped.
    let inner = SharedBytesStore::default();
    let mut store = LayeredWindowStore::new("w", 100, Box::new(inner.clone()), LayerConfig::LOGGED);
    store.put(b"k", 500, 0, Some(Bytes::from("v")));
    drop(store);
    let mut reopened =
        LayeredWindowStore::new("w", 100, Box::new(inner.clone()), LayerConfig::LOGGED);
    reopened.put(b"k", 300, 0, Some(Bytes::from("late")));
    assert_eq!(reopened.fetch(b"k", 300, 0), None);
    assert_eq!(reopened.fetch(b"k", 500, 0), Some(Bytes::from("v")));
}
