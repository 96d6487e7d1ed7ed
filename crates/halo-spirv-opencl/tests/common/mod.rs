//! A small OpenCL harness for the translator's tests: build a translation on the first OpenCL
//! device and run one of its kernels over byte buffers. Without an OpenCL device the tests that
//! need one say by name that they skipped.

#![allow(dead_code, reason = "each test binary uses part of the harness")]

pub mod shader;

use halo_spirv_opencl::{Options, Translation};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::CL_BLOCKING;
use std::path::{Path, PathBuf};
use std::ptr;

/// The subgroup size the fixtures were compiled for: IREE's llvmpipe Vulkan target's, and the
/// opencl driver's default.
pub const FIXTURE_SUBGROUP_SIZE: u32 = 8;

/// The first OpenCL device, with a context and an in-order queue.
pub struct OpenCl {
    pub device: Device,
    pub context: Context,
    pub queue: CommandQueue,
}

impl OpenCl {
    /// The first device of the first platform that has one, or `None` (printing that `test`
    /// skipped) where OpenCL or a device is missing.
    pub fn first(test: &str) -> Option<OpenCl> {
        // PoCL 3.1 crashes when two threads make its first discovery calls at once.
        static DISCOVERY: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _discovering = DISCOVERY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let device = opencl3::platform::get_platforms()
            .ok()
            .into_iter()
            .flatten()
            .find_map(|platform| platform.get_devices(CL_DEVICE_TYPE_ALL).ok()?.first().copied());
        let Some(device) = device else {
            println!("{test}: skipped: no OpenCL device (install pocl-opencl-icd)");
            return None;
        };
        let device = Device::new(device);
        let context = Context::from_device(&device).expect("OpenCL context");
        #[allow(
            deprecated,
            reason = "clCreateCommandQueue is the OpenCL 1.2 entry point PoCL and others share"
        )]
        let queue = CommandQueue::create_default(&context, 0).expect("OpenCL queue");
        Some(OpenCl { device, context, queue })
    }

    /// Translation options matching the device's extensions, for the fixtures.
    pub fn options(&self) -> Options {
        self.options_for_subgroups(FIXTURE_SUBGROUP_SIZE)
    }

    /// Translation options matching the device's extensions, for subgroups of `size`: built-ins
    /// where the device can make its subgroups that wide, as the driver decides, else emulated.
    pub fn options_for_subgroups(&self, size: u32) -> Options {
        let extensions = self.device.extensions().unwrap_or_default();
        let has = |extension: &str| extensions.split_whitespace().any(|e| e == extension);
        Options {
            fp16: has("cl_khr_fp16"),
            fp64: has("cl_khr_fp64"),
            specialization: Vec::new(),
            subgroup_size: size,
            subgroups: native_subgroups(&self.device, size as usize),
        }
    }

    /// Builds `translation`'s source, returning the build log on failure.
    pub fn build(&self, translation: &Translation) -> Result<Program, String> {
        Program::create_and_build_from_source(&self.context, &translation.source, translation.build_options)
    }

    /// Translates `words` with `options` and runs its first kernel over `workgroups` along x,
    /// one buffer of `u32`s per binding, returning the buffers as they are afterwards.
    pub fn run_words(
        &self,
        words: &[u32],
        options: &Options,
        buffers: Vec<Vec<u32>>,
        workgroups: usize,
    ) -> Vec<Vec<u32>> {
        let translation = halo_spirv_opencl::translate(words, options).unwrap();
        let mut bytes: Vec<Vec<u8>> = buffers
            .iter()
            .map(|b| b.iter().flat_map(|x| x.to_le_bytes()).collect())
            .collect();
        self.run(&translation, 0, &mut bytes, &[], [workgroups, 1, 1]);
        bytes
            .iter()
            .map(|b| {
                b.chunks_exact(4)
                    .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                    .collect()
            })
            .collect()
    }

    /// Runs kernel `ordinal` of `translation` over `workgroups`, one buffer per binding (read
    /// back afterwards) and the push constants.
    pub fn run(
        &self,
        translation: &Translation,
        ordinal: usize,
        buffers: &mut [Vec<u8>],
        push_constants: &[u8],
        workgroups: [usize; 3],
    ) {
        let program = self
            .build(translation)
            .unwrap_or_else(|log| panic!("build failed:\n{log}\n{}", translation.source));
        let kernel_info = &translation.kernels[ordinal];
        let kernel = Kernel::create(&program, &kernel_info.name).expect("kernel");
        assert_eq!(buffers.len(), kernel_info.bindings.len(), "one buffer per binding");
        assert_eq!(push_constants.len(), kernel_info.push_constant_bytes as usize);
        let mut device_buffers = Vec::new();
        for bytes in buffers.iter() {
            // SAFETY: a plain read-write buffer of the given size with no host pointer.
            let mut buffer =
                unsafe { Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes.len().max(1), ptr::null_mut()) }
                    .expect("buffer");
            // SAFETY: `bytes` lives across the blocking write.
            unsafe { self.queue.enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, bytes, &[]) }.expect("write");
            device_buffers.push(buffer);
        }
        for (index, (buffer, bytes)) in device_buffers.iter().zip(buffers.iter()).enumerate() {
            let index = 3 * index as u32;
            // SAFETY: argument `index` is a `__global uchar*` given a cl_mem, then its `ulong`
            // offset and `ulong` length.
            unsafe { kernel.set_arg(index, &buffer.get()) }.expect("buffer argument");
            // SAFETY: as above.
            unsafe { kernel.set_arg(index + 1, &0u64) }.expect("offset argument");
            // SAFETY: as above.
            unsafe { kernel.set_arg(index + 2, &(bytes.len() as u64)) }.expect("length argument");
        }
        if !push_constants.is_empty() {
            // SAFETY: the last argument is the push constant struct of exactly this many bytes.
            unsafe {
                opencl3::kernel::set_kernel_arg(
                    kernel.get(),
                    3 * device_buffers.len() as u32,
                    push_constants.len(),
                    push_constants.as_ptr().cast(),
                )
            }
            .expect("push constant argument");
        }
        let local = kernel_info.workgroup_size.map(|s| s as usize);
        let global = [0, 1, 2].map(|d| workgroups[d] * local[d]);
        // SAFETY: every argument is set; the sizes are the kernel's required workgroup size.
        unsafe {
            self.queue
                .enqueue_nd_range_kernel(kernel.get(), 3, ptr::null(), global.as_ptr(), local.as_ptr(), &[])
        }
        .expect("enqueue");
        for (bytes, buffer) in buffers.iter_mut().zip(&device_buffers) {
            // SAFETY: `bytes` lives across the blocking read and has the buffer's size.
            unsafe { self.queue.enqueue_read_buffer(buffer, CL_BLOCKING, 0, bytes, &[]) }.expect("read");
        }
    }
}

