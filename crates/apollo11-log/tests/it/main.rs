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
}
