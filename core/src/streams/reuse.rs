//! Buffers a task fills between sends and empties at each: emptied, they keep room for as
//! much as they held, up to [`MOST_KEPT_BYTES`], so that a task writing about as much at
//! every run grows them once instead of growing them again (copying what they hold and
//! touching fresh pages) each time; one that wrote much once and little since gives the
//! room back.

/// The most room an emptied buffer keeps. What a task usually writes in one run (a poll of
/// 1,000 records) fits; what it wrote while a commit was in flight (held back, up to a few
/// MiB) does not stay: a buffer is emptied only when its task next sends, and with many
/// tasks each would otherwise keep the room of the largest batch it last held — measured
/// with 64 tasks catching up on a backlog, 60 MiB of empty room (35 MiB with 256 KiB kept
/// at most).
pub(crate) const MOST_KEPT_BYTES: usize = 64 << 10;

/// Empties `buffer`, keeping room for what it held, but for no more than
/// [`MOST_KEPT_BYTES`] of elements, and for `least` elements whatever it held.
pub(crate) fn clear_keeping_room<T>(buffer: &mut Vec<T>, least: usize) {
    let most = MOST_KEPT_BYTES / std::mem::size_of::<T>().max(1);
    let held = buffer.len();
    buffer.clear();
    buffer.shrink_to(held.min(most).max(least));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_buffer_keeps_room_for_what_it_last_held() {
        let mut buffer: Vec<u8> = Vec::new();
        buffer.extend(std::iter::repeat_n(1, 50_000));
        clear_keeping_room(&mut buffer, 16);
        assert!(buffer.is_empty());
        assert!(buffer.capacity() >= 50_000);
        buffer.extend([1, 2, 3]);
        clear_keeping_room(&mut buffer, 16);
        assert!(buffer.capacity() < 1_000, "{}", buffer.capacity());
        assert!(buffer.capacity() >= 16);
    }

    #[test]
    fn an_emptied_buffer_keeps_no_more_than_the_most_room() {
        let mut bytes: Vec<u8> = vec![0; 4 * MOST_KEPT_BYTES];
        clear_keeping_room(&mut bytes, 16);
        assert!(bytes.is_empty());
        assert!((MOST_KEPT_BYTES..2 * MOST_KEPT_BYTES).contains(&bytes.capacity()));
        // Counted in bytes, whatever an element's size.
        let mut spans: Vec<(u64, u64)> = vec![(0, 0); MOST_KEPT_BYTES];
        clear_keeping_room(&mut spans, 16);
        assert!(
            spans.capacity() * 16 < 2 * MOST_KEPT_BYTES,
            "{}",
            spans.capacity()
        );
        assert!(
            spans.capacity() * 16 >= MOST_KEPT_BYTES,
            "{}",
            spans.capacity()
        );
        // The least is kept whatever the most.
        let mut pages: Vec<[u8; 1 << 10]> = vec![[0; 1 << 10]; 1_000];
        clear_keeping_room(&mut pages, 300);
        assert_eq!(pages.capacity(), 300);
    }
}
