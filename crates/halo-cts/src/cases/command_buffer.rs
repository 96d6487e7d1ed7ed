//! Command buffer recording, validation and execution of transfers.

use crate::context::WAIT;
use crate::{CtsDevice, Recording};
use halo_hal::{
    Binding, BufferRef, CommandBufferMode, CommandCategory, Fence, QueueAffinity, StatusCode, Timeout, WHOLE_BUFFER,
};

/// Fills with 1/2/4-byte patterns at several offsets and lengths.
pub fn fill_patterns_and_offsets(ctx: &CtsDevice) {
    for (pattern, offset, length) in [
        (&[0x11u8][..], 0u64, 64u64),
        (&[0x12], 3, 5),
        (&[1, 2], 2, 12),
        (&[1, 2, 3, 4], 8, 16),
        (&[9, 8, 7, 6], 0, 64),
    ] {
        let buffer = ctx.buffer(64);
        buffer.map_fill(0, WHOLE_BUFFER, &[0xEE]).unwrap();
        let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 1);
        cb.fill_buffer(ctx.reference(0, &buffer, offset, length), pattern)
            .unwrap();
        cb.end().unwrap();
        ctx.submit_and_wait(&cb, &ctx.table(&[&buffer])).unwrap();
        let bytes = buffer.read_all().unwrap();
        for (i, byte) in bytes.iter().enumerate() {
            let i = i as u64;
            let expected = if i >= offset && i < offset + length {
                pattern[((i - offset) % pattern.len() as u64) as usize]
            } else {
                0xEE
            };
            assert_eq!(
                *byte,
                expected,
                "byte {i} after fill {pattern:?} at [{offset}, {})",
                offset + length
            );
        }
    }
}

/// Update writes bytes captured at record time, even if the source changes afterwards.
pub fn update_writes_captured_bytes(ctx: &CtsDevice) {
    let buffer = ctx.buffer(16);
    let mut source = vec![1u8, 2, 3, 4, 5];
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 1);
    cb.update_buffer(&source, ctx.reference(0, &buffer, 6, 5)).unwrap();
    cb.end().unwrap();
    source.fill(0);
    ctx.submit_and_wait(&cb, &ctx.table(&[&buffer])).unwrap();
    assert_eq!(
        buffer.read_all().unwrap(),
        [0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0]
    );
}

/// Copies between buffers at offsets; overlapping copies in one buffer are rejected.
pub fn copy_between_buffers(ctx: &CtsDevice) {
    let source = ctx.buffer_with(&(0u8..32).collect::<Vec<_>>());
    let target = ctx.buffer(32);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 2);
    cb.copy_buffer(ctx.reference(0, &source, 4, 8), ctx.reference(1, &target, 20, 8))
        .unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &ctx.table(&[&source, &target])).unwrap();
    let bytes = target.read_all().unwrap();
    assert_eq!(&bytes[20..28], &[4, 5, 6, 7, 8, 9, 10, 11]);
    assert!(bytes[..20].iter().chain(&bytes[28..]).all(|b| *b == 0));
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
    let error = cb
        .copy_buffer(BufferRef::direct(&source, 0, 8), BufferRef::direct(&source, 4, 8))
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    assert!(error.to_string().contains("overlaps"), "{error}");
}

/// Fill, update and copy to the same bytes, each behind a barrier, apply in recorded order.
/// Without the barriers their order would be undefined: only barriers order commands, as in
/// IREE's HAL and Vulkan, and `local-task` runs the commands of one region on several workers.
pub fn commands_run_in_order(ctx: &CtsDevice) {
    let a = ctx.buffer(8);
    let b = ctx.buffer(8);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 2);
    cb.fill_buffer(ctx.reference(0, &a, 0, 8), &[1]).unwrap();
    cb.execution_barrier().unwrap();
    cb.update_buffer(&[2, 2], ctx.reference(0, &a, 2, 2)).unwrap();
    cb.execution_barrier().unwrap();
    cb.copy_buffer(ctx.reference(0, &a, 0, 8), ctx.reference(1, &b, 0, 8))
        .unwrap();
    cb.execution_barrier().unwrap();
    cb.fill_buffer(ctx.reference(0, &a, 0, 4), &[3, 3, 3, 3]).unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &ctx.table(&[&a, &b])).unwrap();
    assert_eq!(b.read_all().unwrap(), [1, 1, 2, 2, 1, 1, 1, 1]);
    assert_eq!(a.read_all().unwrap(), [3, 3, 3, 3, 1, 1, 1, 1]);
}

