// The smallest useful module: one exported i32 function.
vm.module @m {
  vm.func @add(%a: i32, %b: i32) -> i32 {
    %c = vm.add.i32 %a, %b : i32
    vm.return %c : i32
  }
  vm.export @add
}
