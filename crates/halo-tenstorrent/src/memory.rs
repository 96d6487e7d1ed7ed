//! The chip's memory kinds and where a buffer goes.
//!
//! A Tensix core has 1.5 MiB of L1, of which 1.3 MiB is safe for data (the rest holds code and
//! stacks); the chip also has DRAM. halo divides each core's safe L1 into an interleaved part
//! (small buffers, spread page by page over the cores) and a sharded part (a dispatch's storage
//! cut into one shard per core, at the same L1 address on every core). Each kind has its own
//! range allocator (`offset-allocator`, a two-level segregated fit), so freed ranges are reused
//! and fragmentation is bounded; running out is `ResourceExhausted` naming the kinds tried, the
//! size asked and what is free.
//!
//! Placement, in order of preference:
//! - buffers of at most [`SMALL_BUFFER`] bytes: L1 interleaved, else DRAM;
//! - dispatch storage whose per-core shard fits the sharded part: L1 sharded, else DRAM;
//! - everything else: DRAM.

use halo_hal::{Error, Result};
use offset_allocator::{Allocation, Allocator};
use std::sync::{Arc, Mutex, PoisonError};

/// Buffers up to this size go to L1 interleaved.
pub const SMALL_BUFFER: u64 = 64 * 1024;
const L1_UNIT: u64 = 32;
const DRAM_UNIT: u64 = 64;

/// Where a buffer's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Cut into one shard per core, at the same L1 address on each.
    L1Sharded,
    /// Spread page by page over the cores' L1.
    L1Interleaved,
    /// The chip's DRAM.
    Dram,
}

impl MemoryKind {
    /// The kind's name in messages and statistics.
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::L1Sharded => "L1 sharded",
            MemoryKind::L1Interleaved => "L1 interleaved",
            MemoryKind::Dram => "DRAM",
        }
    }
}

/// What a buffer is for, which decides where it may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferRole {
    /// Read or written by dispatches: worth keeping next to the cores.
    DispatchStorage,
    /// Anything else (staging, constants read once).
    Other,
}

/// The simulated chip's memory sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Tensix cores (10×12 on a P100A-class card).
    pub cores: u64,
    /// L1 bytes per core safe for data.
    pub l1_safe_per_core: u64,
    /// Of those, the bytes per core for interleaved buffers; the rest is for shards.
    pub l1_interleaved_per_core: u64,
    /// DRAM bytes.
    pub dram_bytes: u64,
}

impl MemoryConfig {
    /// L1 bytes per core for shards: the safe L1 less the interleaved part.
    pub fn sharded_per_core(&self) -> u64 {
        self.l1_safe_per_core.saturating_sub(self.l1_interleaved_per_core)
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            cores: 10 * 12,
            l1_safe_per_core: 1331 * 1024,
            l1_interleaved_per_core: 256 * 1024,
            dram_bytes: 2 << 30,
        }
    }
}

/// One kind's use, for statistics and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindUsage {
    /// The kind.
    pub kind: MemoryKind,
    /// Its capacity in bytes (over every core for L1).
    pub capacity: u64,
    /// Bytes allocated (over every core for L1), rounded up to the kind's unit.
    pub in_use: u64,
    /// The largest buffer that would fit now.
    pub largest_free: u64,
}

struct Pool {
    unit: u64,
    /// Bytes one unit of the allocator stands for over the whole chip (a sharded unit is one
    /// unit on every core).
    unit_bytes: u64,
    capacity_units: u32,
    state: Mutex<PoolState>,
}

struct PoolState {
    allocator: Allocator,
    in_use_units: u64,
}

/// The chip's memory: one range allocator per kind.
pub struct DeviceMemory {
    config: MemoryConfig,
    pools: [Pool; 3],
}

/// A buffer's range in one memory kind; the range is freed when this drops.
pub struct DeviceAllocation {
    memory: Arc<DeviceMemory>,
    kind: MemoryKind,
    allocation: Allocation,
    units: u32,
}

impl DeviceAllocation {
    /// The kind of memory it is in.
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }

    /// Its address within its kind (the L1 address on every core for a sharded buffer).
    pub fn address(&self) -> u64 {
        u64::from(self.allocation.offset) * self.memory.pool(self.kind).unit
    }
}

impl std::fmt::Debug for DeviceAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceAllocation")
            .field("kind", &self.kind)
            .field("address", &self.address())
            .field("units", &self.units)
            .finish()
    }
}

impl Drop for DeviceAllocation {
    fn drop(&mut self) {
        let pool = self.memory.pool(self.kind);
        let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.allocator.free(self.allocation);
        state.in_use_units -= u64::from(self.units);
    }
}