/// A reusable command buffer runs again on each submission.
pub fn reusable_resubmits(ctx: &CtsDevice) {
    let counter = ctx.buffer(4);
    let scratch = ctx.buffer(4);
    let cb = ctx.command_buffer(CommandBufferMode::empty(), 2);
    cb.copy_buffer(ctx.reference(0, &counter, 0, 4), ctx.reference(1, &scratch, 0, 4))
        .unwrap();
    cb.execution_barrier().unwrap();
    cb.fill_buffer(ctx.reference(0, &counter, 0, 4), &[7]).unwrap();
    cb.end().unwrap();
    for round in 0..3 {
        counter.map_write(0, &[round; 4]).unwrap();
        ctx.submit_and_wait(&cb, &ctx.table(&[&counter, &scratch])).unwrap();
        assert_eq!(scratch.read_all().unwrap(), [round; 4], "round {round}");
        assert_eq!(counter.read_all().unwrap(), [7; 4]);
    }
}

/// One recording runs against different buffers bound at each submit, including subranges.
pub fn binding_tables_rebind_slots(ctx: &CtsDevice) {
    let cb = ctx.command_buffer(CommandBufferMode::empty(), 2);
    cb.copy_buffer(BufferRef::slot(0, 0, 4), BufferRef::slot(1, 4, 4))
        .unwrap();
    cb.end().unwrap();
    for value in [5u8, 6] {
        let source = ctx.buffer_with(&[value; 16]);
        let target = ctx.buffer(16);
        let table = [Binding::new(&source, 8, 4), Binding::new(&target, 4, 12)];
        ctx.submit_and_wait(&cb, &table).unwrap();
        let bytes = target.read_all().unwrap();
        assert_eq!(
            &bytes[8..12],
            &[value; 4],
            "slot 1 offset applies on top of binding offset"
        );
        assert!(bytes[..8].iter().chain(&bytes[12..]).all(|b| *b == 0));
    }
}

/// Submits with a missing slot or a slot too small for the recorded range are rejected.
pub fn rejects_missing_or_short_slots(ctx: &CtsDevice) {
    let cb = ctx.command_buffer(CommandBufferMode::empty(), 2);
    cb.fill_buffer(BufferRef::slot(1, 0, 16), &[1]).unwrap();
    cb.end().unwrap();
    let small = ctx.buffer(8);
    let signal = Fence::at(ctx.device.create_semaphore(0).unwrap(), 1);
    let error = ctx
        .device
        .queue_execute(QueueAffinity::ANY, &Fence::new(), &signal, Some(&cb), &[])
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
    assert!(error.to_string().contains("slot 1"), "{error}");
    let table = [Binding::whole(&small), Binding::whole(&small)];
    let error = ctx
        .device
        .queue_execute(QueueAffinity::ANY, &Fence::new(), &signal, Some(&cb), &table)
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
    assert!(error.to_string().contains("exceeds buffer length 8"), "{error}");
    let cb = ctx.command_buffer(CommandBufferMode::empty(), 2);
    assert_eq!(
        cb.fill_buffer(BufferRef::slot(2, 0, 4), &[1]).unwrap_err().code(),
        StatusCode::OutOfRange
    );
}

