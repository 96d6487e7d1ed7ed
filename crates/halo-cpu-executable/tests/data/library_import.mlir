// A kernel that calls a host function through the executable import table.
#layout = #hal.pipeline.layout<constants = 1, bindings = [
  #hal.pipeline.binding<storage_buffer>
]>

hal.executable.source public @halo_test_import {
  // out[i] = halo_test_mul_add(i, constant) for 8 i32s, one workgroup.
  hal.executable.export public @call_import ordinal(0) layout(#layout) count(%device: !hal.device) -> (index, index, index) {
    %c1 = arith.constant 1 : index
    hal.return %c1, %c1, %c1 : index, index, index
  }
  builtin.module {
    func.func private @halo_test_mul_add(i32, i32) -> i32
    func.func @call_import() {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %k = hal.interface.constant.load layout(#layout) ordinal(0) : i32
      %out = hal.interface.binding.subspan layout(#layout) binding(0) : memref<8xi32>
      scf.for %i = %c0 to %c8 step %c1 {
        %ii = arith.index_cast %i : index to i32
        %r = func.call @halo_test_mul_add(%ii, %k) : (i32, i32) -> i32
        memref.store %r, %out[%i] : memref<8xi32>
      }
      return
    }
  }
}
