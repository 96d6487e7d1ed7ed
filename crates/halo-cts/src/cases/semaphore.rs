//! Timeline semaphores and fences, including waits across threads.

use crate::context::WAIT;
use crate::CtsDevice;
use halo_hal::{wait_semaphores, Error, Fence, Semaphore, StatusCode, Timeout, WaitMode};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn semaphore(ctx: &CtsDevice, initial: u64) -> Arc<dyn Semaphore> {
    ctx.device.create_semaphore(initial).unwrap()
}

/// Query returns the initial and then each signalled value; reached waits return at once.
pub fn query_and_signal(ctx: &CtsDevice) {
    let s = semaphore(ctx, 5);
    assert_eq!(s.query().unwrap(), 5);
    s.signal(6).unwrap();
    s.signal(100).unwrap();
    assert_eq!(s.query().unwrap(), 100);
    s.wait(50, Timeout::Immediate).unwrap();
    s.wait(100, Timeout::Immediate).unwrap();
}

/// A signal that does not advance the value is an error and changes nothing.
pub fn signal_must_increase(ctx: &CtsDevice) {
    let s = semaphore(ctx, 10);
    assert_eq!(s.signal(10).unwrap_err().code(), StatusCode::OutOfRange);
    assert_eq!(s.signal(3).unwrap_err().code(), StatusCode::OutOfRange);
    assert_eq!(s.query().unwrap(), 10);
}

/// Waits past the value time out with `DeadlineExceeded`, immediately or after the deadline.
pub fn wait_times_out(ctx: &CtsDevice) {
    let s = semaphore(ctx, 0);
    assert_eq!(
        s.wait(1, Timeout::Immediate).unwrap_err().code(),
        StatusCode::DeadlineExceeded
    );
    let start = Instant::now();
    let error = s.wait(1, Timeout::from(Duration::from_millis(50))).unwrap_err();
    assert_eq!(error.code(), StatusCode::DeadlineExceeded);
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert!(error.to_string().contains("value 1"), "{error}");
}

/// After a failure every query, wait and signal returns it.
pub fn failure_is_sticky(ctx: &CtsDevice) {
    let s = semaphore(ctx, 0);
    s.fail(Error::data_loss("device exploded"));
    for result in [
        s.query().map(|_| ()),
        s.wait(1, Timeout::Immediate),
        s.signal(1),
        s.wait(0, Timeout::Infinite),
    ] {
        let error = result.unwrap_err();
        assert_eq!(error.code(), StatusCode::DataLoss);
        assert!(error.to_string().contains("device exploded"), "{error}");
    }
}

/// The first failure's status is kept.
pub fn first_failure_wins(ctx: &CtsDevice) {
    let s = semaphore(ctx, 0);
    s.fail(Error::aborted("first"));
    s.fail(Error::internal("second"));
    assert_eq!(s.query().unwrap_err().code(), StatusCode::Aborted);
}

/// Wait-all needs every timepoint; wait-any one; an empty list returns at once.
pub fn wait_all_and_any(ctx: &CtsDevice) {
    let (a, b) = (semaphore(ctx, 0), semaphore(ctx, 0));
    let list = [(a.clone(), 1), (b.clone(), 1)];
    wait_semaphores(WaitMode::All, &[], Timeout::Immediate).unwrap();
    wait_semaphores(WaitMode::Any, &[], Timeout::Immediate).unwrap();
    assert!(wait_semaphores(WaitMode::Any, &list, Timeout::Immediate).is_err());
    a.signal(1).unwrap();
    wait_semaphores(WaitMode::Any, &list, Timeout::Immediate).unwrap();
    assert!(wait_semaphores(WaitMode::All, &list, Timeout::Immediate).is_err());
    b.signal(2).unwrap();
    wait_semaphores(WaitMode::All, &list, Timeout::Immediate).unwrap();
    let fence = Fence::join([&Fence::at(a, 1), &Fence::at(b, 2)]);
    ctx.device
        .wait_semaphores(WaitMode::All, &fence, Timeout::Immediate)
        .unwrap();
}

