//! Integration tests of the file log.

mod archive;
mod archive_left;
mod archive_repair;
mod basics;
mod bitflip;
mod blocking;
mod cold;
mod common;
mod compat;
mod deterministic;
mod faults;
mod feed;
mod files;
mod gc;
mod guards;
mod index_files;
mod missing;
mod model;
mod overlap;
mod power_loss;
mod scan;
mod second_writer;
mod torn;
mod verify;
mod write_errors;

/// The conformance suite on the real file system.
mod conformance_real {
    apollo11_store::conformance_tests!(crate::common::real_log());
}

/// The conformance suite on the simulated file system.
mod conformance_sim {
    apollo11_store::conformance_tests!(crate::common::sim_log());
}

/// Controls, on both file systems.
mod controls {
    mod real {
        apollo11_store::control_conformance_tests!(crate::common::real_log());
    }
    mod sim {
        apollo11_store::control_conformance_tests!(crate::common::sim_log());
    }

    /// A control written is there after the log is closed and opened again, and a read-only
    /// open reads it too.
    #[tokio::test]
    async fn controls_outlive_a_reopen() {
        use apollo11_log::{FileLog, Options};
        use apollo11_store::ControlStore;
        let dir = tempfile::tempdir().unwrap();
        let log = FileLog::open(dir.path(), Options::default()).unwrap();
        log.put_control("schedule/w/s", 0, b"paused".to_vec())
            .await
            .unwrap();
        drop(log);
        let reader = FileLog::open_read_only(dir.path()).unwrap();
        let read = reader.list_controls("schedule/").await.unwrap();
        assert_eq!(
            (read[0].version, read[0].value.as_slice()),
            (1, &b"paused"[..])
        );
        let log = FileLog::open(dir.path(), Options::default()).unwrap();
        assert_eq!(
            log.put_control("schedule/w/s", 1, Vec::new())
                .await
                .unwrap(),
            2
        );
    }
}
