//! The fraud job on a broker: the `fraud_detection` example's work, here so that the test
//! suite runs it too. [`run`] creates the topics, writes the planned traffic to
//! `order-events` (unless there is no [`Traffic`]), runs the topology as a streams
//! application, exactly once, reads `fraud-alerts` as a `read_committed` consumer would — so
//! an alert is seen only once its transaction commits — and stops when the input is done: the
//! application's committed offsets at the end of every input partition and no record
//! processed for [`JobOptions::idle`]. Its [`Summary`] says what was found.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use eddy::app::{
    grouped, Bootstrap, CloseError, ConfigError, MetricsSnapshot, ProcessingGuarantee, Progress,
    StartError, State, Streams, StreamsConfig,
};
use eddy::client::{
    Admin, ClientError, Consumer, ConsumerConfig, IsolationLevel, NewTopic, OffsetSpec, Producer,
    ProducerConfig, ProducerRecord, Topic,
};
use eddy::log::TopicPartition;
use eddy::streams::TopologyError;

use super::traffic::{Plan, PlanError, Traffic};
use super::{topology, Alert, FRAUD_ALERTS, ORDER_EVENTS};
use crate::on_broker::{caught_up, ExampleError};

/// The application's id: its consumer group and the prefix of its internal topics.
pub const APPLICATION_ID: &str = "fraud-detection";

/// How often progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How a run goes.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// The traffic to write first, or `None` to read what `order-events` holds.
    pub traffic: Option<Traffic>,
    /// The pattern's window.
    pub window: Duration,
    /// Partitions of the topics the job creates.
    pub partitions: i32,
    /// `state.dir`.
    pub state_dir: PathBuf,
    /// How long the caught-up application must have processed nothing before the job stops.
    pub idle: Duration,
}

/// What a run tells its caller as it goes.
#[derive(Debug)]
pub enum Report<'a> {
    /// The generator starts writing.
    Generating {
        /// Orders.
        orders: u32,
        /// Bots among them.
        bots: u32,
        /// Events.
        events: usize,
    },
    /// The generator wrote every event.
    Generated {
        /// Events written.
        events: u64,
        /// How long it took.
        elapsed: Duration,
    },
    /// An alert, committed.
    Alert(&'a Alert),
    /// The application's progress, every second.
    Progress(Progress),
}

/// What a run found.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Input records the application processed in this run.
    pub records_processed: u64,
    /// From the first record processed to the last.
    pub processing: Duration,
    /// Alerts in `fraud-alerts`, this run's and any before.
    pub alerts: u64,
    /// How many alerts each alerted order has.
    pub alerted: BTreeMap<String, u64>,
    /// The bots the generator planted, when it ran.
    pub planted: Option<BTreeSet<String>>,
    /// The whole run, topics to summary.
    pub elapsed: Duration,
}

impl Summary {
    /// Records processed a second.
    pub fn records_per_sec(&self) -> f64 {
        self.records_processed as f64 / self.processing.as_secs_f64().max(1e-3)
    }

    /// Planted bots that raised no alert.
    pub fn missed(&self) -> Vec<&str> {
        let planted = self.planted.iter().flatten();
        planted
            .filter(|b| !self.alerted.contains_key(*b))
            .map(String::as_str)
            .collect()
    }

    /// Alerted orders that are not planted bots (all of them without a generator).
    pub fn false_alarms(&self) -> Vec<&str> {
        self.alerted
            .keys()
            .filter(|o| self.planted.as_ref().is_some_and(|p| !p.contains(*o)))
            .map(String::as_str)
            .collect()
    }

    /// Whether the alerts are the planted bots, each once.
    pub fn is_exact(&self) -> bool {
        self.planted.as_ref().is_some_and(|planted| {
            self.alerted.len() == planted.len()
                && self
                    .alerted
                    .iter()
                    .all(|(o, &n)| n == 1 && planted.contains(o))
        })
    }
}

/// What can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The broker or the application failed.
    #[error(transparent)]
    Run(#[from] ExampleError),
    /// The traffic asked for cannot be drawn.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The generator would write over earlier traffic.
    #[error(
        "{ORDER_EVENTS} already holds {0} records: read them with --no-generator, or delete the topic"
    )]
    InputNotEmpty(i64),
    /// There is nothing to read.
    #[error("{ORDER_EVENTS} does not exist: run with the generator first")]
    NoInput,
}

/// What an example's run can fail on fails the job the same way.
macro_rules! failing_the_run {
    ($($error:ty),*) => {$(
        impl From<$error> for JobError {
            fn from(e: $error) -> Self {
                Self::Run(e.into())
            }
        }
    )*};
}

failing_the_run!(ClientError, TopologyError, ConfigError, StartError);

