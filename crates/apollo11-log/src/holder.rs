//! What a data dir's `LOCK` file says about the process holding it: `pid N` on its first
//! line, and, for a server (`apollo11 serve`), `listen ADDR` on the next, so that other
//! commands can reach the holder instead of failing. Older files hold the first line only,
//! and a reader ignores lines it does not know.

/// The holder of a data dir's lock, as its `LOCK` file describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockHolder {
    /// Its process id.
    pub pid: Option<u32>,
    /// Where it serves the HTTP API, when it does.
    pub listen: Option<String>,
}

impl LockHolder {
    /// This process, serving at `listen` if it does.
    pub fn this_process(listen: Option<String>) -> LockHolder {
        LockHolder {
            pid: Some(std::process::id()),
            listen,
        }
    }

    /// Reads what a `LOCK` file (or [`StoreError::Locked`]'s `holder`) says: lines, or
    /// parts separated by `; `, of the form `pid N` and `listen ADDR`. Anything else is
    /// ignored.
    ///
    /// [`StoreError::Locked`]: apollo11_store::StoreError::Locked
    pub fn parse(text: &str) -> LockHolder {
        let mut holder = LockHolder::default();
        for part in text.split(['\n', ';']).map(str::trim) {
            if let Some(pid) = part.strip_prefix("pid ") {
                holder.pid = pid.trim().parse().ok();
            } else if let Some(listen) = part.strip_prefix("listen ") {
                holder.listen = Some(listen.trim().to_owned()).filter(|l| !l.is_empty());
            }
        }
        holder
    }

    /// The text of the `LOCK` file: one line per fact known.
    pub fn to_text(&self) -> String {
        let pid = self.pid.map(|pid| format!("pid {pid}\n"));
        let listen = self.listen.as_ref().map(|l| format!("listen {l}\n"));
        pid.into_iter().chain(listen).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_old_files_new_files_and_the_one_line_of_an_error() {
        assert_eq!(LockHolder::parse("pid 12").pid, Some(12));
        assert_eq!(LockHolder::parse("pid 12").listen, None);
        let served = LockHolder {
            pid: Some(7),
            listen: Some("127.0.0.1:8711".into()),
        };
        assert_eq!(served.to_text(), "pid 7\nlisten 127.0.0.1:8711\n");
        assert_eq!(LockHolder::parse(&served.to_text()), served);
        assert_eq!(LockHolder::parse("pid 7; listen 127.0.0.1:8711"), served);
        assert_eq!(
            LockHolder::parse("garbage\nlisten \n"),
            LockHolder::default()
        );
    }
}
