//! Bad input on the wire closes that one connection, with nothing else affected: oversized
//! frames are refused before they are read, malformed and unknown requests close their
//! connection, and counts that promise more than the frame holds allocate nothing.

use std::time::Duration;

use eddy::embedded::EmbeddedBroker;
use eddy_tests::{leading_error_code, wait_until, WireConnection};
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};

async fn api_versions_works(addr: &str) -> bool {
    let mut conn = WireConnection::connect(addr).await.unwrap();
    let response = conn
        .request(3, &ApiVersionsRequest::default())
        .await
        .unwrap();
    response.error_code == 0 && !response.api_keys.is_empty()
}

#[tokio::test]
async fn an_oversized_frame_is_refused_before_it_is_read() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let addr = broker.bootstrap();
    let mut bystander = WireConnection::connect(&addr).await.unwrap();
    let mut attacker = WireConnection::connect(&addr).await.unwrap();
    // 200 MiB announced, nothing sent after it: the broker must not wait for the body.
    attacker
        .send_raw(&(200i32 << 20).to_be_bytes())
        .await
        .unwrap();
    assert!(attacker.is_closed_by_peer(Duration::from_secs(5)).await);
    let response = bystander
        .request(3, &ApiVersionsRequest::default())
        .await
        .unwrap();
    assert_eq!(response.error_code, 0, "the other connection is unaffected");
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_and_unknown_requests_close_only_their_connection() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let addr = broker.bootstrap();
    let mut bystander = WireConnection::connect(&addr).await.unwrap();
    let frames: Vec<Vec<u8>> = vec![
        // Too short for a header.
        vec![0, 0, 0, 3, 0, 18, 0],
        // Negative size.
        (-5i32).to_be_bytes().to_vec(),
        // Unknown API key 999.
        [
            &[0, 0, 0, 10][..],
            &999i16.to_be_bytes(),
            &[0, 0, 0, 0, 0, 1, 0xff, 0xff],
        ]
        .concat(),
        // Metadata v99: a version never served.
        [
            &[0, 0, 0, 10][..],
            &3i16.to_be_bytes(),
            &99i16.to_be_bytes(),
            &[0, 0, 0, 1, 0xff, 0xff],
        ]
        .concat(),
        // A Metadata v1 request whose topic count promises 2^31-1 topics in a few bytes.
        [
            &[0, 0, 0, 14][..],
            &3i16.to_be_bytes(),
            &1i16.to_be_bytes(),
            &7i32.to_be_bytes(),
            &(-1i16).to_be_bytes(),
            &i32::MAX.to_be_bytes(),
        ]
        .concat(),
        // A Produce v3 request promising 2^31-1 topics.
        [
            &[0, 0, 0, 22][..],
            &0i16.to_be_bytes(),
            &3i16.to_be_bytes(),
            &9i32.to_be_bytes(),
            &(-1i16).to_be_bytes(),
            &(-1i16).to_be_bytes(),
            &(-1i16).to_be_bytes(),
            &30_000i32.to_be_bytes(),
            &i32::MAX.to_be_bytes(),
        ]
        .concat(),
    ];
    for frame in frames {
        let mut conn = WireConnection::connect(&addr).await.unwrap();
        conn.send_raw(&frame).await.unwrap();
        assert!(
            conn.is_closed_by_peer(Duration::from_secs(5)).await,
            "frame {frame:?} did not close its connection"
        );
    }
    let response = bystander
        .request(3, &ApiVersionsRequest::default())
        .await
        .unwrap();
    assert_eq!(response.error_code, 0);
    assert!(
        api_versions_works(&addr).await,
        "new connections are served"
    );
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_too_new_api_versions_request_gets_v0_with_the_ranges() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    // ApiVersions v9, header v2 (flexible): the broker answers in v0 (KIP-511).
    let request = [
        &18i16.to_be_bytes()[..],
        &9i16.to_be_bytes(),
        &42i32.to_be_bytes(),
        &(-1i16).to_be_bytes(),
        &[0],       // header tagged fields
        &[1, 1, 0], // empty compact client name and version, no tagged fields
    ]
    .concat();
    conn.send_raw(&[&(request.len() as i32).to_be_bytes()[..], &request].concat())
        .await
        .unwrap();
    let mut frame = conn.read_frame().await.unwrap();
    assert_eq!(&frame[..4], &42i32.to_be_bytes());
    let body = frame.split_off(4);
    assert_eq!(leading_error_code(body.clone()), 35, "UNSUPPORTED_VERSION");
    let count = i32::from_be_bytes(body[2..6].try_into().unwrap());
    let ranges: Vec<(i16, i16, i16)> = body[6..]
        .chunks_exact(6)
        .take(count as usize)
        .map(|c| {
            (
                i16::from_be_bytes([c[0], c[1]]),
                i16::from_be_bytes([c[2], c[3]]),
                i16::from_be_bytes([c[4], c[5]]),
            )
        })
        .collect();
    assert!(
        ranges.contains(&(18, 0, 3)),
        "ApiVersions 0-3 advertised: {ranges:?}"
    );
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn many_random_frames_never_take_the_broker_down() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let addr = broker.bootstrap();
    // A deterministic stream of garbage with real API keys and versions in front.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..300 {
        let api = [0i16, 1, 2, 3, 18, 19, 20, 32, 37][(next() % 9) as usize];
        let version = (next() % 14) as i16;
        let len = (next() % 200) as usize;
        let mut body = api.to_be_bytes().to_vec();
        body.extend_from_slice(&version.to_be_bytes());
        body.extend((0..len).map(|_| next() as u8));
        let mut conn = WireConnection::connect(&addr).await.unwrap();
        conn.send_raw(&[&(body.len() as i32).to_be_bytes()[..], &body].concat())
            .await
            .unwrap();
        // Either an answer or a close; never a hang, never a crash.
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_frame()).await;
    }
    let mut conn = WireConnection::connect(&addr).await.unwrap();
    let metadata = conn.request(12, &MetadataRequest::default()).await.unwrap();
    assert_eq!(metadata.brokers.len(), 1, "the broker still serves");
    broker.shutdown().await.unwrap();
}

