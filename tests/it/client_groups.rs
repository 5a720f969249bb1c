//! eddy's consumer as a group member against a real broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names): three members share a topic, cooperative-sticky moves only
//! what must move, a static member comes back to its partitions without a rebalance, a group
//! resumes from its commits, a new member joins again at once with the id it was given, and
//! the rebalance listener hears of every change.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy::client::{
    Admin, Assignor, Consumer, ConsumerConfig, CooperativeStickyAssignor, OffsetReset, Producer,
    ProducerConfig, ProducerRecord, RebalanceListener, RoundRobinAssignor,
};
use eddy_core::log::TopicPartition;
use eddy_tests::{wait_until, TestBroker};
use tokio::sync::watch;

async fn fill(broker: &TestBroker, topic: &str, count: usize) {
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    for i in 0..count {
        producer
            .send(ProducerRecord::new(topic, format!("{i}")).key(format!("k{i}")))
            .await
            .unwrap();
    }
    producer.close().await.unwrap();
}

/// What a member's listener heard, in order: `+t-0` assigned, `-t-0` revoked, `!t-0` lost.
type Events = Arc<Mutex<Vec<String>>>;

struct Recorder(Events);

#[async_trait::async_trait]
impl RebalanceListener for Recorder {
    async fn on_partitions_assigned(&mut self, _: &mut Consumer, partitions: &[TopicPartition]) {
        let mut events = self.0.lock().unwrap();
        events.extend(partitions.iter().map(|tp| format!("+{tp}")));
    }

    async fn on_partitions_revoked(
        &mut self,
        consumer: &mut Consumer,
        partitions: &[TopicPartition],
    ) {
        // Commit what was read before the partitions go, as applications do.
        let _ = consumer.commit_positions().await;
        let mut events = self.0.lock().unwrap();
        events.extend(partitions.iter().map(|tp| format!("-{tp}")));
    }

    async fn on_partitions_lost(&mut self, _: &mut Consumer, partitions: &[TopicPartition]) {
        let mut events = self.0.lock().unwrap();
        events.extend(partitions.iter().map(|tp| format!("!{tp}")));
    }
}

