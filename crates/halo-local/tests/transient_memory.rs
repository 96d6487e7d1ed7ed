//! Queue allocations on both CPU devices come from a transient pool: steady-state calls reuse
//! blocks, failed work returns them, and the pool's bounds come from device URI parameters.

use halo_hal::transient_pool::TransientPool;
use halo_hal::{
    BufferParams, Device, DeviceParams, Driver, Error, Fence, QueueAffinity, StatusCode, Timeout, WHOLE_BUFFER,
};
use halo_local::sync::driver::SyncDriver;
use halo_local::task::driver::TaskDriver;
use std::sync::Arc;
use std::time::Duration;

const ANY: QueueAffinity = QueueAffinity::ANY;
fn wait() -> Timeout {
    Duration::from_secs(30).into()
}

fn devices(params: &[(&str, &str)]) -> Vec<Arc<dyn Device>> {
    let params: DeviceParams = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let drivers: [&dyn Driver; 2] = [&SyncDriver, &TaskDriver];
    drivers
        .iter()
        .map(|driver| driver.create_device("", &params).unwrap())
        .collect()
}

fn pool_counter(device: &dyn Device, key: &str) -> i64 {
    device.query_i64(TransientPool::QUERY_CATEGORY, key).unwrap()
}

/// One call's worth of queue work: allocate, fill, read back, release.
fn call(device: &dyn Device, size: u64, byte: u8) -> Result<(), Error> {
    let semaphore = device.create_semaphore(0)?;
    let at = |value| Fence::at(semaphore.clone(), value);
    let buffer = device.queue_alloca(ANY, &Fence::new(), &at(1), BufferParams::host_mappable(), size)?;
    device.queue_fill(ANY, &at(1), &at(2), &buffer, 0, WHOLE_BUFFER, &[byte])?;
    at(2).wait(wait())?;
    assert!(buffer.read_all()?.iter().all(|&b| b == byte));
    device.queue_dealloca(ANY, &at(2), &at(3), &buffer)?;
    at(3).wait(wait())
}

#[test]
fn steady_state_calls_reuse_one_block() {
    for device in devices(&[]) {
        for round in 0..50u8 {
            call(&*device, 3 << 20, round).unwrap();
            device.wait_idle(wait()).unwrap();
        }
        let name = device.driver_name();
        assert_eq!(pool_counter(&*device, "fresh_blocks"), 1, "{name}");
        assert_eq!(pool_counter(&*device, "reused_blocks"), 49, "{name}");
        assert_eq!(pool_counter(&*device, "live_bytes"), 0, "{name}");
        assert_eq!(
            device.allocator().statistics().bytes_allocated,
            3 << 20,
            "{name}: the kept block"
        );
        device.trim().unwrap();
        assert_eq!(pool_counter(&*device, "retained_bytes"), 0, "{name}");
        assert_eq!(device.allocator().statistics().bytes_allocated, 0, "{name}");
    }
}

#[test]
fn work_that_fails_returns_its_block() {
    for device in devices(&[]) {
        let failed = device.create_semaphore(0).unwrap();
        failed.fail(Error::internal("an earlier call failed"));
        let semaphore = device.create_semaphore(0).unwrap();
        let at = |value| Fence::at(semaphore.clone(), value);
        let buffer = device
            .queue_alloca(ANY, &Fence::new(), &at(1), BufferParams::host_mappable(), 4096)
            .unwrap();
        let after_failure = Fence::at(failed.clone(), 1);
        device
            .queue_fill(ANY, &after_failure, &at(2), &buffer, 0, WHOLE_BUFFER, &[1])
            .unwrap();
        device.queue_dealloca(ANY, &at(2), &at(3), &buffer).unwrap();
        drop(buffer);
        assert_eq!(at(3).wait(wait()).unwrap_err().code(), StatusCode::Internal);
        device.wait_idle(wait()).unwrap();
        let name = device.driver_name();
        assert_eq!(pool_counter(&*device, "live_bytes"), 0, "{name}");
        assert_eq!(pool_counter(&*device, "retained_bytes"), 4096, "{name}");
        call(&*device, 4096, 9).unwrap();
        assert_eq!(pool_counter(&*device, "reused_blocks"), 1, "{name}");
    }
}

