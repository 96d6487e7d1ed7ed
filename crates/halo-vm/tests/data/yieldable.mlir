// A yieldable call (`vm.call.yieldable`, as the `hal` module's `fence.await` is called) whose
// resume block is not the next block in the function: execution must continue at the resume
// block, with the call's results as its arguments.
vm.module @yieldable_module {
  vm.import private @other.double(%x : i32) -> i32 attributes {vm.yield}
  vm.func @double_plus_one(%a: i32) -> i32 {
    %c0 = vm.const.i32 0
    %negative = vm.cmp.lt.i32.s %a, %c0 : i32
    vm.cond_br %negative, ^refuse, ^call
  ^call:
    vm.call.yieldable @other.double(%a) : (i32) -> ^resume(i32)
  ^refuse:
    %minus_one = vm.const.i32 -1
    vm.return %minus_one : i32
  ^resume(%doubled: i32):
    %c1 = vm.const.i32 1
    %sum = vm.add.i32 %doubled, %c1 : i32
    vm.return %sum : i32
  }
  vm.export @double_plus_one
}
