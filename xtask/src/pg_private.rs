//! A private PostgreSQL server for the failover test's restarts: initdb into a temporary
//! folder with the machine's binaries (`pg_config --bindir`, else /usr/lib/postgresql/*/bin),
//! run as the `postgres` user when this process is root (initdb refuses root), listening on
//! a free loopback port with its socket in that folder. The machine's shared server is
//! never touched; this one is stopped and removed at the end.

use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// A running private server.
pub struct PrivatePg {
    bin: PathBuf,
    dir: PathBuf,
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub url: String,
}

impl PrivatePg {
    /// Makes and starts a server in a fresh temporary folder.
    pub fn start() -> Result<PrivatePg> {
        let bin = bindir()?;
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)?
            .as_nanos();
        let dir = std::env::temp_dir().join(format!("apollo11-pg-{nanos:x}"));
        std::fs::create_dir_all(&dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let pg = PrivatePg {
            bin,
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
        };
        let made = pg.make(port);
        if made.is_err() {
            pg.remove();
        }
        made.map(|()| pg)
    }

    fn make(&self, port: u16) -> Result<()> {
        if as_root() {
            let owned = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&self.dir)
                .status()?;
            ensure!(
                owned.success(),
                "chown postgres {} failed",
                self.dir.display()
            );
        }
        let data = self.data();
        self.run(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"],
        )?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.dir.display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-o",
                &options,
                "-l",
                &self.log(),
                "-w",
                "start",
            ],
        )
    }

    /// The server's log: pg_ctl's `-l` on every start, else the server would write to (and
    /// keep open) the pipe of the pg_ctl that started it, which this process reads to its end.
    fn log(&self) -> String {
        self.dir.join("server.log").display().to_string()
    }

    /// `pg_ctl restart -m MODE` (`fast`: clients cut, a clean shutdown; `immediate`: a
    /// crash, recovered from the WAL at start); returns how long until it accepted
    /// connections again.
    pub fn restart(&self, mode: &str) -> Result<Duration> {
        let started = Instant::now();
        let (data, log) = (self.data(), self.log());
        self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-m", mode, "-w", "restart"],
        )?;
        Ok(started.elapsed())
    }

    /// Stops the server and removes its folder.
    pub fn remove(&self) {
        if self.dir.join("data/postmaster.pid").exists() {
            let _ = self.run(
                "pg_ctl",
                &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// Runs one of the server's programs, as `postgres` when this process is root.
    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        let path = self.bin.join(program);
        let mut command = if as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let out = command
            .args(args)
            .stdin(std::process::Stdio::null())
            .current_dir(&self.dir)
            .output()
            .with_context(|| format!("running {}", path.display()))?;
        ensure!(
            out.status.success(),
            "{program} {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Where initdb and pg_ctl are: `pg_config --bindir`, else the newest
/// /usr/lib/postgresql/*/bin holding them.
fn bindir() -> Result<PathBuf> {
    let has_initdb = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_initdb(&dir) {
            return Ok(dir);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    match dirs.into_iter().rev().find(|d| has_initdb(d)) {
        Some(dir) => Ok(dir),
        None => bail!(
            "no initdb and pg_ctl (pg_config --bindir, /usr/lib/postgresql/*/bin): the failover test's private PostgreSQL server cannot be made; install the PostgreSQL server package"
        ),
    }
}