/// A waiter blocked on one thread wakes when another thread signals past its value.
pub fn signal_from_another_thread(ctx: &CtsDevice) {
    let s = semaphore(ctx, 0);
    let signaller = {
        let s = s.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            s.signal(7).unwrap();
        })
    };
    s.wait(5, Timeout::from(WAIT)).unwrap();
    assert!(s.query().unwrap() >= 5);
    signaller.join().unwrap();
}

/// Many waiters on different values all wake, each once its value is reached.
pub fn many_waiters_wake(ctx: &CtsDevice) {
    let s = semaphore(ctx, 0);
    let waiters: Vec<_> = (1..=16u64)
        .map(|value| {
            let s = s.clone();
            thread::spawn(move || {
                s.wait(value, Timeout::from(WAIT)).unwrap();
                assert!(s.query().unwrap() >= value);
            })
        })
        .collect();
    for value in 1..=16 {
        thread::sleep(Duration::from_millis(1));
        s.signal(value).unwrap();
    }
    for waiter in waiters {
        waiter.join().unwrap();
    }
}

/// Wait-any across semaphores wakes on whichever another thread signals.
pub fn wait_any_across_threads(ctx: &CtsDevice) {
    for pick in 0..3 {
        let semaphores: Vec<_> = (0..3).map(|_| semaphore(ctx, 0)).collect();
        let list: Vec<_> = semaphores.iter().map(|s| (s.clone(), 1)).collect();
        let chosen = semaphores[pick].clone();
        let signaller = thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            chosen.signal(1).unwrap();
        });
        wait_semaphores(WaitMode::Any, &list, Timeout::from(WAIT)).unwrap();
        signaller.join().unwrap();
        assert_eq!(semaphores[pick].query().unwrap(), 1);
    }
}

/// A failure wakes every waiter with the failure.
pub fn failure_wakes_all_waiters(ctx: &CtsDevice) {
    let s = semaphore(ctx, 0);
    let other = semaphore(ctx, 0);
    let waiters: Vec<_> = (0..8)
        .map(|i| {
            let (s, other) = (s.clone(), other.clone());
            thread::spawn(move || {
                let result = if i % 2 == 0 {
                    s.wait(10, Timeout::from(WAIT))
                } else {
                    wait_semaphores(WaitMode::Any, &[(s, 10), (other, 10)], Timeout::from(WAIT))
                };
                result.unwrap_err().code()
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    s.fail(Error::cancelled("stop"));
    for waiter in waiters {
        assert_eq!(waiter.join().unwrap(), StatusCode::Cancelled);
    }
}

/// Two threads alternate signalling two semaphores.
pub fn ping_pong_between_threads(ctx: &CtsDevice) {
    let (ping, pong) = (semaphore(ctx, 0), semaphore(ctx, 0));
    let partner = {
        let (ping, pong) = (ping.clone(), pong.clone());
        thread::spawn(move || {
            for round in 1..=50 {
                ping.wait(round, Timeout::from(WAIT)).unwrap();
                pong.signal(round).unwrap();
            }
        })
    };
    for round in 1..=50 {
        ping.signal(round).unwrap();
        pong.wait(round, Timeout::from(WAIT)).unwrap();
    }
    partner.join().unwrap();
}

/// Fences keep the largest value per semaphore, join, query, signal and fail.
pub fn fences_join_and_query(ctx: &CtsDevice) {
    let (a, b) = (semaphore(ctx, 0), semaphore(ctx, 0));
    let mut fence = Fence::at(a.clone(), 2);
    fence.insert(a.clone(), 1);
    fence.insert(b.clone(), 3);
    assert_eq!(fence.timepoints().len(), 2);
    assert_eq!(fence.timepoints()[0].1, 2);
    assert!(!fence.query().unwrap());
    fence.signal().unwrap();
    assert!(fence.query().unwrap());
    assert_eq!((a.query().unwrap(), b.query().unwrap()), (2, 3));
    let later = Fence::join([&fence, &Fence::at(a.clone(), 4)]);
    assert_eq!(later.timepoints().len(), 2);
    later.fail(&Error::aborted("gone"));
    assert_eq!(later.wait(Timeout::Immediate).unwrap_err().code(), StatusCode::Aborted);
    assert!(Fence::new().query().unwrap());
}
