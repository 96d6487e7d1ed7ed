//! Queue operations ordered by fences.

use crate::context::WAIT;
use crate::CtsDevice;
use halo_hal::{
    BufferParams, BufferRef, CommandBufferMode, Error, Fence, QueueAffinity, StatusCode, Timeout, WHOLE_BUFFER,
};
use std::thread;
use std::time::Duration;

const ANY: QueueAffinity = QueueAffinity::ANY;

/// queue_fill, queue_update and queue_copy chained by one semaphore.
pub fn transfers_through_queue(ctx: &CtsDevice) {
    let d = &ctx.device;
    let (a, b) = (ctx.buffer(16), ctx.buffer(16));
    let s = d.create_semaphore(0).unwrap();
    let at = |v| Fence::at(s.clone(), v);
    d.queue_fill(ANY, &Fence::new(), &at(1), &a, 0, 16, &[0x5A]).unwrap();
    d.queue_update(ANY, &at(1), &at(2), &[1, 2, 3], &a, 4).unwrap();
    d.queue_copy(ANY, &at(2), &at(3), &a, 2, &b, 8, 8).unwrap();
    at(3).wait(Timeout::from(WAIT)).unwrap();
    assert_eq!(
        b.read_all().unwrap(),
        [0, 0, 0, 0, 0, 0, 0, 0, 0x5A, 0x5A, 1, 2, 3, 0x5A, 0x5A, 0x5A]
    );
}

/// Updates beyond the per-command limit are split, not rejected.
pub fn large_update_is_split(ctx: &CtsDevice) {
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let buffer = ctx.buffer(data.len() as u64 + 8);
    let done = Fence::at(ctx.device.create_semaphore(0).unwrap(), 1);
    ctx.device
        .queue_update(ANY, &Fence::new(), &done, &data, &buffer, 8)
        .unwrap();
    done.wait(Timeout::from(WAIT)).unwrap();
    assert_eq!(&buffer.read_all().unwrap()[8..], &data[..]);
}

/// Each submission waits for the previous one's signal.
pub fn fences_order_submissions(ctx: &CtsDevice) {
    let buffer = ctx.buffer(4);
    let s = ctx.device.create_semaphore(0).unwrap();
    for step in 1..=20u8 {
        let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
        cb.fill_buffer(BufferRef::direct(&buffer, 0, 4), &[step]).unwrap();
        cb.end().unwrap();
        let wait = Fence::at(s.clone(), step as u64 - 1);
        ctx.device
            .queue_execute(ANY, &wait, &Fence::at(s.clone(), step as u64), Some(&cb), &[])
            .unwrap();
    }
    s.wait(20, Timeout::from(WAIT)).unwrap();
    assert_eq!(buffer.read_all().unwrap(), [20; 4]);
}

/// A queue-allocated buffer is usable after its signal and can be deallocated in order.
pub fn alloca_and_dealloca(ctx: &CtsDevice) {
    let d = &ctx.device;
    let s = d.create_semaphore(0).unwrap();
    let at = |v| Fence::at(s.clone(), v);
    let buffer = d
        .queue_alloca(ANY, &Fence::new(), &at(1), BufferParams::host_mappable(), 256)
        .unwrap();
    assert_eq!(buffer.byte_length(), 256);
    d.queue_fill(ANY, &at(1), &at(2), &buffer, 0, WHOLE_BUFFER, &[3])
        .unwrap();
    at(2).wait(Timeout::from(WAIT)).unwrap();
    assert_eq!(buffer.read_all().unwrap(), vec![3u8; 256]);
    d.queue_dealloca(ANY, &at(2), &at(3), &buffer).unwrap();
    at(3).wait(Timeout::from(WAIT)).unwrap();
}

/// A barrier signals only after all its waits.
pub fn barrier_signals_after_waits(ctx: &CtsDevice) {
    let d = &ctx.device;
    let (a, b, out) = (
        d.create_semaphore(0).unwrap(),
        d.create_semaphore(0).unwrap(),
        d.create_semaphore(0).unwrap(),
    );
    let signaller = {
        let (a, b) = (a.clone(), b.clone());
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            a.signal(1).unwrap();
            thread::sleep(Duration::from_millis(10));
            b.signal(1).unwrap();
        })
    };
    let wait = Fence::join([&Fence::at(a, 1), &Fence::at(b.clone(), 1)]);
    d.queue_barrier(ANY, &wait, &Fence::at(out.clone(), 1)).unwrap();
    out.wait(1, Timeout::from(WAIT)).unwrap();
    assert_eq!(b.query().unwrap(), 1);
    signaller.join().unwrap();
}

