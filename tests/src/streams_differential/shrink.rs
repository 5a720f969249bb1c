//! Shrinking a failing input to a small one that still fails: whole chunks of lines removed
//! while the failure stays (halving the chunk each time no chunk can go, down to single
//! lines), then each record's headers.

use serde_json::Value;

/// The smallest input found, from `input`, for which `fails` still holds. `fails(input)` must
/// hold.
pub fn shrink(input: Vec<Value>, mut fails: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let mut current = input;
    let mut chunk = (current.len() / 2).max(1);
    loop {
        let mut removed = false;
        let mut start = 0;
        while start < current.len() {
            let end = (start + chunk).min(current.len());
            let candidate: Vec<Value> = current[..start]
                .iter()
                .chain(&current[end..])
                .cloned()
                .collect();
            if fails(&candidate) {
                current = candidate;
                removed = true;
            } else {
                start = end;
            }
        }
        if !removed {
            if chunk == 1 {
                break;
            }
            chunk = (chunk / 2).max(1);
        }
    }
    for i in 0..current.len() {
        if current[i].get("headers").is_some() {
            let mut candidate = current.clone();
            if let Some(record) = candidate[i].as_object_mut() {
                record.remove("headers");
            }
            if fails(&candidate) {
                current = candidate;
            }
        }
    }
    current
}