#[test]
fn the_limit_parameter_bounds_queue_allocations() {
    for device in devices(&[("transient_limit_bytes", "65536")]) {
        call(&*device, 65536, 1).unwrap();
        let error = call(&*device, 65537, 2).unwrap_err();
        assert_eq!(error.code(), StatusCode::ResourceExhausted, "{error}");
        assert!(error.to_string().contains("transient_limit_bytes"), "{error}");
        // The kept block was given back to try to make room, and the device still works.
        assert_eq!(pool_counter(&*device, "freed_blocks"), 1);
        call(&*device, 1024, 3).unwrap();
    }
}

#[test]
fn a_retain_budget_of_zero_keeps_nothing() {
    for device in devices(&[("transient_retain_bytes", "0")]) {
        call(&*device, 1024, 1).unwrap();
        device.wait_idle(wait()).unwrap();
        call(&*device, 1024, 2).unwrap();
        assert_eq!(pool_counter(&*device, "reused_blocks"), 0);
        assert_eq!(pool_counter(&*device, "fresh_blocks"), 2);
    }
}

/// The permissions `/proc/self/maps` lists for the mapping holding `address`.
fn protection_at(address: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .find_map(|line| {
            let (range, rest) = line.split_once(' ')?;
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start..end).contains(&address).then(|| rest[..4].to_string())
        })
        .unwrap_or_default()
}

#[test]
fn with_guard_pages_every_buffer_and_queue_allocation_ends_on_a_guard() {
    for device in devices(&[("guard_pages", "true")]) {
        let name = device.driver_name().to_string();
        let semaphore = device.create_semaphore(0).unwrap();
        let allocated = device
            .queue_alloca(
                ANY,
                &Fence::new(),
                &Fence::at(semaphore.clone(), 1),
                BufferParams::host_mappable(),
                1000,
            )
            .unwrap();
        let direct = device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), 1000)
            .unwrap();
        Fence::at(semaphore, 1).wait(wait()).unwrap();
        for (what, buffer) in [("queue", &allocated), ("allocator", &direct)] {
            let start = buffer.allocation().host_ptr().unwrap().as_ptr() as usize;
            assert_eq!(protection_at(start + 1023), "rw-p", "{name} {what}: the last byte");
            assert_eq!(protection_at(start + 1024), "---p", "{name} {what}: past the end");
        }
        // Queue allocations are not pooled: a reused block could be larger than the request.
        call(&*device, 1024, 1).unwrap();
        device.wait_idle(wait()).unwrap();
        call(&*device, 1024, 2).unwrap();
        assert_eq!(pool_counter(&*device, "reused_blocks"), 0, "{name}");
    }
    for device in devices(&[("guard_pages", "false")]) {
        let buffer = device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), 1000)
            .unwrap();
        let start = buffer.allocation().host_ptr().unwrap().as_ptr() as usize;
        assert_ne!(
            protection_at(start + 1024),
            "---p",
            "{}: no guard unless asked",
            device.driver_name()
        );
    }
}

#[test]
fn bad_pool_parameters_are_refused_by_name() {
    let drivers: [&dyn Driver; 2] = [&SyncDriver, &TaskDriver];
    for driver in drivers {
        let params: DeviceParams = [("transient_retain_bytes".to_string(), "-1".to_string())].into();
        let error = driver.create_device("", &params).err().unwrap();
        assert_eq!(error.code(), StatusCode::InvalidArgument);
        assert!(error.to_string().contains("transient_retain_bytes=-1"), "{error}");
        let params: DeviceParams = [("transient_bytes".to_string(), "1".to_string())].into();
        let error = driver.create_device("", &params).err().unwrap();
        assert!(
            error.to_string().contains("transient_limit_bytes") && error.to_string().contains("guard_pages"),
            "lists the known ones: {error}"
        );
        let params: DeviceParams = [("guard_pages".to_string(), "yes".to_string())].into();
        let error = driver.create_device("", &params).err().unwrap();
        assert!(error.to_string().contains("guard_pages=yes"), "{error}");
    }
    let unknown = devices(&[])
        .remove(1)
        .query_i64(TransientPool::QUERY_CATEGORY, "bytes")
        .unwrap_err();
    assert_eq!(unknown.code(), StatusCode::NotFound);
}