/// Fills and copies the HAL rejects fail when submitted, naming the problem, and signal nothing.
pub fn invalid_transfers_fail_at_submit(ctx: &CtsDevice) {
    let d = &ctx.device;
    let signal = d.create_semaphore(0).unwrap();
    let done = Fence::at(signal.clone(), 1);
    let (a, b) = (ctx.buffer(16), ctx.buffer(16));
    let misaligned = d
        .queue_fill(ANY, &Fence::new(), &done, &a, 2, 8, &[1, 2, 3, 4])
        .unwrap_err();
    assert_eq!(misaligned.code(), StatusCode::InvalidArgument, "{misaligned}");
    let bad_pattern = d
        .queue_fill(ANY, &Fence::new(), &done, &a, 0, 6, &[1, 2, 3])
        .unwrap_err();
    assert_eq!(bad_pattern.code(), StatusCode::InvalidArgument, "{bad_pattern}");
    let past_end = d.queue_fill(ANY, &Fence::new(), &done, &a, 8, 16, &[0]).unwrap_err();
    assert_eq!(past_end.code(), StatusCode::OutOfRange, "{past_end}");
    let overlap = d.queue_copy(ANY, &Fence::new(), &done, &a, 0, &a, 4, 8).unwrap_err();
    assert_eq!(overlap.code(), StatusCode::InvalidArgument, "{overlap}");
    let too_long = d.queue_copy(ANY, &Fence::new(), &done, &a, 8, &b, 0, 12).unwrap_err();
    assert_eq!(too_long.code(), StatusCode::OutOfRange, "{too_long}");
    assert_eq!(signal.query().unwrap(), 0);
    assert_eq!(a.read_all().unwrap(), vec![0; 16]);
    assert_eq!(b.read_all().unwrap(), vec![0; 16]);
}

/// A failed wait semaphore fails the operation's signal semaphores and skips its work.
pub fn failed_wait_fails_signal(ctx: &CtsDevice) {
    let d = &ctx.device;
    let (upstream, downstream) = (d.create_semaphore(0).unwrap(), d.create_semaphore(0).unwrap());
    let buffer = ctx.buffer(4);
    upstream.fail(Error::data_loss("upstream failed"));
    let result = d.queue_fill(
        ANY,
        &Fence::at(upstream, 1),
        &Fence::at(downstream.clone(), 1),
        &buffer,
        0,
        4,
        &[9],
    );
    if let Err(error) = result {
        assert_eq!(error.code(), StatusCode::DataLoss);
    }
    let error = downstream.wait(1, Timeout::from(WAIT)).unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    assert_eq!(
        buffer.read_all().unwrap(),
        [0; 4],
        "work after a failed wait must not run"
    );
    let fine = d.create_semaphore(0).unwrap();
    d.queue_fill(ANY, &Fence::new(), &Fence::at(fine.clone(), 1), &buffer, 0, 4, &[1])
        .unwrap();
    fine.wait(1, Timeout::from(WAIT)).unwrap();
}

/// Work waiting on a semaphore that another thread signals later runs after that signal.
pub fn wait_before_signal_from_other_thread(ctx: &CtsDevice) {
    let d = ctx.device.clone();
    let (gate, done) = (d.create_semaphore(0).unwrap(), d.create_semaphore(0).unwrap());
    let buffer = ctx.buffer(4);
    let opener = {
        let gate = gate.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            gate.signal(1).unwrap();
        })
    };
    d.queue_fill(
        ANY,
        &Fence::at(gate, 1),
        &Fence::at(done.clone(), 1),
        &buffer,
        0,
        4,
        &[4],
    )
    .unwrap();
    done.wait(1, Timeout::from(WAIT)).unwrap();
    assert_eq!(buffer.read_all().unwrap(), [4; 4]);
    opener.join().unwrap();
}

/// An asynchronous queue accepts work before its wait is signalled by the same thread.
pub fn wait_before_signal_same_thread(ctx: &CtsDevice) {
    let d = &ctx.device;
    let (gate, done) = (d.create_semaphore(0).unwrap(), d.create_semaphore(0).unwrap());
    let buffer = ctx.buffer(4);
    d.queue_fill(
        ANY,
        &Fence::at(gate.clone(), 1),
        &Fence::at(done.clone(), 1),
        &buffer,
        0,
        4,
        &[6],
    )
    .unwrap();
    assert_eq!(done.query().unwrap(), 0);
    gate.signal(1).unwrap();
    done.wait(1, Timeout::from(WAIT)).unwrap();
    assert_eq!(buffer.read_all().unwrap(), [6; 4]);
}

/// `hal.device.id` matches the driver name by glob; unknown queries are `NotFound`.
pub fn device_queries(ctx: &CtsDevice) {
    let d = &ctx.device;
    assert_eq!(d.query_i64("hal.device.id", ctx.manifest.driver).unwrap(), 1);
    assert_eq!(
        d.query_i64("hal.device.id", "local-*").unwrap(),
        ctx.manifest.driver.starts_with("local-") as i64
    );
    assert_eq!(d.query_i64("hal.device.id", "no-such-driver").unwrap(), 0);
    assert_eq!(d.query_i64("no.such", "key").unwrap_err().code(), StatusCode::NotFound);
}

/// wait_idle returns once submitted work is done.
pub fn wait_idle_after_work(ctx: &CtsDevice) {
    let buffer = ctx.buffer(1 << 20);
    let done = Fence::at(ctx.device.create_semaphore(0).unwrap(), 1);
    ctx.device
        .queue_fill(ANY, &Fence::new(), &done, &buffer, 0, WHOLE_BUFFER, &[1, 2, 3, 4])
        .unwrap();
    ctx.device.wait_idle(Timeout::from(WAIT)).unwrap();
    assert!(done.query().unwrap());
    assert_eq!(&buffer.read_all().unwrap()[..8], &[1, 2, 3, 4, 1, 2, 3, 4]);
}
