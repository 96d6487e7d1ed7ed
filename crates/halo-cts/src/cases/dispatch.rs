//! Dispatches of IREE-compiled fixture kernels.

use crate::context::{f32_bytes, f32_values, i32_bytes, i32_values};
use crate::CtsDevice;
use halo_hal::{
    BufferParams, BufferRef, BufferUsage, CommandBufferMode, DispatchCommand, StatusCode, WorkgroupCount, WHOLE_BUFFER,
};

fn dispatch(
    ctx: &CtsDevice,
    executable: &str,
    export: u32,
    grid: [u32; 3],
    constants: Vec<u32>,
    refs: Vec<BufferRef>,
) -> DispatchCommand {
    DispatchCommand {
        executable: ctx.executable(executable),
        export,
        workgroup_count: WorkgroupCount::Static(grid),
        constants,
        bindings: refs,
    }
}

/// `negate` writes the negated input.
pub fn dispatch_writes_output(ctx: &CtsDevice) {
    let input = [1.5f32, -2.25, 0.0, 3.0, -0.125, 100.0, 7.0, -8.0];
    let a = ctx.buffer_with(&f32_bytes(&input));
    let out = ctx.buffer(32);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 2);
    let refs = vec![ctx.reference(0, &a, 0, WHOLE_BUFFER), ctx.reference(1, &out, 0, 32)];
    cb.dispatch(dispatch(ctx, "multi_export", 0, [1, 1, 1], vec![], refs))
        .unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &ctx.table(&[&a, &out])).unwrap();
    let expected: Vec<f32> = input.iter().map(|v| -v).collect();
    assert_eq!(f32_values(&out.read_all().unwrap()), expected);
}

/// `add_scaled` reads a push constant: out = a + k * b.
pub fn dispatch_with_constants(ctx: &CtsDevice) {
    let a = [1, -2, 3, -4, 1000, i32::MAX, -100, 0];
    let b = [10, 20, -30, 40, -1, 1, 7, 123];
    for k in [-3i32, 0, 5] {
        let (ba, bb, out) = (
            ctx.buffer_with(&i32_bytes(&a)),
            ctx.buffer_with(&i32_bytes(&b)),
            ctx.buffer(32),
        );
        let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 3);
        let refs = vec![
            ctx.reference(0, &ba, 0, 32),
            ctx.reference(1, &bb, 0, 32),
            ctx.reference(2, &out, 0, 32),
        ];
        cb.dispatch(dispatch(ctx, "multi_export", 2, [1, 1, 1], vec![k as u32], refs))
            .unwrap();
        cb.end().unwrap();
        ctx.submit_and_wait(&cb, &ctx.table(&[&ba, &bb, &out])).unwrap();
        let expected: Vec<i32> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| x.wrapping_add(k.wrapping_mul(*y)))
            .collect();
        assert_eq!(i32_values(&out.read_all().unwrap()), expected, "k = {k}");
    }
}

/// Every workgroup of a 4x3x2 grid runs once with the right id.
pub fn dispatch_3d_grid(ctx: &CtsDevice) {
    let out = ctx.buffer_with(&i32_bytes(&[-1; 24]));
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 1);
    cb.dispatch(dispatch(
        ctx,
        "grid3d",
        0,
        [4, 3, 2],
        vec![],
        vec![ctx.reference(0, &out, 0, 96)],
    ))
    .unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &ctx.table(&[&out])).unwrap();
    let expected: Vec<i32> = (0..2)
        .flat_map(|z| (0..3).flat_map(move |y| (0..4).map(move |x| x + 10 * y + 100 * z)))
        .collect();
    assert_eq!(i32_values(&out.read_all().unwrap()), expected);
}

/// A grid with a zero side runs no workgroup, and the submission still completes.
pub fn dispatch_with_empty_grid(ctx: &CtsDevice) {
    for grid in [[0, 3, 2], [4, 0, 1], [4, 3, 0]] {
        let out = ctx.buffer_with(&i32_bytes(&[-1; 24]));
        let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 1);
        cb.dispatch(dispatch(
            ctx,
            "grid3d",
            0,
            grid,
            vec![],
            vec![ctx.reference(0, &out, 0, 96)],
        ))
        .unwrap();
        cb.end().unwrap();
        ctx.submit_and_wait(&cb, &ctx.table(&[&out])).unwrap();
        assert_eq!(i32_values(&out.read_all().unwrap()), [-1; 24], "grid {grid:?}");
    }
}

