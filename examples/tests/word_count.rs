//! The word count run to its end on the embedded broker: the last count of each word is how
//! often it occurs, exactly once.

use eddy::embedded::EmbeddedBroker;
use eddy_examples::word_count;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_word_count_counts_each_word_once_per_occurrence() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let lines = ["Hold the seats", "release the seats", "hold, release: HOLD"];
    let counts = word_count::run(&broker.bootstrap(), &lines, state.path())
        .await
        .unwrap();
    let expected = [("hold", 3), ("release", 2), ("seats", 2), ("the", 2)];
    assert_eq!(
        counts,
        expected
            .map(|(w, n)| (w.to_string(), n))
            .into_iter()
            .collect()
    );
    broker.shutdown().await.unwrap();
}