/// A member polling in its own task until told to stop.
struct Member {
    assignment: Arc<Mutex<Vec<TopicPartition>>>,
    records: Arc<Mutex<Vec<(i32, i64)>>>,
    events: Events,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Member {
    fn spawn(
        config: ConsumerConfig,
        topic: &str,
        assignors: Option<Vec<Arc<dyn Assignor>>>,
    ) -> Self {
        let assignment = Arc::new(Mutex::new(Vec::new()));
        let records = Arc::new(Mutex::new(Vec::new()));
        let events: Events = Arc::default();
        let (stop, mut stopped) = watch::channel(false);
        let mut consumer = Consumer::new(config).unwrap();
        if let Some(a) = assignors {
            consumer.set_assignors(a);
        }
        consumer.set_rebalance_listener(Recorder(Arc::clone(&events)));
        consumer.subscribe(&[topic]).unwrap();
        let (held, seen) = (Arc::clone(&assignment), Arc::clone(&records));
        let task = tokio::spawn(async move {
            while !*stopped.borrow() {
                let batch = tokio::select! {
                    batch = consumer.poll(Duration::from_millis(100)) => batch.unwrap(),
                    _ = stopped.changed() => break,
                };
                seen.lock()
                    .unwrap()
                    .extend(batch.iter().map(|r| (r.partition, r.offset)));
                if !batch.is_empty() {
                    // A commit may meet a rebalance (REBALANCE_IN_PROGRESS): the records are
                    // committed with the next batch, or by the revocation listener.
                    if let Err(e) = consumer.commit_positions().await {
                        assert!(e.code().is_some(), "commit failed: {e}");
                    }
                }
                *held.lock().unwrap() = consumer.assignment();
            }
            consumer.close().await.unwrap();
        });
        Self {
            assignment,
            records,
            events,
            stop,
            task,
        }
    }

    fn partitions(&self) -> BTreeSet<i32> {
        self.assignment
            .lock()
            .unwrap()
            .iter()
            .map(|tp| tp.partition)
            .collect()
    }

    /// Panics if the member's task ended (a poll failed), so tests fail at once and say why.
    fn check_alive(&self) {
        assert!(!self.task.is_finished(), "a member stopped polling");
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    async fn stop(self) -> Vec<(i32, i64)> {
        let _ = self.stop.send(true);
        self.task.await.unwrap();
        let records = self.records.lock().unwrap().clone();
        records
    }
}

fn member_config(broker: &TestBroker, group: &str) -> ConsumerConfig {
    ConsumerConfig::new(broker.bootstrap())
        .group_id(group)
        .auto_offset_reset(OffsetReset::Earliest)
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_millis(200))
}

/// Waits until the members hold these numbers of partitions, covering all `total` between
/// them with none held twice.
async fn settled(members: &[&Member], counts: &[usize], total: i32) {
    wait_until(Duration::from_secs(60), "the members hold", async || {
        members.iter().for_each(|m| m.check_alive());
        let held: Vec<BTreeSet<i32>> = members.iter().map(|m| m.partitions()).collect();
        let all: BTreeSet<i32> = held.iter().flatten().copied().collect();
        let sizes: Vec<usize> = held.iter().map(BTreeSet::len).collect();
        if sizes == counts
            && all.len() == total as usize
            && sizes.iter().sum::<usize>() == total as usize
        {
            return Ok(());
        }
        Err(format!("{held:?}, not sizes {counts:?}"))
    })
    .await;
}

#[tokio::test]
async fn three_members_share_six_partitions_and_read_each_record_once() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("shared", 6).await;
    let group = broker.unique("sharers");
    // Committed offsets from the start: members find their positions without looking up
    // any offset, so a member that never leads must still learn where partitions live.
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let start = (0..6)
        .map(|p| (TopicPartition::new(&topic, p), 0))
        .collect();
    admin.alter_group_offsets(&group, &start).await.unwrap();
    let members: Vec<Member> = (0..3)
        .map(|_| Member::spawn(member_config(&broker, &group), &topic, None))
        .collect();
    settled(&members.iter().collect::<Vec<_>>(), &[2, 2, 2], 6).await;
    fill(&broker, &topic, 600).await;
    let what = "not every record was read: (held, records per partition)";
    wait_until(Duration::from_secs(60), what, async || {
        members.iter().for_each(Member::check_alive);
        let read: usize = members
            .iter()
            .map(|m| m.records.lock().unwrap().len())
            .sum();
        if read >= 600 {
            return Ok(());
        }
        let counts: Vec<(BTreeSet<i32>, BTreeMap<i32, usize>)> = members
            .iter()
            .map(|m| {
                let per_partition =
                    m.records
                        .lock()
                        .unwrap()
                        .iter()
                        .fold(BTreeMap::new(), |mut c, (p, _)| {
                            *c.entry(*p).or_insert(0) += 1;
                            c
                        });
                (m.partitions(), per_partition)
            })
            .collect();
        Err(format!("{counts:?}"))
    })
    .await;
    let mut read = Vec::new();
    for m in members {
        let held = m.partitions();
        let records = m.stop().await;
        // Each member read only its own partitions.
        assert!(records.iter().all(|(p, _)| held.contains(p)));
        read.extend(records);
    }
    read.sort();
    let unique: BTreeSet<_> = read.iter().collect();
    assert_eq!(read.len(), 600, "each record once");
    assert_eq!(unique.len(), 600);
}

