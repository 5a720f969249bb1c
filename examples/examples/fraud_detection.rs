//! The fraud job: BoxOffice's order events checked for bots that hold seats, release them,
//! and hold and release them again within ten minutes — run exactly once, state in sled,
//! on the embedded broker or on a Kafka cluster.
//!
//! ```sh
//! cargo run --release --example fraud_detection                    # embedded broker
//! cargo run --release --example fraud_detection -- --bootstrap kafka:9092 --orders 1000000
//! ```
//!
//! A generator writes the orders of normal buyers with bots planted among them to
//! `order-events`; the job prints each alert as its transaction commits, its progress every
//! second, and once its input is done (caught up, then idle for two seconds) a summary:
//! records processed, alerts, the bots planted and found. It exits with an error when the
//! alerts are not exactly the planted bots.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use eddy::app::grouped;
use eddy::embedded::EmbeddedBroker;
use eddy_examples::fraud::job::{self, JobOptions, Report};
use eddy_examples::fraud::traffic::Traffic;

/// Finds the bots among BoxOffice's orders.
#[derive(Debug, Parser)]
#[command(name = "fraud_detection")]
struct Args {
    /// Orders the generator writes.
    #[arg(long, default_value_t = 100_000)]
    orders: u32,
    /// Bots among them (default: one order in a thousand, at least one).
    #[arg(long)]
    bots: Option<u32>,
    /// The window four holds and releases must fall within.
    #[arg(long, default_value_t = 10)]
    window_minutes: u64,
    /// Partitions of `order-events` and `fraud-alerts` when the job creates them.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Write nothing: read what `order-events` holds.
    #[arg(long)]
    no_generator: bool,
    /// A Kafka cluster's `HOST:PORT` instead of the embedded broker.
    #[arg(long, value_name = "HOST:PORT")]
    bootstrap: Option<String>,
    /// Where the application keeps its state (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The seed the generator draws its traffic from.
    #[arg(long, default_value_t = 12)]
    seed: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fraud_detection: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    if args.window_minutes == 0 || args.partitions < 1 {
        return Err("--window-minutes and --partitions must be at least 1".into());
    }
    let window = Duration::from_secs(args.window_minutes.saturating_mul(60));
    let embedded = match &args.bootstrap {
        Some(_) => None,
        None => Some(EmbeddedBroker::start().await?),
    };
    let bootstrap = match (&args.bootstrap, &embedded) {
        (Some(servers), _) => servers.clone(),
        (None, Some(broker)) => broker.bootstrap(),
        (None, None) => unreachable!("a broker was started"),
    };
    let temporary = match args.state_dir {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("fraud-state-").tempdir()?),
    };
    let state_dir = match (&args.state_dir, &temporary) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) => dir.path().to_path_buf(),
        (None, None) => unreachable!("a directory was made"),
    };
    let traffic = (!args.no_generator).then(|| {
        Traffic {
            orders: args.orders,
            bots: args.bots.unwrap_or((args.orders / 1_000).max(1)),
            window,
            seed: args.seed,
            start_at: 0,
        }
        .ending_now()
    });
    println!(
        "fraud_detection on {bootstrap}{}: {} within {} min, exactly once, state in {}",
        if embedded.is_some() {
            " (embedded broker)"
        } else {
            ""
        },
        eddy_examples::fraud::PATTERN,
        args.window_minutes,
        match &temporary {
            Some(_) => "a temporary directory".to_string(),
            None => state_dir.display().to_string(),
        },
    );
    let options = JobOptions {
        bootstrap,
        traffic,
        window,
        partitions: args.partitions,
        state_dir,
        idle: Duration::from_secs(2),
    };
    let summary = job::run(&options, &mut print).await?;
    println!("\n{summary}");
    if let Some(broker) = embedded {
        broker.shutdown().await?;
    }
    if summary.planted.is_some() && !summary.is_exact() {
        eprintln!(
            "the alerts are not exactly the planted bots: missed {:?}, normal buyers alerted {:?}",
            summary.missed(),
            summary.false_alarms()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn print(report: Report<'_>) {
    match report {
        Report::Generating {
            orders,
            bots,
            events,
        } => println!(
            "generator: {} orders, {} of them bots: {} events to {}",
            grouped(orders.into()),
            grouped(bots.into()),
            grouped(events as u64),
            eddy_examples::fraud::ORDER_EVENTS
        ),
        Report::Generated { events, elapsed } => println!(
            "generator: {} events written in {:.1} s",
            grouped(events),
            elapsed.as_secs_f64()
        ),
        Report::Alert(alert) => {
            let seconds = (alert.last_at - alert.first_at) / 1_000;
            println!(
                "ALERT {}: held and released twice in {}m{:02}s",
                alert.order_id,
                seconds / 60,
                seconds % 60
            );
        }
        Report::Progress(progress) => println!("{progress}"),
    }
}