/// A barrier orders a dispatch after the transfer and dispatch before it.
pub fn chained_dispatches_with_barrier(ctx: &CtsDevice) {
    let data = ctx.buffer(32);
    let out = ctx.buffer(32);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 2);
    cb.update_buffer(
        &f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        ctx.reference(0, &data, 0, 32),
    )
    .unwrap();
    cb.execution_barrier().unwrap();
    cb.dispatch(dispatch(
        ctx,
        "multi_export",
        1,
        [2, 1, 1],
        vec![],
        vec![ctx.reference(0, &data, 0, 32)],
    ))
    .unwrap();
    cb.execution_barrier().unwrap();
    let refs = vec![ctx.reference(0, &data, 0, 32), ctx.reference(1, &out, 0, 32)];
    cb.dispatch(dispatch(ctx, "multi_export", 0, [1, 1, 1], vec![], refs))
        .unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &ctx.table(&[&data, &out])).unwrap();
    assert_eq!(
        f32_values(&out.read_all().unwrap()),
        [-2.0, -4.0, -6.0, -8.0, -10.0, -12.0, -14.0, -16.0]
    );
}

/// Submits a command buffer that writes `counts` to a buffer and then doubles the first four
/// elements of `data` once per workgroup, reading its workgroup count from that buffer.
fn submit_indirect_doubling(ctx: &CtsDevice, data: &halo_hal::Buffer, counts: [u32; 3]) -> halo_hal::Result<()> {
    let usage = BufferUsage::DEFAULT | BufferUsage::MAPPING | BufferUsage::DISPATCH_INDIRECT_PARAMETERS;
    let params = ctx
        .device
        .allocator()
        .allocate_buffer(
            BufferParams {
                usage,
                ..BufferParams::host_mappable()
            },
            12,
        )
        .unwrap();
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 2);
    let words: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
    cb.update_buffer(&words, ctx.reference(1, &params, 0, 12)).unwrap();
    cb.execution_barrier().unwrap();
    let mut command = dispatch(
        ctx,
        "multi_export",
        1,
        [0, 0, 0],
        vec![],
        vec![ctx.reference(0, data, 0, 32)],
    );
    command.workgroup_count = WorkgroupCount::Indirect(ctx.reference(1, &params, 0, 12));
    cb.dispatch(command).unwrap();
    cb.end().unwrap();
    ctx.submit_and_wait(&cb, &ctx.table(&[data, &params]))
}

/// Workgroup counts read from a buffer when the dispatch runs (here: only the first half).
pub fn indirect_workgroup_count(ctx: &CtsDevice) {
    let data = ctx.buffer_with(&f32_bytes(&[1.0; 8]));
    submit_indirect_doubling(ctx, &data, [1, 1, 1]).unwrap();
    assert_eq!(
        f32_values(&data.read_all().unwrap()),
        [2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    );
}

/// Counts read at run time beyond every device's limits fail the submission with OUT_OF_RANGE
/// without running the dispatch (Vulkan leaves such counts undefined), and the device goes on.
pub fn indirect_workgroup_count_beyond_limits(ctx: &CtsDevice) {
    let data = ctx.buffer_with(&f32_bytes(&[1.0; 8]));
    let error = submit_indirect_doubling(ctx, &data, [u32::MAX; 3]).unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
    assert!(error.message().contains("4294967295"), "{error}");
    assert_eq!(f32_values(&data.read_all().unwrap()), [1.0; 8]);
    submit_indirect_doubling(ctx, &data, [1, 1, 1]).unwrap();
    assert_eq!(
        f32_values(&data.read_all().unwrap()),
        [2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    );
}

/// Wrong ordinals, constant counts, binding counts and binding ranges are rejected at record time.
pub fn rejects_bad_dispatches(ctx: &CtsDevice) {
    let a = ctx.buffer(32);
    let cb = ctx.command_buffer(CommandBufferMode::ONE_SHOT, 0);
    let whole = || vec![BufferRef::whole(&a), BufferRef::whole(&a)];
    let error = cb
        .dispatch(dispatch(ctx, "multi_export", 7, [1, 1, 1], vec![], whole()))
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
    let error = cb
        .dispatch(dispatch(ctx, "multi_export", 0, [1, 1, 1], vec![3], whole()))
        .unwrap_err();
    assert!(
        error.to_string().contains("1 constants given; export 'negate' takes 0"),
        "{error}"
    );
    let error = cb
        .dispatch(dispatch(
            ctx,
            "multi_export",
            0,
            [1, 1, 1],
            vec![],
            vec![BufferRef::whole(&a)],
        ))
        .unwrap_err();
    assert!(error.to_string().contains("1 bindings given"), "{error}");
    let short = vec![BufferRef::whole(&a), BufferRef::direct(&a, 16, 32)];
    let error = cb
        .dispatch(dispatch(ctx, "multi_export", 0, [1, 1, 1], vec![], short))
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::OutOfRange);
    assert!(error.to_string().contains("binding 1"), "{error}");
}