/// A broker of the embedded kind with `configure` applied to its settings.
async fn broker_with(
    dir: &std::path::Path,
    configure: impl FnOnce(eddy::embedded::BrokerBuilder) -> eddy::embedded::BrokerBuilder,
) -> eddy::embedded::Broker {
    configure(EmbeddedBroker::builder(dir.to_path_buf()))
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_connection_silent_past_the_idle_limit_is_closed_and_a_busy_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(300);
    let broker = broker_with(dir.path(), |b| b.connections_max_idle(idle)).await;
    let addr = broker.bootstrap();
    let mut silent = WireConnection::connect(&addr).await.unwrap();
    let mut busy = WireConnection::connect(&addr).await.unwrap();
    let started = std::time::Instant::now();
    while started.elapsed() < idle * 4 {
        let answer = busy.request(3, &ApiVersionsRequest::default()).await;
        assert_eq!(
            answer.unwrap().error_code,
            0,
            "a busy connection stays open"
        );
        tokio::time::sleep(idle / 4).await;
    }
    assert!(silent.is_closed_by_peer(Duration::from_millis(100)).await);
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_address_holds_at_most_max_connections_per_ip() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(dir.path(), |b| b.max_connections_per_ip(2)).await;
    let addr = broker.bootstrap();
    let mut first = WireConnection::connect(&addr).await.unwrap();
    let mut second = WireConnection::connect(&addr).await.unwrap();
    for conn in [&mut first, &mut second] {
        let answer = conn.request(3, &ApiVersionsRequest::default()).await;
        assert_eq!(answer.unwrap().error_code, 0);
    }
    let mut third = WireConnection::connect(&addr).await.unwrap();
    assert!(third.is_closed_by_peer(Duration::from_secs(5)).await);
    drop(first);
    // The place the first held comes back once the broker sees it closed.
    let what = "no connection is served once another closed";
    wait_until(Duration::from_secs(5), what, async || {
        let mut again = WireConnection::connect(&addr).await.unwrap();
        match again.request(3, &ApiVersionsRequest::default()).await {
            Ok(answer) => {
                assert_eq!(answer.error_code, 0);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    broker.shutdown().await.unwrap();
}