#[tokio::test]
async fn cooperative_sticky_moves_only_the_partitions_that_must_move() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("cooperative", 6).await;
    let group = broker.unique("cooperators");
    let sticky = || {
        Some(vec![
            Arc::new(CooperativeStickyAssignor) as Arc<dyn Assignor>
        ])
    };
    let a = Member::spawn(member_config(&broker, &group), &topic, sticky());
    let b = Member::spawn(member_config(&broker, &group), &topic, sticky());
    settled(&[&a, &b], &[3, 3], 6).await;
    let (a_before, b_before) = (a.partitions(), b.partitions());
    let (a_heard, b_heard) = (a.events().len(), b.events().len());
    let c = Member::spawn(member_config(&broker, &group), &topic, sticky());
    settled(&[&a, &b, &c], &[2, 2, 2], 6).await;
    // Each of a and b gave up exactly one partition, kept the other two throughout, and was
    // assigned nothing new.
    for (member, before, heard) in [(&a, &a_before, a_heard), (&b, &b_before, b_heard)] {
        let after: Vec<String> = member.events()[heard..].to_vec();
        let revoked: Vec<&String> = after.iter().filter(|e| e.starts_with('-')).collect();
        assert_eq!(revoked.len(), 1, "{after:?}");
        assert!(
            after
                .iter()
                .all(|e| !e.starts_with('+') && !e.starts_with('!')),
            "{after:?}"
        );
        assert!(member.partitions().is_subset(before));
    }
    // c got exactly what a and b gave up.
    let moved: BTreeSet<i32> = a_before
        .difference(&a.partitions())
        .chain(b_before.difference(&b.partitions()))
        .copied()
        .collect();
    assert_eq!(c.partitions(), moved);
    for m in [a, b, c] {
        m.stop().await;
    }
}

#[tokio::test]
async fn a_static_member_returns_to_its_partitions_without_a_rebalance() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("static", 4).await;
    let group = broker.unique("statics");
    let config = |id: &str| member_config(&broker, &group).group_instance_id(id);
    let a = Member::spawn(config("a"), &topic, None);
    let b = Member::spawn(config("b"), &topic, None);
    settled(&[&a, &b], &[2, 2], 4).await;
    let a_held = a.partitions();
    let b_heard = b.events().len();
    // a goes away (a static member does not leave the group) and comes back in time.
    a.stop().await;
    let a = Member::spawn(config("a"), &topic, None);
    settled(&[&a, &b], &[2, 2], 4).await;
    assert_eq!(a.partitions(), a_held);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        b.events()[b_heard..],
        [] as [String; 0],
        "b saw a rebalance"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_group_resumes_from_its_commits() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("resume", 2).await;
    let group = broker.unique("resumers");
    fill(&broker, &topic, 100).await;
    let mut first = Consumer::new(member_config(&broker, &group).max_poll_records(30)).unwrap();
    first.subscribe(&[&topic]).unwrap();
    let mut read = Vec::new();
    while read.len() < 30 {
        read.extend(first.poll(Duration::from_millis(200)).await.unwrap());
    }
    first.commit_positions().await.unwrap();
    first.close().await.unwrap();
    let mut second = Consumer::new(member_config(&broker, &group)).unwrap();
    second.subscribe(&[&topic]).unwrap();
    wait_until(Duration::from_secs(30), "not 100 records", async || {
        read.extend(second.poll(Duration::from_millis(200)).await.unwrap());
        read.len() >= 100
    })
    .await;
    let positions: BTreeMap<(i32, i64), usize> = read.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry((r.partition, r.offset)).or_default() += 1;
        m
    });
    assert_eq!(positions.len(), 100, "nothing lost");
    assert!(positions.values().all(|&n| n == 1), "nothing read twice");
    second.close().await.unwrap();
}

/// A new member's first JoinGroup is answered MEMBER_ID_REQUIRED with the id to use; as in
/// Kafka's consumer the member joins again at once, not after its retry backoff.
#[tokio::test]
async fn a_new_member_joins_again_at_once_with_the_member_id_it_was_given() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("member-id", 1).await;
    let group = broker.unique("newcomers");
    fill(&broker, &topic, 1).await;
    // The group's coordinator is found and loaded first (a fresh Kafka cluster creates
    // `__consumer_offsets` at the first lookup), so that only the join could wait out the
    // member's backoff.
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "no coordinator answered",
        async || admin.describe_group(&group).await.is_ok(),
    )
    .await;
    let mut config = member_config(&broker, &group);
    config.client = config.client.retry_backoff(Duration::from_secs(600));
    let mut member = Consumer::new(config).unwrap();
    member.subscribe(&[&topic]).unwrap();
    // A poll joins the group inside it, so the bound is around the polls.
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let records = member.poll(Duration::from_millis(200)).await.unwrap();
            if !records.is_empty() {
                return records;
            }
        }
    })
    .await
    .expect("the member joined and read within a minute, its backoff being ten");
    assert_eq!(read.len(), 1);
    member.close().await.unwrap();
}

