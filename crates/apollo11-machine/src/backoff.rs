//! Retry delays. Jitter is derived from a hash of run, step and attempt instead of an RNG,
//! so replaying a history always yields the same schedule.

use apollo11_core::{Backoff, RetryPolicy};

/// Delay between the failure of attempt `failed_attempt` and the start of the next one.
pub fn retry_delay_ms(policy: &RetryPolicy, run_id: &str, step: &str, failed_attempt: u32) -> u64 {
    let base = match policy.backoff {
        Backoff::Fixed => policy.initial_ms,
        Backoff::Exponential => {
            let doublings = failed_attempt.saturating_sub(1).min(63);
            policy.initial_ms.saturating_mul(1u64 << doublings)
        }
    };
    let capped = base.min(policy.max_ms.max(policy.initial_ms));
    let pct = u64::from(policy.jitter_pct.min(100));
    // Remove up to `pct` percent, in steps of 1/1000 of that share.
    let share = fnv1a(&[
        run_id.as_bytes(),
        b"/",
        step.as_bytes(),
        &failed_attempt.to_le_bytes(),
    ]) % 1_000;
    let cut = u128::from(capped) * u128::from(pct) * u128::from(share) / 100_000;
    capped - cut as u64
}

/// 64-bit FNV-1a: tiny, stable across platforms and Rust versions (unlike `DefaultHasher`).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|p| p.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
