//! The cases, one module per part of the object model.

pub mod allocator;
pub mod buffer;
pub mod command_buffer;
pub mod dispatch;
pub mod driver;
pub mod executable;
pub mod queue;
pub mod semaphore;

/// Calls `$callback!(manifest, factory, kind, module::case, [tags])` for every case.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_case {
    ($callback:path, $manifest:expr, $factory:expr) => {
        $callback!(
            $manifest,
            $factory,
            plain,
            driver::enumerates_the_tested_device,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            driver::rejects_unknown_device_path,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            allocator::allocates_zeroed_buffers,
            []
        );
        $callback!($manifest, $factory, plain, allocator::allocates_empty_buffers, []);
        $callback!($manifest, $factory, plain, allocator::imports_host_memory, []);
        $callback!($manifest, $factory, plain, allocator::tracks_statistics, []);
        $callback!($manifest, $factory, plain, buffer::maps_read_and_write, []);
        $callback!($manifest, $factory, plain, buffer::map_fill_patterns, []);
        $callback!($manifest, $factory, plain, buffer::scoped_mapping_flushes, []);
        $callback!($manifest, $factory, plain, buffer::subspans_share_memory, []);
        $callback!(
            $manifest,
            $factory,
            plain,
            buffer::rejects_out_of_range_access,
            []
        );
        $callback!($manifest, $factory, plain, buffer::enforces_usage_and_access, []);
        $callback!(
            $manifest,
            $factory,
            recorded,
            command_buffer::fill_patterns_and_offsets,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            command_buffer::update_writes_captured_bytes,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            command_buffer::copy_between_buffers,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            command_buffer::commands_run_in_order,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            command_buffer::reusable_resubmits,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            command_buffer::binding_tables_rebind_slots,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            command_buffer::rejects_missing_or_short_slots,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            command_buffer::one_shot_rejects_resubmit,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            command_buffer::rejects_bad_recording,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            command_buffer::empty_command_buffer_completes,
            []
        );
        $callback!($manifest, $factory, plain, executable::rejects_unknown_format, []);
        $callback!($manifest, $factory, plain, executable::rejects_malformed_data, []);
        $callback!($manifest, $factory, plain, executable::lists_exports, []);
        $callback!(
            $manifest,
            $factory,
            recorded,
            dispatch::dispatch_writes_output,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            dispatch::dispatch_with_constants,
            []
        );
        $callback!($manifest, $factory, recorded, dispatch::dispatch_3d_grid, []);
        $callback!(
            $manifest,
            $factory,
            recorded,
            dispatch::dispatch_with_empty_grid,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            dispatch::chained_dispatches_with_barrier,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            dispatch::indirect_workgroup_count,
            []
        );
        $callback!(
            $manifest,
            $factory,
            recorded,
            dispatch::indirect_workgroup_count_beyond_limits,
            []
        );
        $callback!($manifest, $factory, plain, dispatch::rejects_bad_dispatches, []);
        $callback!($manifest, $factory, plain, semaphore::query_and_signal, []);
        $callback!($manifest, $factory, plain, semaphore::signal_must_increase, []);
        $callback!($manifest, $factory, plain, semaphore::wait_times_out, []);
        $callback!($manifest, $factory, plain, semaphore::failure_is_sticky, []);
        $callback!($manifest, $factory, plain, semaphore::first_failure_wins, []);
        $callback!($manifest, $factory, plain, semaphore::wait_all_and_any, []);
        $callback!(
            $manifest,
            $factory,
            plain,
            semaphore::signal_from_another_thread,
            []
        );
        $callback!($manifest, $factory, plain, semaphore::many_waiters_wake, []);
        $callback!($manifest, $factory, plain, semaphore::wait_any_across_threads, []);
        $callback!(
            $manifest,
            $factory,
            plain,
            semaphore::failure_wakes_all_waiters,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            semaphore::ping_pong_between_threads,
            []
        );
        $callback!($manifest, $factory, plain, semaphore::fences_join_and_query, []);
        $callback!($manifest, $factory, plain, queue::transfers_through_queue, []);
        $callback!($manifest, $factory, plain, queue::large_update_is_split, []);
        $callback!($manifest, $factory, plain, queue::fences_order_submissions, []);
        $callback!($manifest, $factory, plain, queue::alloca_and_dealloca, []);
        $callback!($manifest, $factory, plain, queue::barrier_signals_after_waits, []);
        $callback!($manifest, $factory, plain, queue::failed_wait_fails_signal, []);
        $callback!(
            $manifest,
            $factory,
            plain,
            queue::invalid_transfers_fail_at_submit,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            queue::wait_before_signal_from_other_thread,
            []
        );
        $callback!(
            $manifest,
            $factory,
            plain,
            queue::wait_before_signal_same_thread,
            [AsyncQueue]
        );
        $callback!($manifest, $factory, plain, queue::device_queries, []);
        $callback!($manifest, $factory, plain, queue::wait_idle_after_work, []);
    };
}
