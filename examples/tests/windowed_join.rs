//! The windowed join run to its end on the embedded broker, two partitions: every order paid
//! within five minutes is in `paid-orders` once, every other one in `unpaid-orders` once.

use std::collections::BTreeSet;

use eddy::embedded::EmbeddedBroker;
use eddy::log::partition_for_key;
use eddy_examples::windowed_join::{self, evening, PAYMENT_WINDOW};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_and_unpaid_orders_are_told_apart_once_each() {
    let (orders, payments) = evening(60, 1_767_222_000_000);
    // The last orders, which close the others' windows, reach both partitions.
    let late: BTreeSet<i32> = orders
        .iter()
        .filter(|o| o.order_id.starts_with("late"))
        .map(|o| partition_for_key(o.order_id.as_bytes(), 2))
        .collect();
    assert_eq!(late.len(), 2);
    let window = i64::try_from(PAYMENT_WINDOW.as_millis()).unwrap();
    let paid_in_time = |o: &&windowed_join::Order| {
        payments
            .iter()
            .any(|p| p.order_id == o.order_id && (0..=window).contains(&(p.at - o.at)))
    };
    let mut expected_paid: Vec<&str> = orders
        .iter()
        .filter(paid_in_time)
        .map(|o| o.order_id.as_str())
        .collect();
    let mut expected_unpaid: Vec<&str> = orders
        .iter()
        .filter(|o| !paid_in_time(o))
        .map(|o| o.order_id.as_str())
        .collect();
    expected_paid.sort_unstable();
    expected_unpaid.sort_unstable();
    assert!(!expected_unpaid.is_empty() && expected_paid.len() > expected_unpaid.len());

    let broker = EmbeddedBroker::start().await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let (paid, unpaid) = windowed_join::run(&broker.bootstrap(), &orders, &payments, state.path())
        .await
        .unwrap();
    let mut paid: Vec<&str> = paid.iter().map(|p| p.order_id.as_str()).collect();
    let mut unpaid: Vec<&str> = unpaid.iter().map(|o| o.order_id.as_str()).collect();
    paid.sort_unstable();
    unpaid.sort_unstable();
    assert_eq!(paid, expected_paid);
    assert_eq!(unpaid, expected_unpaid);
    broker.shutdown().await.unwrap();
}
