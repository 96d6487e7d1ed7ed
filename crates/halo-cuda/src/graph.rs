//! Graph-backed command buffers (CUDA's default; device parameter `command_buffers=graph`): the
//! kernel launches of a reusable command buffer become one CUDA graph, instantiated on its first
//! submission and launched with a single call on later ones. One-shot command buffers, and those
//! that fill or copy, stay on the stream (`suits`).
//!
//! Launches between two barriers do not depend on each other, so the graph lets them run
//! concurrently; each one depends on everything before the previous barrier. The instantiated
//! graph is kept with the command buffer. A later submission whose launches are the same is a
//! plain relaunch; one whose kernels take other arguments (another binding table) or grids sets
//! those nodes in place; anything else builds a new graph.

use crate::api::{CuGraph, CuGraphExec, CuGraphNode, CuStream, KernelNodeParams};
use crate::command_buffer::StreamOp;
use crate::device::DeviceShared;
use halo_hal::{Command, CommandBuffer, CommandBufferMode, Error, Result};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// What a command buffer keeps between submissions: its last instantiated graph.
#[derive(Default)]
struct GraphSlot(Mutex<Option<Instance>>);

/// An instantiated graph and the operations its nodes were last set from.
///
/// Ownership: the command buffer's slot owns it. A launch in flight needs nothing of it: CUDA
/// frees a destroyed instantiation once its launches complete, and the submission holds the
/// command buffer, whose executables hold the kernels. Threading: any thread.
struct Instance {
    exec: Exec,
    /// One node per operation; null for barriers.
    nodes: Vec<CuGraphNode>,
    ops: Vec<StreamOp>,
}

// SAFETY: node handles are identifiers the driver lets any thread use with the context current;
// they are only passed to the driver while the owning graph lives (`exec`).
unsafe impl Send for Instance {}

/// A graph and its instantiation, destroyed together.
struct Exec {
    shared: Arc<DeviceShared>,
    graph: CuGraph,
    exec: CuGraphExec,
    /// The recorded commands, whose executables hold the modules the kernel nodes name: a
    /// command buffer drops its commands before its graph, and a module must outlive the
    /// graphs that launch its kernels.
    _commands: Arc<[Command]>,
}

// SAFETY: graph handles are identifiers usable from any thread with the context current.
unsafe impl Send for Exec {}

impl Drop for Exec {
    fn drop(&mut self) {
        if self.shared.bind().is_err() {
            return;
        }
        let api = &self.shared.api;
        // SAFETY: the handles were created on this context and are destroyed once; CUDA frees an
        // instantiation that is still running once it completes.
        unsafe {
            if !self.exec.is_null() {
                let _ = api.graph_exec_destroy(self.exec);
            }
            let _ = api.graph_destroy(self.graph);
        }
    }
}

/// Whether `command_buffer`, translated to `ops`, runs as a graph: it is reusable (a one-shot
/// command buffer would pay the instantiation for a single launch) and launches kernels and
/// nothing else. Fills and copies stay on the stream: on an H100 a graph copy between
/// host-visible buffers crashed the driver when updated in place and hung it when rebuilt.
pub(crate) fn suits(command_buffer: &CommandBuffer, ops: &[StreamOp]) -> bool {
    let mut launches = ops.iter().filter(|op| **op != StreamOp::Barrier).peekable();
    !command_buffer.mode().contains(CommandBufferMode::ONE_SHOT)
        && launches.peek().is_some()
        && launches.all(|op| matches!(op, StreamOp::Launch { .. }))
}

/// Launches `ops`, the translation of `command_buffer` for this submission, as a graph on
/// `stream`, reusing the command buffer's graph where it can. The caller holds the stream with
/// the context current.
///
/// # Errors
/// A graph entry point's failure; the command buffer's graph is then rebuilt next time.
pub(crate) fn launch(
    shared: &Arc<DeviceShared>,
    stream: CuStream,
    command_buffer: &CommandBuffer,
    ops: Vec<StreamOp>,
) -> Result<()> {
    let slot = command_buffer.driver_cache(|_| Ok(GraphSlot::default()))?;
    let commands = command_buffer.commands()?;
    let mut cached = slot.0.lock().unwrap_or_else(|p| p.into_inner());
    // Taken out, so that a failure leaves nothing to reuse.
    let instance = match cached.take() {
        Some(previous) if previous.ops == ops => previous,
        Some(mut previous) if only_kernel_arguments_differ(&previous.ops, &ops) => {
            previous.update(ops)?;
            previous
        }
        _ => Instance::build(shared, commands, ops)?,
    };
    // SAFETY: the instantiation belongs to this context; destroying it later does not disturb
    // this launch.
    unsafe { shared.api.graph_launch(instance.exec.exec, stream) }?;
    *cached = Some(instance);
    Ok(())
}

