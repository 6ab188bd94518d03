//! `apollo11-sim --seeds N [--seed S] [--store file|memory|postgres]`: plays seeds S..S+N
//! (S alone: replays S) and prints the figures; on a failure, the seed, the smallest failing
//! size found and its history, with exit code 1. `cargo xtask sim` runs it. `postgres` plays
//! on the database of `APOLLO11_TEST_PG_URL`, a scratch schema a seed.

use apollo11_postgres::TEST_URL_VAR;
use apollo11_sim::{
    shrink, simulate, Failure, Medium, Memory, Outcome, Postgres, Scenario, SimDisk,
};
use std::process::ExitCode;
use std::time::Instant;

struct Args {
    first: u64,
    seeds: u64,
    store: Store,
}

/// The medium asked for.
enum Store {
    File,
    Memory,
    /// The database at this url.
    Postgres(String),
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::File => "file",
            Store::Memory => "memory",
            Store::Postgres(_) => "postgres",
        }
    }
}

fn store(name: &str) -> Result<Store, String> {
    match name {
        "file" => Ok(Store::File),
        "memory" => Ok(Store::Memory),
        "postgres" => std::env::var(TEST_URL_VAR).map(Store::Postgres).map_err(|_| {
            format!("--store postgres: {TEST_URL_VAR} names no database (e.g. postgres://postgres@127.0.0.1:5432/test)")
        }),
        other => Err(format!("--store `{other}`: file, memory or postgres")),
    }
}

fn args() -> Result<Args, String> {
    let mut parsed = Args {
        first: 0,
        seeds: 1,
        store: Store::File,
    };
    let mut seeds = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} `{v}`: {e}"));
        match flag.as_str() {
            "--seeds" => seeds = Some(number(value()?)?),
            "--seed" => parsed.first = number(value()?)?,
            "--store" => parsed.store = store(&value()?)?,
            other => {
                return Err(format!(
                    "unknown argument `{other}` (--seeds N, --seed S, --store file|memory|postgres)"
                ))
            }
        }
    }
    parsed.seeds = seeds.unwrap_or(1);
    Ok(parsed)
}

fn play(store: &Store, scenario: &Scenario) -> Result<Outcome, Failure> {
    fn on<M: Medium>(mut medium: M, scenario: &Scenario) -> Result<Outcome, Failure> {
        simulate(scenario, &mut medium)
    }
    match store {
        Store::File => on(SimDisk::default(), scenario),
        Store::Memory => on(Memory::new(scenario.seed), scenario),
        Store::Postgres(url) => on(Postgres::new(url), scenario),
    }
}

fn report(store: &Store, seed: u64, scenario: &Scenario, failure: Failure) {
    let name = store.name();
    println!("seed {seed} FAILED on {name}: {}", failure.message);
    let (size, smallest) = shrink(scenario, failure, |s| play(store, s).err());
    println!(
        "shortest history found: seed {seed} at {size} (of {}): {}",
        scenario.size(),
        smallest.message
    );
    for line in &smallest.history {
        println!("  {line}");
    }
    println!("replay: cargo xtask sim --seed {seed} --store {name}");
    if let Store::Postgres(_) = store {
        println!("  (on real time: the same scenario, steps and operator, not the same interleaving; shrinking kept a cut only if it failed again)");
    }
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("apollo11-sim: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let (mut events, mut crashes, mut failed) = (0u64, 0u64, 0u64);
    let (mut placed, mut lost, mut signalled) = (0u64, 0u64, 0u64);
    for seed in args.first..args.first + args.seeds {
        let scenario = Scenario::generate(seed);
        match play(&args.store, &scenario) {
            Ok(outcome) => {
                events += outcome.events;
                crashes += u64::from(outcome.crashes);
                placed += outcome.placed;
                lost += outcome.lost;
                signalled += outcome.signalled;
            }
            Err(failure) => {
                failed += 1;
                report(&args.store, seed, &scenario, failure);
                break;
            }
        }
    }
    println!(
        "sim: {} seeds from {} on {}: {events} events, {crashes} crashes, {placed} tries on workers ({lost} lost with their worker), {signalled} signals, {failed} failures, {:.1} s",
        args.seeds,
        args.first,
        args.store.name(),
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