#[tokio::test]
async fn roundrobin_deals_the_partitions_in_turn() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("dealt", 4).await;
    let group = broker.unique("dealers");
    let roundrobin = || Some(vec![Arc::new(RoundRobinAssignor) as Arc<dyn Assignor>]);
    let a = Member::spawn(member_config(&broker, &group), &topic, roundrobin());
    let b = Member::spawn(member_config(&broker, &group), &topic, roundrobin());
    settled(&[&a, &b], &[2, 2], 4).await;
    let mut held = [a.partitions(), b.partitions()];
    held.sort();
    assert_eq!(held, [BTreeSet::from([0, 2]), BTreeSet::from([1, 3])]);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_member_that_stops_polling_loses_its_partitions_to_the_others() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("stalled", 4).await;
    let group = broker.unique("stallers");
    let config = member_config(&broker, &group).max_poll_interval(Duration::from_secs(2));
    let steady = Member::spawn(config.clone(), &topic, None);
    let events: Events = Arc::default();
    let mut slow = Consumer::new(config).unwrap();
    slow.set_rebalance_listener(Recorder(Arc::clone(&events)));
    slow.subscribe(&[&topic]).unwrap();
    // The two share the partitions once the polled member has its half.
    let halves = async |slow: &mut Consumer, what: &str| {
        wait_until(Duration::from_secs(60), what, async || {
            slow.poll(Duration::from_millis(100)).await.unwrap();
            slow.assignment().len() == 2 && steady.partitions().len() == 2
        })
        .await;
    };
    halves(&mut slow, "the group did not settle").await;
    let had: Vec<String> = slow
        .assignment()
        .iter()
        .map(|tp| format!("!{tp}"))
        .collect();
    // The slow member stops polling: past max.poll.interval.ms it leaves the group, and the
    // steady one takes every partition.
    let what = "the steady member never got every partition";
    wait_until(Duration::from_secs(60), what, async || {
        steady.partitions().len() == 4
    })
    .await;
    // At its next poll the slow member hears that its partitions were lost, and joins again.
    halves(&mut slow, "the slow member did not come back").await;
    let lost: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.starts_with('!'))
        .cloned()
        .collect();
    assert_eq!(lost, had);
    slow.close().await.unwrap();
    steady.stop().await;
}

#[tokio::test]
async fn auto_commit_commits_what_the_polls_returned() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("autocommit", 1).await;
    let group = broker.unique("autocommitters");
    fill(&broker, &topic, 10).await;
    let mut config = member_config(&broker, &group);
    config.enable_auto_commit = true;
    config.auto_commit_interval = Duration::from_millis(200);
    let mut consumer = Consumer::new(config).unwrap();
    consumer.subscribe(&[&topic]).unwrap();
    let mut read = 0;
    wait_until(Duration::from_secs(30), "not 10 records", async || {
        read += consumer
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .len();
        read >= 10
    })
    .await;
    // Polls past the interval commit the positions, without an explicit commit.
    let tp = TopicPartition::new(&topic, 0);
    wait_until(Duration::from_secs(30), "committed", async || {
        consumer.poll(Duration::from_millis(100)).await.unwrap();
        let committed = consumer.committed(std::slice::from_ref(&tp)).await.unwrap();
        if committed.get(&tp) == Some(&10) {
            return Ok(());
        }
        Err(format!("{committed:?}"))
    })
    .await;
    consumer.close().await.unwrap();
}