/// Whether `new` is `old` with other arguments (or grids) for some kernels.
fn only_kernel_arguments_differ(old: &[StreamOp], new: &[StreamOp]) -> bool {
    old.len() == new.len()
        && old.iter().zip(new).all(|pair| match pair {
            (
                StreamOp::Launch {
                    function: f,
                    block: a,
                    shared_memory: m,
                    params: p,
                    ..
                },
                StreamOp::Launch {
                    function: g,
                    block: b,
                    shared_memory: n,
                    params: q,
                    ..
                },
            ) => f == g && a == b && m == n && p.len() == q.len(),
            (old, new) => old == new,
        })
}

impl Instance {
    fn build(shared: &Arc<DeviceShared>, commands: &Arc<[Command]>, ops: Vec<StreamOp>) -> Result<Self> {
        let api = &shared.api;
        let mut graph: CuGraph = std::ptr::null_mut();
        // SAFETY: `graph` is an out-pointer; flags must be 0.
        unsafe { api.graph_create(&mut graph, 0) }?;
        // From here on, dropping `exec` destroys what was made so far.
        let mut exec = Exec {
            shared: shared.clone(),
            graph,
            exec: std::ptr::null_mut(),
            _commands: commands.clone(),
        };
        // One node per operation (null for barriers), and the handle of every planned node.
        let mut nodes = vec![std::ptr::null_mut(); ops.len()];
        let mut handles: Vec<CuGraphNode> = Vec::new();
        for planned in plan(&ops) {
            let handle = match planned {
                PlannedNode::Launch { op, after } => {
                    let after: Vec<CuGraphNode> = after.iter().map(|&i| handles[i]).collect();
                    nodes[op] = add_node(shared, graph, &after, &ops[op])?;
                    nodes[op]
                }
                PlannedNode::Join { of } => {
                    let of: Vec<CuGraphNode> = of.iter().map(|&i| handles[i]).collect();
                    join(shared, graph, &of)?
                }
            };
            handles.push(handle);
        }
        // SAFETY: the graph was built above on this context; `exec.exec` is an out-pointer.
        unsafe { api.graph_instantiate(&mut exec.exec, graph, 0) }?;
        Ok(Instance { exec, nodes, ops })
    }

    /// Sets anew the kernel nodes whose arguments differ in `ops`, which the instance then
    /// holds. Launches already on the stream keep what they were launched with.
    fn update(&mut self, ops: Vec<StreamOp>) -> Result<()> {
        for ((old, new), &node) in self.ops.iter().zip(&ops).zip(&self.nodes) {
            if old == new {
                continue;
            }
            let mut pointers = Vec::new();
            let Some(params) = kernel_params(new, &mut pointers) else {
                continue;
            };
            // SAFETY: `node` is a kernel node of this instantiation, built for the same kernel;
            // the arguments are copied during the call.
            unsafe {
                self.exec
                    .shared
                    .api
                    .graph_exec_kernel_node_set_params(self.exec.exec, node, &params)
            }?;
        }
        self.ops = ops;
        Ok(())
    }
}

/// One node of a graph, in the order the nodes are added; nodes are named by their position.
#[derive(Debug, PartialEq)]
enum PlannedNode {
    /// The launch of operation `op`, after the nodes `after`.
    Launch { op: usize, after: Vec<usize> },
    /// An empty node after the nodes `of`: what follows a barrier behind several launches
    /// waits for it alone.
    Join { of: Vec<usize> },
}

/// The nodes for `ops`: launches between two barriers are independent, and each waits for
/// every launch before the previous barrier.
fn plan(ops: &[StreamOp]) -> Vec<PlannedNode> {
    let mut planned = Vec::new();
    let mut after: Vec<usize> = Vec::new();
    let mut segment: Vec<usize> = Vec::new();
    let mut barrier = false;
    for (op, operation) in ops.iter().enumerate() {
        if *operation == StreamOp::Barrier {
            barrier = true;
            continue;
        }
        if std::mem::take(&mut barrier) && !segment.is_empty() {
            after = if segment.len() == 1 {
                std::mem::take(&mut segment)
            } else {
                planned.push(PlannedNode::Join {
                    of: std::mem::take(&mut segment),
                });
                vec![planned.len() - 1]
            };
        }
        planned.push(PlannedNode::Launch {
            op,
            after: after.clone(),
        });
        segment.push(planned.len() - 1);
    }
    planned
}

/// An empty node after the nodes `of`.
fn join(shared: &DeviceShared, graph: CuGraph, of: &[CuGraphNode]) -> Result<CuGraphNode> {
    let mut node: CuGraphNode = std::ptr::null_mut();
    // SAFETY: the dependencies are nodes of `graph`, counted by the length passed.
    unsafe { shared.api.graph_add_empty_node(&mut node, graph, of.as_ptr(), of.len()) }?;
    Ok(node)
}

