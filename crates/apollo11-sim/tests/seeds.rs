//! A few hundred seeds on each medium, as `cargo xtask sim` runs them: every invariant
//! holds. `cargo xtask sim --seeds N` runs more (and `cargo xtask ci` 500 on the file log).

use apollo11_sim::{simulate, Memory, Scenario, SimDisk};

#[test]
fn every_invariant_holds_for_200_seeds_on_the_file_log() {
    for seed in 0..200 {
        let outcome = simulate(&Scenario::generate(seed), &mut SimDisk::default());
        if let Err(f) = outcome {
            panic!("seed {seed}: {}\n{}", f.message, f.history.join("\n"));
        }
    }
}

#[test]
fn every_invariant_holds_for_200_seeds_on_the_memory_store() {
    for seed in 0..200 {
        if let Err(f) = simulate(&Scenario::generate(seed), &mut Memory::new(seed)) {
            panic!("seed {seed}: {}\n{}", f.message, f.history.join("\n"));
        }
    }
}
