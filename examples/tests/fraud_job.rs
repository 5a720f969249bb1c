//! The fraud job run to completion on the embedded broker with a small input: its alerts are
//! exactly the planted bots, a second run over the same input adds nothing, and the generator
//! refuses to write over earlier traffic.

use std::time::Duration;

use eddy::embedded::EmbeddedBroker;
use eddy_examples::fraud::job::{self, JobError, JobOptions, Report, Summary};
use eddy_examples::fraud::traffic::{Plan, Traffic};

const WINDOW: Duration = Duration::from_secs(600);

fn traffic() -> Traffic {
    Traffic {
        orders: 3_000,
        bots: 30,
        window: WINDOW,
        seed: 5,
        start_at: 0,
    }
}

async fn run(options: &JobOptions) -> Result<(Summary, Vec<String>), JobError> {
    let mut alerted = Vec::new();
    let summary = job::run(options, &mut |report| {
        if let Report::Alert(alert) = report {
            alerted.push(alert.order_id.clone());
        }
    })
    .await?;
    Ok((summary, alerted))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_alerts_exactly_the_planted_bots_and_a_second_run_adds_nothing() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut options = JobOptions {
        bootstrap: broker.bootstrap(),
        traffic: Some(traffic().ending_now()),
        window: WINDOW,
        partitions: 3,
        state_dir: state.path().to_path_buf(),
        idle: Duration::from_millis(500),
    };
    let (first, alerted) = run(&options).await.unwrap();
    let plan = Plan::new(&options.traffic.unwrap()).unwrap();
    assert_eq!(first.records_processed, plan.events().len() as u64);
    assert!(first.is_exact(), "{first}\n{first:?}");
    assert_eq!(first.alerts, 30);
    assert_eq!(
        alerted
            .iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        plan.bots()
    );

    // The generator will not write the same orders again.
    assert!(matches!(
        run(&options).await,
        Err(JobError::InputNotEmpty(n)) if n == plan.events().len() as i64
    ));

    // Read again, the input has been processed: nothing new, the same alerts.
    options.traffic = None;
    let (second, _) = run(&options).await.unwrap();
    assert_eq!(second.records_processed, 0);
    assert_eq!(second.alerted, first.alerted);
    assert_eq!(second.planted, None);
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_a_generator_the_input_must_exist() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let options = JobOptions {
        bootstrap: broker.bootstrap(),
        traffic: None,
        window: WINDOW,
        partitions: 1,
        state_dir: state.path().to_path_buf(),
        idle: Duration::from_millis(100),
    };
    assert!(matches!(run(&options).await, Err(JobError::NoInput)));
    broker.shutdown().await.unwrap();
}
