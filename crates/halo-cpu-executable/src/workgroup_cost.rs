//! What a workgroup of an export costs, measured, for the drivers' scheduling: per export and
//! per set of push constants, since one export can serve many shapes (halo's kernels: one dense
//! export for every layer of a model, its sizes in the constants), whose workgroups differ in
//! cost tenfold; an average over them sent cheap layers to the workers and kept costly ones
//! inline.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots per export: more shapes than this share slots by their constants' hash, the last one
/// measured holding a slot.
const SLOTS: usize = 16;
/// Bits of a slot holding the cost in nanoseconds (up to about 18 minutes a workgroup); the
/// rest tell which constants measured it.
const COST_BITS: u32 = 40;
const COST_MASK: u64 = (1 << COST_BITS) - 1;

/// The measured costs of one export's workgroups, each slot `(tag << COST_BITS) | ns`.
pub(crate) struct WorkgroupCosts([AtomicU64; SLOTS]);

impl Default for WorkgroupCosts {
    fn default() -> Self {
        WorkgroupCosts(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Where a set of push constants keeps its cost: a slot and the tag that tells it from the other
/// constants sharing that slot. Computed once per prepared dispatch, not per run of its
/// workgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CostKey {
    slot: usize,
    tag: u64,
}

impl CostKey {
    /// The key of `constants`: FNV-1a over them, then mixed so that every bit of the constants
    /// reaches the low bits that pick the slot (a product alone carries changes only upward:
    /// sizes of 64 and 1024 would share every slot).
    pub(crate) fn of(constants: &[u32]) -> CostKey {
        let hash = constants.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
            (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let mixed = (hash ^ (hash >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let mixed = mixed ^ (mixed >> 29);
        CostKey {
            slot: (mixed % SLOTS as u64) as usize,
            tag: mixed >> COST_BITS,
        }
    }
}

impl WorkgroupCosts {
    /// The cost of one workgroup run with the constants of `key`, if one was measured.
    pub(crate) fn get(&self, key: CostKey) -> Option<u64> {
        let value = self.0[key.slot].load(Ordering::Relaxed);
        (value >> COST_BITS == key.tag && value & COST_MASK != 0).then_some(value & COST_MASK)
    }

    /// Folds a run of `workgroups` workgroups with the constants of `key` that took
    /// `elapsed_ns` into the estimate: an exponential average, so recent runs dominate and one
    /// outlier does not.
    pub(crate) fn record(&self, key: CostKey, workgroups: u64, elapsed_ns: u64) {
        if workgroups == 0 {
            return;
        }
        let sample = (elapsed_ns / workgroups).clamp(1, COST_MASK);
        let new = match self.get(key) {
            Some(old) => (old * 3 + sample) / 4,
            None => sample,
        };
        self.0[key.slot].store((key.tag << COST_BITS) | new.max(1), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_set_of_constants_has_its_own_average() {
        let costs = WorkgroupCosts::default();
        let (small, large, none) = (
            CostKey::of(&[1, 64, 1024]),
            CostKey::of(&[1, 1024, 1024]),
            CostKey::of(&[]),
        );
        assert_eq!(costs.get(small), None);
        costs.record(small, 6, 9_000);
        costs.record(large, 6, 66_000);
        assert_eq!(costs.get(small), Some(1_500));
        assert_eq!(costs.get(large), Some(11_000));
        costs.record(small, 1, 3_500);
        assert_eq!(costs.get(small), Some(2_000), "(3 · 1500 + 3500) / 4");
        assert_eq!(costs.get(none), None, "no constants are a shape of their own");
        costs.record(none, 2, 0);
        assert_eq!(costs.get(none), Some(1), "a measured cost is never 0");
    }

    #[test]
    fn a_shape_sharing_a_slot_replaces_the_one_there_without_borrowing_its_cost() {
        let costs = WorkgroupCosts::default();
        let first = CostKey::of(&[7]);
        let other = (0..10_000u32)
            .map(|c| CostKey::of(&[c]))
            .find(|key| *key != first && key.slot == first.slot)
            .expect("some constants share the slot");
        costs.record(first, 1, 5_000);
        assert_eq!(costs.get(other), None);
        costs.record(other, 1, 80_000);
        assert_eq!(costs.get(other), Some(80_000));
        assert_eq!(costs.get(first), None, "its slot was taken");
    }
}