/// A kernel node's parameters for `op`, or `None` when it is no launch; `pointers` receives one
/// pointer per argument slot of `op`, which the driver copies the arguments through.
fn kernel_params(op: &StreamOp, pointers: &mut Vec<*mut c_void>) -> Option<KernelNodeParams> {
    let StreamOp::Launch {
        function,
        grid,
        block,
        shared_memory,
        params,
    } = op
    else {
        return None;
    };
    *pointers = params
        .iter()
        .map(|slot| (slot as *const u64).cast_mut().cast())
        .collect();
    Some(KernelNodeParams {
        function: *function,
        grid: *grid,
        block: *block,
        shared_memory: *shared_memory,
        params: pointers.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kernel: std::ptr::null_mut(),
        context: std::ptr::null_mut(),
    })
}

/// A kernel node for `op`, after the nodes `after`.
///
/// # Errors
/// `Internal` for anything but a kernel launch (the device keeps fills and copies on the
/// stream); the driver's failure to add the node.
fn add_node(shared: &DeviceShared, graph: CuGraph, after: &[CuGraphNode], op: &StreamOp) -> Result<CuGraphNode> {
    let mut pointers = Vec::new();
    let params =
        kernel_params(op, &mut pointers).ok_or_else(|| Error::internal("a GPU graph holds kernel launches only"))?;
    let mut node: CuGraphNode = std::ptr::null_mut();
    // SAFETY: the kernel belongs to this context, its arguments were resolved from live
    // allocations of this device, and the driver copies them into the node during the call;
    // the dependencies are nodes of `graph`, counted by the length passed.
    unsafe {
        shared
            .api
            .graph_add_kernel_node(&mut node, graph, after.as_ptr(), after.len(), &params)
    }?;
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(function: usize, params: Vec<u64>) -> StreamOp {
        StreamOp::Launch {
            function: function as crate::api::CuFunction,
            grid: [4, 1, 1],
            block: [64, 1, 1],
            shared_memory: 0,
            params,
        }
    }

    #[test]
    fn only_reusable_command_buffers_of_launches_become_graphs() {
        use halo_hal::{CommandCategory, QueueAffinity};
        let reusable = CommandBuffer::new(CommandBufferMode::empty(), CommandCategory::ANY, QueueAffinity::ANY, 0);
        let one_shot = CommandBuffer::new(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, QueueAffinity::ANY, 0);
        let launches = [launch(16, vec![]), StreamOp::Barrier, launch(32, vec![])];
        assert!(suits(&reusable, &launches));
        assert!(!suits(&one_shot, &launches));
        assert!(!suits(&reusable, &[StreamOp::Barrier]), "nothing to launch");
        let fill = StreamOp::Fill {
            target: 0,
            pattern: 0,
            width: 4,
            count: 1,
        };
        assert!(!suits(&reusable, &[launch(16, vec![]), fill]));
    }

    #[test]
    fn launches_between_barriers_are_independent_and_barriers_join_them() {
        use PlannedNode::{Join, Launch};
        let l = |n| launch(n, vec![]);
        let b = || StreamOp::Barrier;
        let ops = [l(1), l(2), b(), l(3), b(), b(), l(4), l(5), b()];
        assert_eq!(
            plan(&ops),
            [
                Launch { op: 0, after: vec![] },
                Launch { op: 1, after: vec![] },
                Join { of: vec![0, 1] },
                Launch { op: 3, after: vec![2] },
                Launch { op: 6, after: vec![3] },
                Launch { op: 7, after: vec![3] },
            ]
        );
        assert_eq!(plan(&[b(), l(1)]), [Launch { op: 1, after: vec![] }]);
        assert_eq!(plan(&[b(), b()]), []);
    }

    #[test]
    fn new_kernel_arguments_and_grids_update_nodes_in_place() {
        let old = [launch(16, vec![0x1000, 3]), StreamOp::Barrier, launch(48, vec![0x2000])];
        let rebound = [launch(16, vec![0x9000, 5]), StreamOp::Barrier, launch(48, vec![0x2000])];
        assert!(only_kernel_arguments_differ(&old, &rebound));
        let mut regridded = launch(16, vec![0x1000, 3]);
        if let StreamOp::Launch { grid, .. } = &mut regridded {
            *grid = [9, 9, 1];
        }
        assert!(only_kernel_arguments_differ(&old[..1], &[regridded]));
    }

    #[test]
    fn other_kernels_or_order_build_a_new_graph() {
        let old = [launch(16, vec![0x1000]), StreamOp::Barrier, launch(48, vec![0x2000])];
        let cases: [&[StreamOp]; 4] = [
            &[launch(32, vec![0x1000]), StreamOp::Barrier, launch(48, vec![0x2000])],
            &[launch(16, vec![0x1000, 1]), StreamOp::Barrier, launch(48, vec![0x2000])],
            &[launch(16, vec![0x1000]), launch(48, vec![0x2000]), StreamOp::Barrier],
            &[launch(16, vec![0x1000]), StreamOp::Barrier],
        ];
        for new in cases {
            assert!(!only_kernel_arguments_differ(&old, new));
        }
        let mut reshaped = launch(16, vec![0x1000]);
        if let StreamOp::Launch { block, .. } = &mut reshaped {
            *block = [32, 2, 1];
        }
        assert!(!only_kernel_arguments_differ(&old[..1], &[reshaped]));
    }
}