impl DeviceMemory {
    /// The memory of a chip of `config`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the setting for no cores, an interleaved part larger than the
    /// safe L1, or a kind too large for its allocator (DRAM over 256 GiB).
    pub fn new(config: MemoryConfig) -> Result<Arc<DeviceMemory>> {
        if config.cores == 0 || config.l1_interleaved_per_core > config.l1_safe_per_core {
            return Err(Error::invalid_argument(format!(
                "memory configuration {config:?}: needs at least one core and an interleaved part within the safe L1"
            )));
        }
        let pool = |kind: MemoryKind, unit: u64, bytes: u64, unit_bytes: u64| -> Result<Pool> {
            let capacity_units = u32::try_from(bytes / unit).map_err(|_| {
                Error::invalid_argument(format!("{} of {bytes} bytes is more than halo can manage", kind.name()))
            })?;
            Ok(Pool {
                unit,
                unit_bytes,
                capacity_units,
                state: Mutex::new(PoolState {
                    allocator: Allocator::new(capacity_units),
                    in_use_units: 0,
                }),
            })
        };
        let sharded_per_core = config.sharded_per_core();
        let interleaved = config.l1_interleaved_per_core.saturating_mul(config.cores);
        let pools = [
            pool(MemoryKind::L1Sharded, L1_UNIT, sharded_per_core, L1_UNIT * config.cores)?,
            pool(MemoryKind::L1Interleaved, L1_UNIT, interleaved, L1_UNIT)?,
            pool(MemoryKind::Dram, DRAM_UNIT, config.dram_bytes, DRAM_UNIT)?,
        ];
        Ok(Arc::new(DeviceMemory { config, pools }))
    }

    fn pool(&self, kind: MemoryKind) -> &Pool {
        match kind {
            MemoryKind::L1Sharded => &self.pools[0],
            MemoryKind::L1Interleaved => &self.pools[1],
            MemoryKind::Dram => &self.pools[2],
        }
    }

    /// The kinds a buffer of `size` bytes for `role` may go to, best first.
    pub fn placement(&self, size: u64, role: BufferRole) -> Vec<MemoryKind> {
        let shard = size.div_ceil(self.config.cores);
        match role {
            _ if size <= SMALL_BUFFER => vec![MemoryKind::L1Interleaved, MemoryKind::Dram],
            BufferRole::DispatchStorage if shard <= self.config.sharded_per_core() => {
                vec![MemoryKind::L1Sharded, MemoryKind::Dram]
            }
            BufferRole::DispatchStorage | BufferRole::Other => vec![MemoryKind::Dram],
        }
    }

    /// Allocates `size` bytes for `role` in the first kind of its placement with room.
    ///
    /// # Errors
    /// `ResourceExhausted` naming each kind tried, the size and what each has free.
    pub fn allocate(self: &Arc<Self>, size: u64, role: BufferRole) -> Result<DeviceAllocation> {
        let kinds = self.placement(size, role);
        for &kind in &kinds {
            if let Some(allocation) = self.try_allocate(kind, size) {
                return Ok(allocation);
            }
        }
        Err(self.exhausted(&kinds, size))
    }

    /// Allocates `size` bytes in `kind`.
    ///
    /// # Errors
    /// `ResourceExhausted` naming the kind, the size and what it has free.
    pub fn allocate_in(self: &Arc<Self>, kind: MemoryKind, size: u64) -> Result<DeviceAllocation> {
        self.try_allocate(kind, size)
            .ok_or_else(|| self.exhausted(&[kind], size))
    }

    fn try_allocate(self: &Arc<Self>, kind: MemoryKind, size: u64) -> Option<DeviceAllocation> {
        let pool = self.pool(kind);
        let units = u32::try_from(size.max(1).div_ceil(pool.unit_bytes)).ok()?;
        let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
        let allocation = state.allocator.allocate(units)?;
        state.in_use_units += u64::from(units);
        Some(DeviceAllocation {
            memory: self.clone(),
            kind,
            allocation,
            units,
        })
    }

    fn exhausted(&self, kinds: &[MemoryKind], size: u64) -> Error {
        let free: Vec<String> = kinds
            .iter()
            .map(|&kind| {
                let usage = self.usage(kind);
                format!(
                    "{} has {} of {} bytes free, the largest free range {} bytes",
                    kind.name(),
                    usage.capacity - usage.in_use,
                    usage.capacity,
                    usage.largest_free
                )
            })
            .collect();
        Error::resource_exhausted(format!("no room for a buffer of {size} bytes: {}", free.join("; ")))
    }

    /// What `kind` holds now.
    pub fn usage(&self, kind: MemoryKind) -> KindUsage {
        let pool = self.pool(kind);
        let state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
        KindUsage {
            kind,
            capacity: u64::from(pool.capacity_units) * pool.unit_bytes,
            in_use: state.in_use_units * pool.unit_bytes,
            largest_free: u64::from(state.allocator.storage_report().largest_free_region) * pool.unit_bytes,
        }
    }

