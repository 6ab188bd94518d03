//! `cargo xtask crash`: the kill test of docs/reliability.md. Spawns the crash child (8
//! concurrent runs of a 50-step workflow on the file log), SIGKILLs it at random instants,
//! restarts it, and once the kills are done lets the last restart finish and has the child
//! check I1-I6.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

pub struct Args {
    pub kills: u64,
    pub seed: u64,
    pub dir: Option<PathBuf>,
}

impl Args {
    pub fn parse(args: &[String]) -> Result<Args> {
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        for (i, a) in args.iter().enumerate() {
            let is_value = i > 0 && ["--kills", "--seed", "--dir"].contains(&args[i - 1].as_str());
            if !is_value && !["--kills", "--seed", "--dir"].contains(&a.as_str()) {
                bail!("unknown argument `{a}`; usage: cargo xtask crash [--kills N] [--seed S] [--dir DIR]");
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

pub fn run(root: &Path, args: Args) -> Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--quiet",
            "-p",
            "apollo11-runtime",
            "--example",
            "crash_child",
        ])
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("building the crash child failed");
    }
    let target = crate::tidy::target_dir(root)?;
    let child_bin = target.join("debug/examples/crash_child");
    let dir = args
        .dir
        .unwrap_or_else(|| target.join(format!("crash/{}", args.seed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    println!(
        "crash test: {} kills, seed {}, data in {}",
        args.kills,
        args.seed,
        dir.display()
    );
    let started = Instant::now();
    let mut rng = Rng(args.seed | 1);
    let (mut generation, mut kills) = (0u64, 0u64);
    while kills < args.kills {
        let mut child = spawn(&child_bin, &dir, generation)?;
        std::thread::sleep(Duration::from_millis(20 + rng.below(400)));
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
    let status = spawn(&child_bin, &dir, generation)?.wait()?;
    if !status.success() {
        bail!("the last restart did not finish its runs ({status})");
    }
    let check = Command::new(&child_bin)
        .args([
            "check",
            &dir.display().to_string(),
            &(generation + 1).to_string(),
            &kills.to_string(),
        ])
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

fn spawn(bin: &Path, dir: &Path, generation: u64) -> Result<Child> {
    Command::new(bin)
        .args(["run", &dir.display().to_string(), &generation.to_string()])
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}
