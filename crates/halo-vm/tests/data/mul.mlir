// A whole-program module as users get it: tensors in, tensors out, through the `hal` module,
// with the CPU kernel (an embedded ELF) stored as external rodata.
func.func @mul(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.mulf %a, %b : tensor<4xf32>
  return %c : tensor<4xf32>
}
