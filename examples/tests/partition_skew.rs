//! The partition-skew minute written to the embedded broker: each partition's end offset is
//! the number of the minute's keys murmur2 puts there, keyed by order and keyed by show.

use eddy::embedded::EmbeddedBroker;
use eddy_examples::partition_skew::{self, by_murmur2, on_sale_minute, PARTITIONS};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_holds_each_key_where_murmur2_puts_it() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let sales = on_sale_minute(3_000, 1_767_222_000_000, 9);
    let skew = partition_skew::run(&broker.bootstrap(), &sales)
        .await
        .unwrap();
    let by_order = by_murmur2(sales.iter().map(|s| s.order_id.as_str()), PARTITIONS);
    let by_show = by_murmur2(sales.iter().map(|s| s.show), PARTITIONS);
    assert_eq!(skew.by_order, by_order);
    assert_eq!(skew.by_show, by_show);
    assert_eq!(skew.by_show.iter().sum::<u64>(), 3_000);
    broker.shutdown().await.unwrap();
}