/// Subgroup built-ins where the device can make its subgroups `size` wide, as the driver decides.
fn native_subgroups(device: &Device, size: usize) -> halo_spirv_opencl::Subgroups {
    let extensions = device.extensions().unwrap_or_default();
    let sizes = device.get_data(CL_DEVICE_SUB_GROUP_SIZES_INTEL).unwrap_or_default();
    let supported = sizes
        .chunks_exact(std::mem::size_of::<usize>())
        .any(|s| usize::from_ne_bytes(s.try_into().unwrap()) == size);
    if supported
        && halo_spirv_opencl::NATIVE_SUBGROUP_EXTENSIONS
            .iter()
            .all(|e| extensions.split_whitespace().any(|x| x == *e))
    {
        halo_spirv_opencl::Subgroups::Native
    } else {
        halo_spirv_opencl::Subgroups::Emulated
    }
}

/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL`: the subgroup sizes a kernel may require.
const CL_DEVICE_SUB_GROUP_SIZES_INTEL: u32 = 0x4108;

/// The repository's `fixtures` folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every SPIR-V module inside `bytes` (a `vulkan-spirv-fb` FlatBuffer or a `.vmfb` holding
/// some): each is a FlatBuffer vector of words, its word count just before the magic number.
pub fn spirv_modules(bytes: &[u8]) -> Vec<Vec<u32>> {
    let magic = 0x0723_0203u32.to_le_bytes();
    let mut modules = Vec::new();
    for at in 4..bytes.len().saturating_sub(20) {
        if bytes[at..at + 4] != magic {
            continue;
        }
        let count = u32::from_le_bytes(bytes[at - 4..at].try_into().unwrap()) as usize;
        let Some(words) = bytes.get(at..at + count * 4) else {
            continue;
        };
        if count > 5 {
            modules.push(
                words
                    .chunks_exact(4)
                    .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                    .collect(),
            );
        }
    }
    modules
}

/// The SPIR-V modules of every Vulkan fixture: (file name, module).
pub fn fixture_modules() -> Vec<(String, Vec<u32>)> {
    let mut files: Vec<PathBuf> = Vec::new();
    for folder in ["models/vulkan", "executables"] {
        let entries = std::fs::read_dir(fixtures().join(folder)).expect("fixtures folder");
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".vmfb") || name.ends_with(".vulkan-spirv-fb.fb")
        }));
    }
    files.sort();
    files
        .iter()
        .flat_map(|file| {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            spirv_modules(&std::fs::read(file).unwrap())
                .into_iter()
                .map(move |m| (name.clone(), m))
        })
        .collect()
}
