//! The order-events story told on the embedded broker: each group reads what it should, the
//! seventh consumer on six partitions holds none, and the search team's re-read is exactly
//! its two hours.

use eddy::embedded::EmbeddedBroker;
use eddy_examples::order_events;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_reads_the_log_at_its_own_pace() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut said = Vec::new();
    let story = order_events::story(&broker.bootstrap(), 600, 1_767_222_000_000, &mut |line| {
        said.push(line)
    })
    .await
    .unwrap();
    assert_eq!(story.written, 1_800);
    assert_eq!(story.notification.partitions_per_member, vec![2, 2, 2]);
    assert_eq!(story.notification.read, 1_800);
    assert!(
        (900..1_800).contains(&story.analytics.read),
        "{}",
        story.analytics.read
    );
    assert_eq!(
        story.notification_of_seven.partitions_per_member,
        vec![1, 1, 1, 1, 1, 1, 0]
    );
    assert_eq!(story.warehouse.read, 1_800);
    assert_eq!(story.search_window_events, 600);
    assert_eq!(story.search.read, story.search_window_events);
    // The lag tables are Kafka's: the analytics group still has the rest to read.
    let analytics = said
        .iter()
        .find(|t| t.contains("analytics") && t.contains("LOG-END-OFFSET"))
        .unwrap();
    let lag: i64 = analytics
        .lines()
        .skip_while(|l| !l.starts_with("GROUP"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(5)?.parse::<i64>().ok())
        .sum();
    assert_eq!(lag, 1_800 - i64::try_from(story.analytics.read).unwrap());
    // What does not depend on timing is kept as snapshots: where the notification group
    // stands once it has read everything, and where the search team's reset put its group.
    let table = |needle: &str| said.iter().find(|t| t.contains(needle)).unwrap().clone();
    insta::assert_snapshot!("notification_lag", table("notification order-events"));
    insta::assert_snapshot!("search_reset", table("NEW-OFFSET"));
    broker.shutdown().await.unwrap();
}
