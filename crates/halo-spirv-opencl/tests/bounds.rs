//! A translated kernel stays inside the buffers it is given, whatever indices its program
//! computes: an access past a binding's end goes to the binding's last element (Vulkan's robust
//! buffer access allows any place inside), never into the host memory an OpenCL runtime on the CPU
//! keeps next to it. A `.vmfb` whose loop bound was changed corrupted halo's heap on PoCL before.

mod common;

use common::shader::Shader;
use common::OpenCl;

/// Each of 4 invocations copies in[x + 1,000,000] to out[x + 4]: both indices are past the end of
/// their 4-element buffers.
#[test]
fn accesses_past_a_buffer_land_at_its_start() {
    let Some(opencl) = OpenCl::first("accesses_past_a_buffer_land_at_its_start") else {
        return;
    };
    let mut s = Shader::new(2);
    let (far, four) = (s.constant(1_000_000), s.constant(4));
    let x = s.x;
    let read_at = s.b.i_add(s.uint, None, x, far).unwrap();
    let write_at = s.b.i_add(s.uint, None, x, four).unwrap();
    let source = s.element(0, read_at);
    let value = s.b.load(s.uint, None, source, None, []).unwrap();
    let target = s.element(1, write_at);
    s.b.store(target, value, None, []).unwrap();
    let words = s.finish();
    let results = opencl.run_words(&words, &opencl.options(), vec![vec![7, 8, 9, 10], vec![0; 4]], 4);
    assert_eq!(results[0], [7, 8, 9, 10], "the input is untouched");
    // Every read came from in[3] and every write went to out[3].
    assert_eq!(results[1], [0, 0, 0, 10]);
}
