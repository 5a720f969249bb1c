//! Writes held above a store, in key order, and scans that see them over the store's own
//! entries: what the record cache and the write buffer both are.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::streams::store::inner::{bounds_hold_keys, Visit};

/// Held writes by key: the new value, or `None` for a deletion.
pub(super) type Overlay<E> = BTreeMap<Box<[u8]>, E>;

/// Scans `overlay` (whose entries give their value through `value_of`, `None` hiding the
/// key) merged over the entries `scan_below` visits: a key in the overlay shadows the same
/// key below.
pub(super) fn merged_scan<E>(
    overlay: &Overlay<E>,
    value_of: impl Fn(&E) -> Option<&[u8]>,
    from: Bound<&[u8]>,
    to: Bound<&[u8]>,
    scan_below: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>, &mut Visit<'_>),
    visit: &mut Visit<'_>,
) {
    if !bounds_hold_keys(from, to) {
        return;
    }
    let mut held = overlay.range::<[u8], _>((from, to)).peekable();
    let mut stopped = false;
    scan_below(from, to, &mut |key, value| {
        while let Some((held_key, entry)) = held.peek() {
            let order = held_key[..].cmp(key);
            if order.is_gt() {
                break;
            }
            let (held_key, entry) = (*held_key, *entry);
            held.next();
            if let Some(v) = value_of(entry) {
                if !visit(held_key, v) {
                    stopped = true;
                    return false;
                }
            }
            if order.is_eq() {
                // The held write shadows the entry below.
                return true;
            }
        }
        if !visit(key, value) {
            stopped = true;
            return false;
        }
        true
    });
    if stopped {
        return;
    }
    for (key, entry) in held {
        if let Some(v) = value_of(entry) {
            if !visit(key, v) {
                return;
            }
        }
    }
}

/// How many entries a merged scan of everything visits.
pub(super) fn merged_len<E>(
    overlay: &Overlay<E>,
    value_of: impl Fn(&E) -> Option<&[u8]>,
    scan_below: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>, &mut Visit<'_>),
) -> usize {
    let mut n = 0;
    merged_scan(
        overlay,
        value_of,
        Bound::Unbounded,
        Bound::Unbounded,
        scan_below,
        &mut |_, _| {
            n += 1;
            true
        },
    );
    n
}
