//! The future an asynchronous call returns.

use halo_hal::{Fence, Result};
use halo_vm::interp::{Invocation, Step};
use halo_vm::{CancelToken, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Where a call's outcome lands, and who to wake when it does.
#[derive(Default)]
struct Slot {
    outcome: Option<Result<Vec<Value>>>,
    waker: Option<Waker>,
    /// A suspended call, resumed by the next poll.
    invocation: Option<Invocation>,
}

/// The results of [`crate::Session::call_async`], ready when the call's work is done.
///
/// Works with any executor. No thread waits for it: the VM runs when the future is polled, and
/// a fence's callback wakes the task when what the call waits for is reached.
pub struct CallFuture {
    slot: Arc<Mutex<Slot>>,
}

impl CallFuture {
    pub(crate) fn ready(outcome: Result<Vec<Value>>) -> Self {
        CallFuture {
            slot: Arc::new(Mutex::new(Slot {
                outcome: Some(outcome),
                ..Slot::default()
            })),
        }
    }

    /// Completes with `outputs` when `fence` is reached, or with the fence's failure.
    pub(crate) fn on_fence(fence: &Fence, outputs: Vec<Value>) -> Self {
        let future = CallFuture { slot: Arc::default() };
        let slot = future.slot.clone();
        fence.on_reached(move |reached| complete(&slot, reached.map(|()| outputs)));
        future
    }

    /// Runs `invocation` when polled, suspending it (and the task) while it waits on a fence.
    pub(crate) fn on_invocation(invocation: Invocation) -> Self {
        CallFuture {
            slot: Arc::new(Mutex::new(Slot {
                invocation: Some(invocation),
                ..Slot::default()
            })),
        }
    }
}

impl CallFuture {
    /// Stops the call with `Cancelled` at its next step once `token` is cancelled, while its
    /// program still runs on the VM; work already handed to the device runs to its end.
    pub fn cancel_with(&self, token: CancelToken) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(invocation) = slot.invocation.as_mut() {
            invocation.cancel_with(token);
        }
    }
}

fn complete(slot: &Mutex<Slot>, outcome: Result<Vec<Value>>) {
    let waker = {
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.outcome = Some(outcome);
        slot.waker.take()
    };
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl Future for CallFuture {
    type Output = Result<Vec<Value>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(outcome) = slot.outcome.take() {
            return Poll::Ready(outcome);
        }
        let Some(mut invocation) = slot.invocation.take() else {
            slot.waker = Some(cx.waker().clone());
            return Poll::Pending;
        };
        match invocation.resume() {
            Ok(Step::Done(results)) => Poll::Ready(Ok(results)),
            Err(error) => Poll::Ready(Err(error)),
            Ok(Step::Wait(fence)) => {
                slot.invocation = Some(invocation);
                drop(slot);
                let waker = cx.waker().clone();
                // A failed fence wakes the task too; resuming then reports the failure.
                fence.on_reached(move |_| waker.wake());
                Poll::Pending
            }
        }
    }
}