/// A one-shot command buffer cannot be submitted twice.
pub fn one_shot_rejects_resubmit(ctx: &CtsDevice) {
    let buffer = ctx.buffer(4);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
    cb.fill_buffer(BufferRef::whole(&buffer), &[1]).unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &[]).unwrap();
    let error = ctx.submit_and_wait(&cb, &[]).unwrap_err();
    assert_eq!(error.code(), StatusCode::FailedPrecondition, "{error}");
}

/// Out-of-range, misaligned, wrong-category and out-of-state recording is rejected at record time.
pub fn rejects_bad_recording(ctx: &CtsDevice) {
    let buffer = ctx.buffer(16);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
    let error = cb.fill_buffer(BufferRef::direct(&buffer, 8, 16), &[1]).unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange);
    assert!(
        error.to_string().contains("[8, 24) exceeds buffer length 16"),
        "{error}"
    );
    assert_eq!(
        cb.fill_buffer(BufferRef::direct(&buffer, 1, 4), &[1, 2, 3, 4])
            .unwrap_err()
            .code(),
        StatusCode::InvalidArgument
    );
    assert_eq!(
        cb.update_buffer(&vec![0; 70_000], BufferRef::whole(&buffer))
            .unwrap_err()
            .code(),
        StatusCode::InvalidArgument
    );
    let copy = cb.copy_buffer(
        BufferRef::direct(&buffer, 0, 4),
        BufferRef::direct(&ctx.buffer(16), 14, 4),
    );
    assert_eq!(copy.unwrap_err().code(), StatusCode::OutOfRange);
    cb.end().unwrap();
    assert_eq!(
        cb.fill_buffer(BufferRef::whole(&buffer), &[1]).unwrap_err().code(),
        StatusCode::FailedPrecondition
    );
    assert_eq!(cb.end().unwrap_err().code(), StatusCode::FailedPrecondition);
    let not_begun = ctx
        .device
        .create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, QueueAffinity::ANY, 0)
        .unwrap();
    assert_eq!(
        not_begun.execution_barrier().unwrap_err().code(),
        StatusCode::FailedPrecondition
    );
    let signal = Fence::at(ctx.device.create_semaphore(0).unwrap(), 1);
    let error = ctx
        .device
        .queue_execute(QueueAffinity::ANY, &Fence::new(), &signal, Some(&not_begun), &[])
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::FailedPrecondition);
    let dispatch_only = ctx
        .device
        .create_command_buffer(
            CommandBufferMode::ONE_SHOT,
            CommandCategory::DISPATCH,
            QueueAffinity::ANY,
            0,
        )
        .unwrap();
    dispatch_only.begin().unwrap();
    assert_eq!(
        dispatch_only
            .fill_buffer(BufferRef::whole(&buffer), &[1])
            .unwrap_err()
            .code(),
        StatusCode::FailedPrecondition
    );
    let read_only = buffer.restricted(halo_hal::BufferUsage::all(), halo_hal::MemoryAccess::READ);
    assert_eq!(
        cb_fill(ctx, &read_only).unwrap_err().code(),
        StatusCode::PermissionDenied
    );
}

fn cb_fill(ctx: &CtsDevice, buffer: &halo_hal::Buffer) -> halo_hal::Result<()> {
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
    cb.fill_buffer(BufferRef::whole(buffer), &[1])
}

/// An empty command buffer signals its fence.
pub fn empty_command_buffer_completes(ctx: &CtsDevice) {
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
    cb.end().unwrap();
    let semaphore = ctx.device.create_semaphore(0).unwrap();
    let fence = Fence::at(semaphore.clone(), 3);
    ctx.device
        .queue_execute(QueueAffinity::ANY, &Fence::new(), &fence, Some(&cb), &[])
        .unwrap();
    fence.wait(Timeout::from(WAIT)).unwrap();
    assert_eq!(semaphore.query().unwrap(), 3);
    assert_eq!(ctx.recording, Recording::Direct);
}
