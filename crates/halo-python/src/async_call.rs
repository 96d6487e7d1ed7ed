//! `Function.call_async`: a call as an asyncio future.
//!
//! The call is polled on the event loop's thread with the GIL released. When it waits on the
//! device, the fence's callback wakes it by handing it to one waker thread, which schedules the
//! next poll with `loop.call_soon_threadsafe`; device threads never wait for the GIL. On the main
//! thread Ctrl-C stops a poll's program as it stops a plain call (see `interrupt`), and the
//! `KeyboardInterrupt` leaves the event loop.

use crate::array::results_to_python;
use crate::errors::to_py;
use crate::interrupt;
use halo_hal::Device;
use halo_runtime::CallFuture;
use pyo3::prelude::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

/// A call in flight and the asyncio future it completes.
#[pyclass(frozen, module = "halo")]
pub struct AsyncCall {
    call: Mutex<Option<CallFuture>>,
    device: Arc<dyn Device>,
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
}

impl AsyncCall {
    /// The running event loop, or Python's `RuntimeError` outside one: looked up before a call
    /// starts, so that no call is left running with nobody to take its results.
    pub fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        py.import("asyncio")?.call_method0("get_running_loop")
    }

    /// Starts polling `call` on `event_loop` and returns the future of its results.
    pub fn start<'py>(
        event_loop: Bound<'py, PyAny>,
        call: CallFuture,
        device: Arc<dyn Device>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = event_loop.py();
        let future = event_loop.call_method0("create_future")?;
        let pending = Bound::new(
            py,
            AsyncCall {
                call: Mutex::new(Some(call)),
                device,
                event_loop: event_loop.unbind(),
                future: future.clone().unbind(),
            },
        )?;
        AsyncCall::step(&pending)?;
        Ok(future)
    }
}

#[pymethods]
impl AsyncCall {
    /// Polls the call once; completes the future when it is done.
    fn step(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let this = slf.get();
        let waker = Waker::from(Arc::new(Resume {
            event_loop: this.event_loop.clone_ref(py),
            step: slf.getattr("step")?.unbind(),
        }));
        // Polls on the main thread take turns with the one token Ctrl-C cancels.
        let interrupt = interrupt::token_for_call(py)?;
        let polled = py.detach(|| {
            let mut call = this.call.lock().unwrap_or_else(|p| p.into_inner());
            let pending = call.as_mut()?;
            if let Some(token) = interrupt {
                pending.cancel_with(token.clone());
            }
            let poll = Pin::new(pending).poll(&mut Context::from_waker(&waker));
            if poll.is_ready() {
                *call = None;
            }
            Some(poll)
        });
        let future = this.future.bind(py);
        let outcome = match polled {
            None | Some(Poll::Pending) => return Ok(()),
            Some(Poll::Ready(outcome)) => outcome,
        };
        if interrupt::interrupted(interrupt, &outcome) {
            // asyncio.run's own SIGINT handler cancels the main task rather than raising, and
            // turns that into the KeyboardInterrupt; the future is cancelled in either case.
            future.call_method0("cancel")?;
            py.check_signals()?;
            return Ok(());
        }
        if future.call_method0("cancelled")?.is_truthy()? {
            return Ok(());
        }
        match outcome
            .map_err(to_py)
            .and_then(|results| results_to_python(py, &this.device, results))
        {
            Ok(value) => future.call_method1("set_result", (value,))?,
            Err(error) => future.call_method1("set_exception", (error.value(py),))?,
        };
        Ok(())
    }
}

/// Schedules a call's next poll on its event loop.
struct Resume {
    event_loop: Py<PyAny>,
    step: Py<PyAny>,
}

impl Wake for Resume {
    fn wake(self: Arc<Self>) {
        // A send fails only when the waker thread is gone, at process exit.
        let _ = waker_thread().lock().unwrap_or_else(|p| p.into_inner()).send(self);
    }
}

/// The thread that takes the GIL on behalf of device threads to schedule polls.
fn waker_thread() -> &'static Mutex<Sender<Arc<Resume>>> {
    static SENDER: OnceLock<Mutex<Sender<Arc<Resume>>>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (sender, receiver) = channel::<Arc<Resume>>();
        let spawned = std::thread::Builder::new()
            .name("halo-asyncio-waker".into())
            .spawn(move || {
                for resume in receiver {
                    // A closed loop cannot run the poll; its future is abandoned with it.
                    Python::try_attach(|py| {
                        let _ =
                            resume
                                .event_loop
                                .call_method1(py, "call_soon_threadsafe", (resume.step.clone_ref(py),));
                    });
                }
            });
        if let Err(error) = spawned {
            eprintln!("halo: could not start the asyncio waker thread: {error}");
        }
        Mutex::new(sender)
    })
}