    /// What every kind holds now.
    pub fn statistics(&self) -> Vec<KindUsage> {
        [MemoryKind::L1Sharded, MemoryKind::L1Interleaved, MemoryKind::Dram]
            .into_iter()
            .map(|kind| self.usage(kind))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_chip() -> Arc<DeviceMemory> {
        DeviceMemory::new(MemoryConfig {
            cores: 4,
            l1_safe_per_core: 1 << 20,
            l1_interleaved_per_core: 128 << 10,
            dram_bytes: 8 << 20,
        })
        .unwrap()
    }

    #[test]
    fn buffers_land_where_the_rules_say() {
        let memory = small_chip();
        let small = memory.allocate(4096, BufferRole::Other).unwrap();
        assert_eq!(small.kind(), MemoryKind::L1Interleaved);
        let storage = memory.allocate(2 << 20, BufferRole::DispatchStorage).unwrap();
        assert_eq!(storage.kind(), MemoryKind::L1Sharded);
        // 8 MiB over 4 cores is 2 MiB a core: more than the sharded part.
        assert_eq!(
            memory.placement(8 << 20, BufferRole::DispatchStorage),
            [MemoryKind::Dram]
        );
        let large = memory.allocate(8 << 20, BufferRole::DispatchStorage).unwrap();
        assert_eq!(large.kind(), MemoryKind::Dram);
        let error = memory.allocate(1 << 20, BufferRole::Other).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::ResourceExhausted);
        drop(large);
        let staging = memory.allocate(1 << 20, BufferRole::Other).unwrap();
        assert_eq!(staging.kind(), MemoryKind::Dram);
        let usage = memory.usage(MemoryKind::L1Sharded);
        assert_eq!(usage.in_use, 2 << 20);
        assert_eq!(usage.capacity, 4 * ((1 << 20) - (128 << 10)));
    }

    #[test]
    fn a_full_kind_spills_then_exhaustion_names_what_is_free_and_frees_restore_it() {
        let memory = small_chip();
        let shards: Vec<_> = (0..3)
            .map(|_| memory.allocate(1 << 20, BufferRole::DispatchStorage).unwrap())
            .collect();
        assert!(shards.iter().all(|a| a.kind() == MemoryKind::L1Sharded));
        let spilled = memory.allocate(1 << 20, BufferRole::DispatchStorage).unwrap();
        assert_eq!(spilled.kind(), MemoryKind::Dram);
        let error = memory.allocate_in(MemoryKind::Dram, 8 << 20).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::ResourceExhausted);
        let text = error.to_string();
        assert!(
            text.contains("8388608 bytes") && text.contains("DRAM has 7340032 of 8388608 bytes free"),
            "{text}"
        );
        drop(spilled);
        drop(shards);
        for usage in memory.statistics() {
            assert_eq!(usage.in_use, 0, "{usage:?}");
            assert_eq!(usage.largest_free, usage.capacity, "{usage:?}");
        }
        assert_eq!(memory.allocate_in(MemoryKind::Dram, 8 << 20).unwrap().address(), 0);
    }

    #[test]
    fn ten_thousand_cycles_leave_nothing_behind() {
        let memory = small_chip();
        let mut held = Vec::new();
        for round in 0..10_000u64 {
            let size = 1 + (round * 7919) % (3 << 20);
            let role = if round % 3 == 0 {
                BufferRole::Other
            } else {
                BufferRole::DispatchStorage
            };
            if let Ok(allocation) = memory.allocate(size, role) {
                held.push(allocation);
            }
            if held.len() > 5 {
                held.remove((round % 5) as usize);
            }
        }
        held.clear();
        for usage in memory.statistics() {
            assert_eq!(usage.in_use, 0, "{usage:?}");
            assert_eq!(usage.largest_free, usage.capacity, "{usage:?}");
        }
    }

    #[test]
    fn impossible_configurations_are_refused() {
        let bad = |config: MemoryConfig| DeviceMemory::new(config).err().expect("refused").to_string();
        let base = MemoryConfig::default();
        assert!(bad(MemoryConfig {
            cores: 0,
            ..base.clone()
        })
        .contains("at least one core"));
        assert!(bad(MemoryConfig {
            l1_interleaved_per_core: 2 << 20,
            ..base.clone()
        })
        .contains("within the safe L1"));
        assert!(bad(MemoryConfig {
            dram_bytes: 1 << 40,
            ..base
        })
        .contains("DRAM of 1099511627776 bytes"));
        let memory = DeviceMemory::new(MemoryConfig::default()).unwrap();
        assert_eq!(memory.usage(MemoryKind::Dram).capacity, 2 << 30);
    }
}
