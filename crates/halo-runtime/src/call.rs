//! The future an asynchronous call returns.

use halo_hal::{Fence, Result};
use halo_vm::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Where a call's outcome lands, and who to wake when it does.
#[derive(Default)]
struct Slot {
    outcome: Option<Result<Vec<Value>>>,
    waker: Option<Waker>,
}

/// The results of [`crate::Session::call_async`], ready when the call's work is done.
///
/// Works with any executor; completing it needs no polling thread (the fence's callback or
/// the helper thread wakes the task).
pub struct CallFuture {
    slot: Arc<Mutex<Slot>>,
}

impl CallFuture {
    pub(crate) fn ready(outcome: Result<Vec<Value>>) -> Self {
        CallFuture {
            slot: Arc::new(Mutex::new(Slot {
                outcome: Some(outcome),
                waker: None,
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

    /// Completes with what `work` returns, run on a new thread.
    pub(crate) fn on_thread(work: impl FnOnce() -> Result<Vec<Value>> + Send + 'static) -> Self {
        let future = CallFuture { slot: Arc::default() };
        let slot = future.slot.clone();
        std::thread::spawn(move || complete(&slot, work()));
        future
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
        match slot.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
