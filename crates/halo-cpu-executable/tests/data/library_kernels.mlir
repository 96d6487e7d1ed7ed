// Kernels for halo-local's library tests; see README.md for how the .so files are made.
#layout_2x2 = #hal.pipeline.layout<constants = 2, bindings = [
  #hal.pipeline.binding<storage_buffer, ReadOnly>,
  #hal.pipeline.binding<storage_buffer>
]>
#layout_0x2 = #hal.pipeline.layout<bindings = [
  #hal.pipeline.binding<storage_buffer, ReadOnly>,
  #hal.pipeline.binding<storage_buffer>
]>

hal.executable.source public @halo_test_kernels {
  // out[i] = in[i] * scale + offset for 64 i32s; workgroup x handles i in [4x, 4x + 4).
  hal.executable.export public @scale_and_offset ordinal(0) layout(#layout_2x2) count(%device: !hal.device) -> (index, index, index) {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    hal.return %c16, %c1, %c1 : index, index, index
  }
  // out[z][y][x] = in[z][y][x] * 2 + (100z + 10y + x) over a 2x3x4 grid, one element per workgroup.
  hal.executable.export public @add_workgroup_id ordinal(1) layout(#layout_0x2) count(%device: !hal.device) -> (index, index, index) {
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    hal.return %c4, %c3, %c2 : index, index, index
  }
  builtin.module {
    func.func @scale_and_offset() {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %scale = hal.interface.constant.load layout(#layout_2x2) ordinal(0) : i32
      %offset = hal.interface.constant.load layout(#layout_2x2) ordinal(1) : i32
      %in = hal.interface.binding.subspan layout(#layout_2x2) binding(0) : memref<64xi32>
      %out = hal.interface.binding.subspan layout(#layout_2x2) binding(1) : memref<64xi32>
      %wg = hal.interface.workgroup.id[0] : index
      %base = arith.muli %wg, %c4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %idx = arith.addi %base, %i : index
        %v = memref.load %in[%idx] : memref<64xi32>
        %s = arith.muli %v, %scale : i32
        %r = arith.addi %s, %offset : i32
        memref.store %r, %out[%idx] : memref<64xi32>
      }
      return
    }
    func.func @add_workgroup_id() {
      %c10 = arith.constant 10 : index
      %c100 = arith.constant 100 : index
      %two = arith.constant 2.0 : f32
      %in = hal.interface.binding.subspan layout(#layout_0x2) binding(0) : memref<2x3x4xf32>
      %out = hal.interface.binding.subspan layout(#layout_0x2) binding(1) : memref<2x3x4xf32>
      %x = hal.interface.workgroup.id[0] : index
      %y = hal.interface.workgroup.id[1] : index
      %z = hal.interface.workgroup.id[2] : index
      %v = memref.load %in[%z, %y, %x] : memref<2x3x4xf32>
      %zz = arith.muli %z, %c100 : index
      %yy = arith.muli %y, %c10 : index
      %s0 = arith.addi %zz, %yy : index
      %s1 = arith.addi %s0, %x : index
      %si = arith.index_cast %s1 : index to i32
      %sf = arith.sitofp %si : i32 to f32
      %d = arith.mulf %v, %two : f32
      %r = arith.addf %d, %sf : f32
      memref.store %r, %out[%z, %y, %x] : memref<2x3x4xf32>
      return
    }
  }
}
