//! Buffers a task fills between commits and empties at each: emptied, they keep room for
//! as much as they held, so that a task writing about as much at every commit grows them
//! once instead of growing them again (copying what they hold and touching fresh pages) at
//! every commit; one that wrote much once and little since gives the room back.

/// Empties `buffer`, keeping room for what it held or `least`, whichever is more.
pub(crate) fn clear_keeping_room<T>(buffer: &mut Vec<T>, least: usize) {
    let held = buffer.len();
    buffer.clear();
    buffer.shrink_to(held.max(least));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_buffer_keeps_room_for_what_it_last_held() {
        let mut buffer: Vec<u8> = Vec::new();
        buffer.extend(std::iter::repeat_n(1, 100_000));
        clear_keeping_room(&mut buffer, 16);
        assert!(buffer.is_empty());
        assert!(buffer.capacity() >= 100_000);
        buffer.extend([1, 2, 3]);
        clear_keeping_room(&mut buffer, 16);
        assert!(buffer.capacity() < 1_000, "{}", buffer.capacity());
        assert!(buffer.capacity() >= 16);
    }
}
