//! `cargo xtask crash`: the kill test of docs/reliability.md. Spawns the crash child (8
//! concurrent runs of a 50-step workflow on the file log, or with `--store URL` on a fresh
//! PostgreSQL schema under leases, dropped at the end), SIGKILLs it at random instants,
//! restarts it, and once the kills are done lets the last restart finish and has the child
//! check I1-I6. On PostgreSQL [`LIVES_PER_OWNER`] children in a row share a lease owner: most
//! restarts drive their runs again at once (the same owner, the same epoch), every
//! [`LIVES_PER_OWNER`]th once the killed one's leases ran out (the next epoch).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

pub struct Args {
    pub kills: u64,
    pub seed: u64,
    pub dir: Option<PathBuf>,
    /// A PostgreSQL database (`postgres://…`) to keep the events in instead of the file log.
    pub store: Option<String>,
}

/// How many children in a row run as one lease owner on PostgreSQL.
const LIVES_PER_OWNER: u64 = 4;

const FLAGS: [&str; 4] = ["--kills", "--seed", "--dir", "--store"];

impl Args {
    pub fn parse(args: &[String]) -> Result<Args> {
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        for (i, a) in args.iter().enumerate() {
            let is_value = i > 0 && FLAGS.contains(&args[i - 1].as_str());
            if !is_value && !FLAGS.contains(&a.as_str()) {
                bail!("unknown argument `{a}`; usage: cargo xtask crash [--kills N] [--seed S] [--dir DIR] [--store postgres://…]");
            }
        }
        let number = |flag: &str, default: u64| -> Result<u64> {
            value(flag).map_or(Ok(default), |v| {
                v.parse()
                    .with_context(|| format!("{flag} takes a number, not `{v}`"))
            })
        };
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)?
            .as_nanos() as u64;
        Ok(Args {
            kills: number("--kills", 200)?,
            seed: number("--seed", now)?,
            dir: value("--dir").map(PathBuf::from),
            store: value("--store"),
        })
    }
}

pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Where the child keeps its events: its data dir, or a PostgreSQL schema.
struct Place {
    dir: PathBuf,
    pg: Option<(String, String)>,
}

impl Place {
    /// How long a child may live before it is killed, at most, in ms: on PostgreSQL it
    /// spends about 200 ms connecting and reading what is there before it drives anything.
    fn life_ms(&self) -> u64 {
        if self.pg.is_some() {
            800
        } else {
            400
        }
    }

    /// The child's arguments after `DIR GENERATION` (`run`) or `DIR GENERATIONS KILLS`
    /// (`check`): the url and schema, with the lease owner for `run`.
    fn args(&self, owner: Option<String>) -> Vec<String> {
        let Some((url, schema)) = &self.pg else {
            return Vec::new();
        };
        [url.clone(), schema.clone()]
            .into_iter()
            .chain(owner)
            .collect()
    }
}

pub fn run(root: &Path, args: Args) -> Result<()> {
    crate::build_loaded(root)?;
    let target = crate::tidy::target_dir(root)?;
    let child_bin = target.join("debug/examples/crash_child");
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| target.join(format!("crash/{}", args.seed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let schema = format!("crash_{:x}", args.seed);
    let place = Place {
        dir,
        pg: args.store.clone().map(|url| (url, schema.clone())),
    };
    let Some((url, _)) = &place.pg else {
        return kill_loop(&child_bin, &place, &args);
    };
    crate::psql::drop_schema(url, &schema)?;
    let outcome = kill_loop(&child_bin, &place, &args);
    let dropped = crate::psql::drop_schema(url, &schema);
    outcome.and(dropped)
}

fn kill_loop(child_bin: &Path, place: &Place, args: &Args) -> Result<()> {
    let events = match &place.pg {
        Some((_, schema)) => format!("PostgreSQL schema {schema}"),
        None => "the file log".to_owned(),
    };
    println!(
        "crash test: {} kills, seed {}, events in {events}, files in {}",
        args.kills,
        args.seed,
        place.dir.display()
    );
    let started = Instant::now();
    let mut rng = Rng(args.seed | 1);
    let (mut generation, mut kills, mut lives) = (0u64, 0u64, 0u64);
    let mut next_child = |generation: u64| {
        lives += 1;
        spawn(child_bin, place, generation, lives / LIVES_PER_OWNER)
    };
    while kills < args.kills {
        let mut child = next_child(generation)?;
        std::thread::sleep(Duration::from_millis(20 + rng.below(place.life_ms())));
        match child.try_wait()? {
            Some(status) if status.success() => generation += 1,
            Some(status) => {
                bail!("the child failed on its own ({status}): recovery must never fail (I5)")
            }
            None => {
                child.kill()?;
                child.wait()?;
                kills += 1;
            }
        }
    }
    let status = next_child(generation)?.wait()?;
    if !status.success() {
        bail!("the last restart did not finish its runs ({status})");
    }
    let check = Command::new(child_bin)
        .args([
            "check",
            &place.dir.display().to_string(),
            &(generation + 1).to_string(),
            &kills.to_string(),
        ])
        .args(place.args(None))
        .status()?;
    if !check.success() {
        bail!(
            "the crash check found a violation; replay with --seed {}",
            args.seed
        );
    }
    println!(
        "crash test passed: {kills} kills over {} generations in {:.1} s",
        generation + 1,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Starts a child for `generation`; on PostgreSQL under the lease owner `crash-OWNER`.
fn spawn(bin: &Path, place: &Place, generation: u64, owner: u64) -> Result<Child> {
    Command::new(bin)
        .args([
            "run",
            &place.dir.display().to_string(),
            &generation.to_string(),
        ])
        .args(place.args(Some(format!("crash-{owner}"))))
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}
