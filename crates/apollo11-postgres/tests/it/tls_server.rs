//! A private PostgreSQL server with TLS on, for the `verify-*` modes: a CA and a server
//! certificate for `127.0.0.1` made with the `openssl` command, `initdb` into a temporary
//! folder (as `postgres` when this process is root: initdb refuses root), started on a free
//! loopback port. Stopped and removed when dropped. And a server that answers every
//! request for TLS with no, as one without TLS does.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running server with TLS.
pub struct TlsServer {
    dir: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl TlsServer {
    /// Starts one, or says on stderr why it cannot (no openssl, initdb or pg_ctl here).
    pub fn start() -> Option<TlsServer> {
        let Some(bin) = bindir() else {
            eprintln!("skipped: no initdb and pg_ctl (pg_config --bindir) for a TLS server");
            return None;
        };
        let nonce = format!("{}-{:?}", std::process::id(), std::time::Instant::now());
        let dir = std::env::temp_dir().join(format!("apollo11-tls-{:x}", hash(&nonce)));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = TlsServer { dir, port };
        if let Err(why) = server.make(&bin) {
            eprintln!("skipped: no TLS server could be made: {why}");
            return None;
        }
        Some(server)
    }

    /// The CA that signed the server's certificate (PEM).
    pub fn root(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn make(&self, bin: &Path) -> Result<(), String> {
        self.certificates()?;
        if as_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&self.dir))?;
        }
        let data = self.dir.join("data");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c ssl=on \
             -c ssl_cert_file={} -c ssl_key_file={}",
            self.port,
            self.dir.display(),
            self.dir.join("server.crt").display(),
            self.dir.join("server.key").display(),
        );
        let initdb = bin.join("initdb");
        run(self.as_postgres(&initdb).arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        ]))?;
        let log = self.dir.join("server.log");
        let pg_ctl = bin.join("pg_ctl");
        run(self
            .as_postgres(&pg_ctl)
            .arg("-D")
            .arg(&data)
            .args(["-o", &options, "-l"])
            .arg(&log)
            .args(["-w", "start"]))
    }

    /// A CA, and a key and certificate for 127.0.0.1 that it signs.
    fn certificates(&self) -> Result<(), String> {
        let openssl = |args: &str| {
            let mut c = Command::new("openssl");
            c.args(args.split(' ')).current_dir(&self.dir);
            run(&mut c)
        };
        openssl("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=apollo11-test-ca -keyout ca.key -out ca.crt")?;
        openssl(
            "req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr",
        )?;
        std::fs::write(self.dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n")
            .map_err(|e| e.to_string())?;
        openssl("x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.crt")?;
        std::fs::set_permissions(
            self.dir.join("server.key"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .map_err(|e| e.to_string())
    }

    fn as_postgres(&self, program: &Path) -> Command {
        let mut c = if as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        c.current_dir(&self.dir);
        c
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        if let Some(bin) = bindir() {
            let data = self.dir.join("data");
            let _ = run(self
                .as_postgres(&bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"]));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(command: &mut Command) -> Result<(), String> {
    let out = command
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{command:?}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn hash(text: &str) -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(text)
}

/// Where initdb and pg_ctl are (`pg_config --bindir`), if anywhere.
fn bindir() -> Option<PathBuf> {
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()).then_some(dir)
}

/// The port of a listener on 127.0.0.1 that answers each connection's request for TLS with
/// `N` (no TLS here) and closes it, as long as the process lives.
pub fn refusing_tls() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            // The SSLRequest: its length (8) and code.
            let mut request = [0; 8];
            if stream.read_exact(&mut request).is_ok() {
                let _ = stream.write_all(b"N");
            }
        }
    });
    port
}
