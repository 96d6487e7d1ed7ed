// Calls into another module: a required import with a minimum version, an optional import, an
// import from a module that is itself optional, an export renamed with `as(...)`, and an internal
// function that is not exported.
vm.module @imports_module <{version = 3 : i32}> {
  vm.import private @other.double(%x : i32) -> i32 attributes {minimum_version = 2 : i32}
  vm.import private optional @other.maybe(%x : i32) -> i32
  vm.import private optional @extra.probe() -> i32
  vm.func @call_double(%a: i32) -> i32 {
    %r = vm.call @other.double(%a) : (i32) -> i32
    vm.return %r : i32
  }
  vm.export @call_double as("double_it")
  vm.func private @helper(%a: i32) -> i32 {
    %r = vm.call @other.maybe(%a) : (i32) -> i32
    %p = vm.call @extra.probe() : () -> i32
    %s = vm.add.i32 %r, %p : i32
    vm.return %s : i32
  }
  vm.func @use_helper(%a: i32) -> i32 {
    %r = vm.call @helper(%a) : (i32) -> i32
    vm.return %r : i32
  }
  vm.export @use_helper
}
