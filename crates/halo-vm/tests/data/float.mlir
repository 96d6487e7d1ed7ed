// f32 and f64 arithmetic: the module requires EXT_F32 | EXT_F64, each function one of them.
vm.module @float_module {
  vm.func @add_f32(%a: f32, %b: f32) -> f32 {
    %c = vm.add.f32 %a, %b : f32
    vm.return %c : f32
  }
  vm.export @add_f32
  vm.func @mul_f64(%a: f64, %b: f64) -> f64 {
    %c = vm.mul.f64 %a, %b : f64
    vm.return %c : f64
  }
  vm.export @mul_f64
}
