//! Request frames (without their size) handed to the broker as a connection hands them:
//! the header and body decoders of every served API and version, and what each handler does
//! before it answers.

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let requests = eddy_broker::fuzzing::Requests::open(dir.path()).expect("a broker state");
    // A panic ends the run as a finding: the state is never used after one.
    let requests = std::panic::AssertUnwindSafe(requests);
    afl::fuzz!(|data: &[u8]| {
        requests.handle(data);
    });
}
