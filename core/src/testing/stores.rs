//! The topology's window and session stores as a test reads them: every part of a store
//! (one per task that holds it) decoded with the store's serdes; the values of the DSL's
//! window stores come without their timestamps.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;

use super::driver::DriverState;
use crate::log::Timestamp;
use crate::streams::internals::StoreInstance;
use crate::streams::store::{StoreBuilder, StoreDecoder};
use crate::streams::windows::Window;

/// Decodes a key and a value of `definition`'s store, stripping the timestamp of a
/// timestamped store; `None` when the store has other types.
fn decode<K: 'static, V: 'static>(
    definition: &StoreBuilder,
    key: &Bytes,
    value: &Bytes,
) -> Option<(K, V)> {
    let reader = StoreDecoder::<K, V>::new(definition)?;
    Some((reader.key(key).ok()?, reader.value(value).ok()?))
}

/// A window store of the topology, read across the tasks that hold its parts.
pub struct TestWindowStore<K, V> {
    state: Rc<RefCell<DriverState>>,
    name: String,
    _types: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K: 'static, V: 'static> TestWindowStore<K, V> {
    pub(crate) fn new(state: Rc<RefCell<DriverState>>, name: &str) -> Self {
        Self {
            state,
            name: name.to_string(),
            _types: std::marker::PhantomData,
        }
    }

    /// Every live window as `(key, window start, value)`, by task then key and time; `None`
    /// when the topology has no window store of that name and these types.
    pub fn all(&self) -> Option<Vec<(K, Timestamp, V)>> {
        let mut state = self.state.borrow_mut();
        let mut out = Vec::new();
        let mut found = false;
        for task in state.tasks.values_mut() {
            let Some((definition, StoreInstance::Window(store))) = task.store(&self.name) else {
                continue;
            };
            found = true;
            for (key, start, value) in store.all() {
                let (k, v) = decode::<K, V>(definition, &key, &value)?;
                out.push((k, start, v));
            }
        }
        found.then_some(out)
    }

    /// The value of `key` in the window starting at `start`, whichever partition holds it.
    pub fn fetch(&self, key: &K, start: Timestamp) -> Option<V>
    where
        K: PartialEq,
    {
        self.all()?
            .into_iter()
            .find(|(k, s, _)| k == key && *s == start)
            .map(|(_, _, v)| v)
    }
}

/// A session store of the topology, read across the tasks that hold its parts.
pub struct TestSessionStore<K, V> {
    state: Rc<RefCell<DriverState>>,
    name: String,
    _types: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K: 'static, V: 'static> TestSessionStore<K, V> {
    pub(crate) fn new(state: Rc<RefCell<DriverState>>, name: &str) -> Self {
        Self {
            state,
            name: name.to_string(),
            _types: std::marker::PhantomData,
        }
    }

    /// Every live session as `(key, session, value)`, by task then key, end and start;
    /// `None` when the topology has no session store of that name and these types.
    pub fn all(&self) -> Option<Vec<(K, Window, V)>> {
        let mut state = self.state.borrow_mut();
        let mut out = Vec::new();
        let mut found = false;
        for task in state.tasks.values_mut() {
            let Some((definition, StoreInstance::Session(store))) = task.store(&self.name) else {
                continue;
            };
            found = true;
            for (key, session, value) in store.all() {
                let (k, v) = decode::<K, V>(definition, &key, &value)?;
                out.push((k, session, v));
            }
        }
        found.then_some(out)
    }
}
