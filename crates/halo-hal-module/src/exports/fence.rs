//! `hal.fence.*`: creating, joining, signalling, failing and awaiting fences.

use super::{object, Row, WaitingRow};
use crate::objects::{HalDevice, HalFence};
use crate::{Args, HalModuleState};
use halo_hal::{Error, Fence, Result, StatusCode, Timeout};
use halo_vm::{Results, Value};
use smallvec::smallvec;
use std::time::{Duration, Instant};

pub(crate) const EXPORTS: &[Row] = &[
    ("fence.create", "0rI_r", create),
    ("fence.fail", "0ri_v", fail),
    ("fence.join", "0ICrD_r", join),
    ("fence.query", "0r_i", query),
    ("fence.signal", "0r_v", signal),
];

/// Functions that wait: `(name, cconv, what it waits for, the function)`.
pub(crate) const WAITING: &[WaitingRow] = &[("fence.await", "0iICrD_i", awaited, wait)];

/// What `fence.await` waits for: all its fences joined (`None` when there are none). A yielding
/// invocation suspends until this is reached, so `wait` then returns without blocking (the
/// timeout does not apply to a suspended invocation).
fn awaited(_: &HalModuleState, args: &Args<'_>) -> Result<Option<Fence>> {
    let joined = Fence::join(fences(args, 2).collect::<Result<Vec<_>>>()?);
    Ok((!joined.is_empty()).then_some(joined))
}

/// `(device, flags) -> fence`: a new semaphore at 0 and the timepoint 1 on it.
fn create(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let semaphore = device.create_semaphore(0)?;
    Ok(object(HalFence(Fence::at(semaphore, 1))))
}

/// The non-null fences of a variadic segment starting at `first`, where they are (no counted
/// copies).
fn fences<'a, 'b>(args: &'b Args<'a>, first: usize) -> impl Iterator<Item = Result<&'a Fence>> + 'b {
    (first..args.len()).filter_map(|i| args.optional_object::<HalFence>(i).map(|f| f.map(|f| &f.0)).transpose())
}

/// `(flags, fences...) -> fence or null`: null when nothing is left to wait for.
fn join(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let joined = Fence::join(fences(args, 1).collect::<Result<Vec<_>>>()?);
    Ok(if joined.is_empty() {
        smallvec![Value::Ref(None)]
    } else {
        object(HalFence(joined))
    })
}

/// `(fence) -> status`: 0 when reached, `DEFERRED` while pending, the failure's code otherwise.
fn query(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let code = match args.object::<HalFence>(0)?.0.query() {
        Ok(true) => 0,
        Ok(false) => StatusCode::Deferred as i32,
        Err(error) => error.code() as i32,
    };
    Ok(smallvec![Value::I32(code)])
}

/// `(fence)`: signals every timepoint.
fn signal(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    args.object::<HalFence>(0)?.0.signal()?;
    Ok(Results::new())
}

/// `(fence, status)`: fails every semaphore of the fence with the status code.
fn fail(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let fence = &args.object::<HalFence>(0)?.0;
    let code = StatusCode::from_masked(args.i32(1)? as u32);
    fence.fail(&Error::new(code, "fence failed by the program"));
    Ok(Results::new())
}

/// `(timeout_ms, flags, fences...) -> status`: blocks until every fence is reached; returns
/// `DEADLINE_EXCEEDED` (4) on timeout and fails with a failed fence's error. Gives up once the
/// call is cancelled ([`halo_hal::caller`]): a call its caller has given up on (Ctrl-C in Python,
/// a server request past its deadline) must not stay blocked on a fence that is never reached.
fn wait(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let timeout = match args.i32(0)? as u32 {
        u32::MAX => Timeout::Infinite,
        millis => Timeout::Deadline(Instant::now() + Duration::from_millis(millis.into())),
    };
    for fence in fences(args, 2) {
        match fence?.wait_unless(timeout, halo_hal::caller::has_given_up) {
            Ok(()) => {}
            Err(error) if error.code() == StatusCode::DeadlineExceeded => {
                return Ok(smallvec![Value::I32(StatusCode::DeadlineExceeded as i32)]);
            }
            Err(error) => return Err(error),
        }
    }
    Ok(smallvec![Value::I32(0)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::state_without_devices;
    use halo_hal::TimelineSemaphore;
    use halo_vm::CancelToken;

    /// `fence.await`'s arguments: a timeout in milliseconds (-1: none), flags, and a fence that
    /// nothing will signal.
    fn await_unreached(timeout_ms: i32) -> [Value; 3] {
        let fence = HalFence(Fence::at(TimelineSemaphore::new(0), 1)).into_ref();
        [Value::I32(timeout_ms), Value::I64(0), Value::Ref(Some(fence))]
    }

    #[test]
    fn a_wait_for_a_fence_never_reached_ends_when_its_call_is_cancelled() {
        let args = await_unreached(-1);
        let token = CancelToken::new();
        let canceller = {
            let token = token.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                token.cancel();
            })
        };
        let error = halo_hal::caller::on_behalf_of(token.flag(), || {
            wait(&state_without_devices(), &Args::from_values(&args))
        })
        .unwrap_err();
        canceller.join().unwrap();
        assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
        assert!(error.to_string().contains("wait for a fence was given up"), "{error}");
    }

    #[test]
    fn a_cancellable_wait_keeps_the_programs_own_timeout() {
        let args = await_unreached(30);
        let started = Instant::now();
        let not_given_up = CancelToken::new().flag();
        let results = halo_hal::caller::on_behalf_of(not_given_up, || {
            wait(&state_without_devices(), &Args::from_values(&args))
        })
        .unwrap();
        assert_eq!(results[0], Value::I32(StatusCode::DeadlineExceeded as i32));
        assert!(
            started.elapsed() >= Duration::from_millis(30),
            "{:?}",
            started.elapsed()
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