impl From<CloseError> for JobError {
    fn from(e: CloseError) -> Self {
        Self::Run(ExampleError::Close(Box::new(e)))
    }
}

fn serde_failed(reason: String) -> JobError {
    JobError::Run(ExampleError::Serde(reason))
}

/// Runs the job, telling `report` what happens; see the module's documentation.
pub async fn run(
    options: &JobOptions,
    report: &mut dyn FnMut(Report<'_>),
) -> Result<Summary, JobError> {
    let started = Instant::now();
    let admin = Admin::connect(&options.bootstrap).await?;
    let plan = match &options.traffic {
        Some(traffic) => Some(Plan::new(traffic)?),
        None => None,
    };
    let input = input_partitions(&admin, options, plan.is_some()).await?;
    admin
        .ensure_topic(&NewTopic::new(FRAUD_ALERTS, options.partitions))
        .await?;
    let alert_partitions = partitions(FRAUD_ALERTS, admin.partition_count(FRAUD_ALERTS).await?);

    let mut config = StreamsConfig::new(APPLICATION_ID);
    config.bootstrap = Bootstrap::Servers(vec![options.bootstrap.clone()]);
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    config.state_dir = options.state_dir.clone();
    let mut streams = Streams::new(topology(options.window)?, config)?;
    streams.start().await?;

    let planted = plan.as_ref().map(Plan::bots);
    let mut generator = plan.map(|plan| {
        report(Report::Generating {
            orders: options.traffic.map_or(0, |t| t.orders),
            bots: options.traffic.map_or(0, |t| t.bots),
            events: plan.events().len(),
        });
        tokio::spawn(generate(options.bootstrap.clone(), plan))
    });

    let mut alerts = Alerts::open(&options.bootstrap, &alert_partitions).await?;
    let mut figures = Figures::new(streams.metrics());
    let mut next_check = Instant::now();
    loop {
        alerts.poll(Duration::from_millis(50), report).await?;
        if let Some(done) = generator.take_if(|g| g.is_finished()) {
            let (events, elapsed) = done
                .await
                .map_err(|e| serde_failed(format!("the generator failed: {e}")))??;
            report(Report::Generated { events, elapsed });
        }
        match streams.state() {
            State::Error | State::PendingError | State::NotRunning => {
                return Err(ExampleError::Stopped(streams.state()).into())
            }
            _ => {}
        }
        figures.update(streams.metrics(), report);
        let idle = figures.idle_for() >= options.idle;
        if generator.is_none() && idle && Instant::now() >= next_check {
            next_check = Instant::now() + Duration::from_millis(200);
            if caught_up(&admin, APPLICATION_ID, &input).await? {
                break;
            }
        }
    }
    let last = streams.metrics();
    streams.close(Duration::from_secs(30)).await?;
    alerts.drain(report).await?;
    Ok(Summary {
        records_processed: last.records_processed,
        processing: figures.processing(),
        alerts: alerts.count,
        alerted: alerts.by_order,
        planted,
        elapsed: started.elapsed(),
    })
}

fn partitions(topic: &str, count: i32) -> Vec<TopicPartition> {
    (0..count).map(|p| TopicPartition::new(topic, p)).collect()
}

/// `order-events`' partitions: created empty for the generator, or found for reading.
async fn input_partitions(
    admin: &Admin,
    options: &JobOptions,
    generating: bool,
) -> Result<Vec<TopicPartition>, JobError> {
    if generating {
        admin
            .ensure_topic(&NewTopic::new(ORDER_EVENTS, options.partitions))
            .await?;
    }
    let count = admin.partition_count(ORDER_EVENTS).await.unwrap_or(0);
    if count == 0 {
        return Err(JobError::NoInput);
    }
    let input = partitions(ORDER_EVENTS, count);
    if generating {
        let held: i64 = admin
            .list_offsets(&input, OffsetSpec::Latest)
            .await?
            .values()
            .sum();
        if held > 0 {
            return Err(JobError::InputNotEmpty(held));
        }
    }
    Ok(input)
}

/// Writes the plan's events to `order-events`, keyed by order, stamped with their time; the
/// number written and how long it took.
async fn generate(bootstrap: String, plan: Plan) -> Result<(u64, Duration), JobError> {
    let started = Instant::now();
    let producer = Producer::new(
        ProducerConfig::new(&bootstrap)
            .client_id("fraud-detection-generator")
            .batch_size(256 * 1024)
            .linger(Duration::from_millis(5)),
    )?;
    let topic = Topic::from(ORDER_EVENTS);
    let mut last = None;
    let mut written = 0;
    for planned in plan.events() {
        let event = plan.event(planned);
        let value = serde_json::to_vec(&event).map_err(|e| serde_failed(e.to_string()))?;
        let record = ProducerRecord::new(topic.clone(), value)
            .key(event.order_id)
            .timestamp(event.at);
        last = Some(producer.send(record).await?);
        written += 1;
    }
    producer.flush().await?;
    if let Some(last) = last {
        last.await?;
    }
    producer.close().await?;
    Ok((written, started.elapsed()))
}

/// The application's figures over the run: progress reports, and when records were processed.
struct Figures {
    last_report: MetricsSnapshot,
    reported_at: Instant,
    processed: u64,
    /// When the first records were seen processed (the check before them, in fact).
    first: Option<Instant>,
    /// When the count last moved.
    changed: Instant,
    checked: Instant,
}

impl Figures {
    fn new(now: MetricsSnapshot) -> Self {
        let at = Instant::now();
        Self {
            processed: now.records_processed,
            last_report: now,
            reported_at: at,
            first: None,
            changed: at,
            checked: at,
        }
    }

    fn update(&mut self, now: MetricsSnapshot, report: &mut dyn FnMut(Report<'_>)) {
        let at = Instant::now();
        if now.records_processed != self.processed {
            self.first.get_or_insert(self.checked);
            self.processed = now.records_processed;
            self.changed = at;
        }
        self.checked = at;
        if self.reported_at.elapsed() >= PROGRESS_EVERY {
            let elapsed = self.reported_at.elapsed();
            report(Report::Progress(Progress::between(
                &self.last_report,
                &now,
                elapsed,
            )));
            self.last_report = now;
            self.reported_at = at;
        }
    }

    fn idle_for(&self) -> Duration {
        self.changed.elapsed()
    }

    fn processing(&self) -> Duration {
        self.first
            .map_or(Duration::ZERO, |first| self.changed.duration_since(first))
    }
}

/// A `read_committed` reader of every partition of `fraud-alerts` from the beginning.
struct Alerts {
    consumer: Consumer,
    partitions: Vec<TopicPartition>,
    count: u64,
    by_order: BTreeMap<String, u64>,
}

impl Alerts {
    async fn open(bootstrap: &str, partitions: &[TopicPartition]) -> Result<Self, ClientError> {
        let mut consumer = Consumer::new(
            ConsumerConfig::new(bootstrap)
                .client_id("fraud-detection-alerts")
                .isolation_level(IsolationLevel::ReadCommitted),
        )?;
        consumer.assign(partitions)?;
        consumer.seek_to_beginning(partitions).await?;
        Ok(Self {
            consumer,
            partitions: partitions.to_vec(),
            count: 0,
            by_order: BTreeMap::new(),
        })
    }

    /// Reads what has been committed, waiting up to `timeout` for it.
    async fn poll(
        &mut self,
        timeout: Duration,
        report: &mut dyn FnMut(Report<'_>),
    ) -> Result<(), JobError> {
        for record in self.consumer.poll(timeout).await? {
            let value = record.value.unwrap_or_default();
            let alert: Alert = serde_json::from_slice(&value).map_err(|e| {
                serde_failed(format!(
                    "{FRAUD_ALERTS} partition {} offset {} is no alert: {e}",
                    record.partition, record.offset
                ))
            })?;
            self.count += 1;
            *self.by_order.entry(alert.order_id.clone()).or_insert(0) += 1;
            report(Report::Alert(&alert));
        }
        Ok(())
    }

    /// Reads up to the last committed alert.
    async fn drain(&mut self, report: &mut dyn FnMut(Report<'_>)) -> Result<(), JobError> {
        let ends = self.consumer.end_offsets(&self.partitions).await?;
        for (tp, end) in ends {
            while self.consumer.position(&tp).await? < end {
                self.poll(Duration::from_millis(100), report).await?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "records processed  {} in {:.1} s, {} records/s",
            grouped(self.records_processed),
            self.processing.as_secs_f64(),
            grouped(self.records_per_sec().round() as u64),
        )?;
        writeln!(
            f,
            "alerts             {} on {} orders",
            grouped(self.alerts),
            grouped(self.alerted.len() as u64)
        )?;
        match &self.planted {
            Some(planted) => {
                let (missed, false_alarms) = (self.missed(), self.false_alarms());
                writeln!(
                    f,
                    "bots planted       {}, found {}, missed {}; normal buyers alerted {}",
                    grouped(planted.len() as u64),
                    grouped((planted.len() - missed.len()) as u64),
                    grouped(missed.len() as u64),
                    grouped(false_alarms.len() as u64),
                )?;
            }
            None => writeln!(f, "bots planted       unknown: no generator ran")?,
        }
        write!(f, "time               {:.1} s", self.elapsed.as_secs_f64())
    }
}
