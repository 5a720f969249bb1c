//! Records of `__consumer_offsets` and `__transaction_state`, as the coordinators decode them
//! when they replay their topics: the first byte splits the input into key and value.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let [split, rest @ ..] = data else {
            return;
        };
        let (key, value) = rest.split_at(usize::from(*split).min(rest.len()));
        eddy_broker::fuzzing::coordinator_record(key, value);
    });
}
