use super::*;
use proptest::prelude::*;

fn member(
    id: &str,
    topics: &[&str],
    owned: &[(&str, i32)],
    generation_id: i32,
) -> MemberSubscription {
    MemberSubscription {
        member_id: id.to_string(),
        group_instance_id: None,
        topics: topics.iter().map(|t| t.to_string()).collect(),
        owned_partitions: owned
            .iter()
            .map(|&(t, p)| TopicPartition::new(t, p))
            .collect(),
        generation_id,
        user_data: None,
    }
}

fn counts(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|&(t, n)| (t.to_string(), n)).collect()
}

fn partitions(a: &Assignment) -> Vec<String> {
    a.partitions.iter().map(|tp| tp.to_string()).collect()
}

#[test]
fn range_cuts_each_topic_into_ranges_in_member_order() {
    // As Kafka's RangeAssignor: 5 partitions over 2 members → 3 and 2, per topic.
    let members = [
        member("b", &["t", "u"], &[], -1),
        member("a", &["t", "u"], &[], -1),
    ];
    let out = RangeAssignor.assign(&counts(&[("t", 5), ("u", 2)]), &members);
    assert_eq!(partitions(&out["a"]), ["t-0", "t-1", "t-2", "u-0"]);
    assert_eq!(partitions(&out["b"]), ["t-3", "t-4", "u-1"]);
}

#[test]
fn roundrobin_deals_partitions_in_turn_skipping_members_not_reading_the_topic() {
    let members = [
        member("a", &["t", "u"], &[], -1),
        member("b", &["t"], &[], -1),
        member("c", &["t", "u"], &[], -1),
    ];
    let out = RoundRobinAssignor.assign(&counts(&[("t", 4), ("u", 3)]), &members);
    assert_eq!(partitions(&out["a"]), ["t-0", "t-3", "u-1"]);
    assert_eq!(partitions(&out["b"]), ["t-1"]);
    assert_eq!(partitions(&out["c"]), ["t-2", "u-0", "u-2"]);
}

#[test]
fn cooperative_sticky_moves_only_what_balance_needs_in_two_rebalances() {
    let topic = counts(&[("t", 6)]);
    let first = CooperativeStickyAssignor.assign(
        &topic,
        &[member("a", &["t"], &[], -1), member("b", &["t"], &[], -1)],
    );
    assert_eq!(partitions(&first["a"]).len(), 3);
    assert_eq!(partitions(&first["b"]).len(), 3);
    let owned = |m: &str| -> Vec<(&str, i32)> {
        first[m]
            .partitions
            .iter()
            .map(|tp| ("t", tp.partition))
            .collect()
    };
    // c joins: a and b each give up exactly one partition, which nobody gets yet.
    let (a_owned, b_owned) = (owned("a"), owned("b"));
    let joined = [
        member("a", &["t"], &a_owned, 1),
        member("b", &["t"], &b_owned, 1),
        member("c", &["t"], &[], -1),
    ];
    let second = CooperativeStickyAssignor.assign(&topic, &joined);
    assert_eq!(second["a"].partitions.len(), 2);
    assert_eq!(second["b"].partitions.len(), 2);
    assert!(second["c"].partitions.is_empty());
    for m in ["a", "b"] {
        assert!(second[m]
            .partitions
            .iter()
            .all(|tp| first[m].partitions.contains(tp)));
    }
    // After a and b revoked, the follow-up rebalance gives c the two freed partitions.
    let settle = |m: &str| -> Vec<(&str, i32)> {
        second[m]
            .partitions
            .iter()
            .map(|tp| ("t", tp.partition))
            .collect()
    };
    let (a2, b2) = (settle("a"), settle("b"));
    let third = CooperativeStickyAssignor.assign(
        &topic,
        &[
            member("a", &["t"], &a2, 2),
            member("b", &["t"], &b2, 2),
            member("c", &["t"], &[], 2),
        ],
    );
    assert_eq!(third["a"], second["a"]);
    assert_eq!(third["b"], second["b"]);
    assert_eq!(third["c"].partitions.len(), 2);
}

proptest! {
    /// Whatever members held before, two rounds give every partition to exactly one member,
    /// with counts differing by at most one.
    #[test]
    fn cooperative_sticky_converges_to_a_balanced_assignment(
        partitions in 1i32..40,
        members in 1usize..7,
        owners in proptest::collection::vec(0usize..8, 0..40),
    ) {
        let topic = counts(&[("t", partitions)]);
        let ids: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
        let mut owned: Vec<Vec<(&str, i32)>> = vec![Vec::new(); members];
        for (p, &o) in owners.iter().enumerate().take(partitions as usize) {
            if o < members {
                owned[o].push(("t", p as i32));
            }
        }
        let round = |owned: &[Vec<(&str, i32)>]| {
            let subs: Vec<_> = ids
                .iter()
                .zip(owned)
                .map(|(id, o)| member(id, &["t"], o, 1))
                .collect();
            CooperativeStickyAssignor.assign(&topic, &subs)
        };
        let first = round(&owned);
        // Nothing is given to two members, and nobody is given what another still owns.
        let mut seen = BTreeSet::new();
        for a in first.values() {
            for tp in &a.partitions {
                prop_assert!(seen.insert(tp.clone()));
            }
        }
        let after: Vec<Vec<(&str, i32)>> = ids
            .iter()
            .map(|id| first[id].partitions.iter().map(|tp| ("t", tp.partition)).collect())
            .collect();
        let second = round(&after);
        let sizes: Vec<usize> = second.values().map(|a| a.partitions.len()).collect();
        prop_assert_eq!(sizes.iter().sum::<usize>(), partitions as usize);
        prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        // Sticky: what a member kept in round one it still has.
        for id in &ids {
            for tp in &first[id].partitions {
                prop_assert!(second[id].partitions.contains(tp));
            }
        }
    }
}
