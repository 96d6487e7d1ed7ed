//! The `tenstorrent` driver: the mock device, configured by URI parameters.
//!
//! `tenstorrent://mock?grid=10x12&dram=2GiB&threads=2` (every parameter optional):
//! - `grid`: Tensix cores as rows×columns, default 10x12 (a P100A-class card);
//! - `dram`: DRAM size in bytes, with an optional `KiB`/`MiB`/`GiB` suffix, default 2 GiB, at
//!   most the card's 28 GiB (host memory is used only for what is allocated);
//! - `threads`: host threads running the cores, default one per host CPU.
//!
//! `tenstorrent://hardware` is the seam for a real card through TT-Metal, which this build does
//! not include: it reports the device as unavailable.

use crate::device::TenstorrentDevice;
use crate::memory::MemoryConfig;
use halo_hal::driver::select_device;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, Error, ParamReader, Result};
use std::sync::Arc;

/// Name under which the driver registers.
pub const DRIVER_NAME: &str = "tenstorrent";

const MAX_DRAM: u64 = 28 << 30;
const MAX_GRID_SIDE: u32 = 64;

/// The simulated chip's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockConfig {
    /// Rows of Tensix cores.
    pub rows: u32,
    /// Columns of Tensix cores.
    pub columns: u32,
    /// DRAM bytes.
    pub dram_bytes: u64,
    /// Host threads running the cores.
    pub host_threads: usize,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            rows: 10,
            columns: 12,
            dram_bytes: MemoryConfig::default().dram_bytes,
            host_threads: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

impl MockConfig {
    /// Reads the URI parameters over the defaults.
    ///
    /// # Errors
    /// `InvalidArgument` naming the parameter and what it accepts.
    pub fn from_params(params: &DeviceParams) -> Result<Self> {
        let mut params = ParamReader::new(DRIVER_NAME, params);
        let mut config = MockConfig::default();
        let side = |s: &str| s.parse::<u32>().ok().filter(|n| (1..=MAX_GRID_SIDE).contains(n));
        let grid = format!("ROWSxCOLUMNS, each 1 to {MAX_GRID_SIDE}");
        if let Some(grid) = params.value("grid", &grid, |value| {
            let (rows, columns) = value.split_once('x')?;
            Some((side(rows)?, side(columns)?))
        })? {
            (config.rows, config.columns) = grid;
        }
        if let Some(bytes) = params.value("dram", "a size from 1MiB to 28GiB, e.g. 512MiB", |value| {
            parse_size(value).filter(|bytes| (1 << 20..=MAX_DRAM).contains(bytes))
        })? {
            config.dram_bytes = bytes;
        }
        if let Some(threads) = params.number("threads", 1..=256)? {
            config.host_threads = threads;
        }
        params.finish()?;
        Ok(config)
    }

    /// The memory sizes of this chip.
    pub fn memory(&self) -> MemoryConfig {
        MemoryConfig {
            cores: u64::from(self.rows) * u64::from(self.columns),
            dram_bytes: self.dram_bytes,
            ..MemoryConfig::default()
        }
    }

    fn describe(&self) -> Vec<(String, String)> {
        let memory = self.memory();
        let mib = |bytes: u64| match bytes {
            0..0x100000 => format!("{} KiB", bytes >> 10),
            _ => format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20)),
        };
        vec![
            (
                "mode".into(),
                "mock: simulated in host memory, kernels on host threads".into(),
            ),
            (
                "grid".into(),
                format!("{}x{} Tensix cores (URI parameter grid=)", self.rows, self.columns),
            ),
            (
                "L1 per core".into(),
                format!("1.5 MiB, {} safe for data", mib(memory.l1_safe_per_core)),
            ),
            (
                "L1 sharded".into(),
                format!(
                    "{} ({} per core)",
                    mib(memory.sharded_per_core() * memory.cores),
                    mib(memory.sharded_per_core())
                ),
            ),
            (
                "L1 interleaved".into(),
                format!(
                    "{} ({} per core)",
                    mib(memory.l1_interleaved_per_core * memory.cores),
                    mib(memory.l1_interleaved_per_core)
                ),
            ),
            ("DRAM".into(), format!("{} (URI parameter dram=)", mib(self.dram_bytes))),
            (
                "host threads".into(),
                format!("{} (URI parameter threads=)", self.host_threads),
            ),
        ]
    }
}

/// Parses `123`, `64KiB`, `512MiB`, `2GiB` (also `K`/`M`/`G`).
fn parse_size(text: &str) -> Option<u64> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit {
        "" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Creates `tenstorrent` devices.
#[derive(Default)]
pub struct TenstorrentDriver;

impl TenstorrentDriver {
    fn devices(config: &MockConfig) -> Vec<DeviceInfo> {
        vec![DeviceInfo {
            id: 0,
            path: "mock".into(),
            name: "Tenstorrent mock device".into(),
            details: config.describe(),
        }]
    }
}

impl Driver for TenstorrentDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(Self::devices(&MockConfig::default()))
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        if path == "hardware" {
            return Err(Error::unavailable(
                "tenstorrent://hardware needs TT-Metal, which this build of halo does not include; \
                 use tenstorrent://mock",
            ));
        }
        let config = MockConfig::from_params(params)?;
        // The identity (and `halo devices`) shows the default chip; parameters change the
        // chip's shape, not which device it is.
        let info = select_device(DRIVER_NAME, &Self::devices(&MockConfig::default()), path)?.clone();
        Ok(Arc::new(TenstorrentDevice::new(info, &config)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> DeviceParams {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parameters_override_the_defaults() {
        let config = MockConfig::from_params(&params(&[("grid", "2x3"), ("dram", "64MiB"), ("threads", "3")])).unwrap();
        assert_eq!(
            (config.rows, config.columns, config.dram_bytes, config.host_threads),
            (2, 3, 64 << 20, 3)
        );
        assert_eq!(config.memory().cores, 6);
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("12"), Some(12));
    }

    #[test]
    fn bad_parameters_name_what_was_wrong() {
        for (key, value) in [
            ("grid", "0x3"),
            ("grid", "10"),
            ("grid", "65x1"),
            ("dram", "29GiB"),
            ("dram", "1TB"),
            ("threads", "0"),
            ("cores", "4"),
        ] {
            let error = MockConfig::from_params(&params(&[(key, value)])).unwrap_err();
            assert!(error.message().contains(key), "{key}={value}: {error}");
        }
    }

    #[test]
    fn hardware_mode_is_unavailable_not_faked() {
        let error = TenstorrentDriver
            .create_device("hardware", &DeviceParams::new())
            .err()
            .unwrap();
        assert!(
            error.is_unavailable() && error.message().contains("TT-Metal"),
            "{error}"
        );
    }
}
