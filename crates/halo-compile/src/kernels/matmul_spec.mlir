// halo compile --kernels: every f32 linalg.matmul that starts from zeros (linalg.fill 0) becomes a
// dispatch calling halo's matmul kernel (halo_matmul_f32_v0, crates/halo-kernels/src/import.rs),
// one workgroup per 512 output columns; its bias and activation stay IREE's. Passed to iree-compile
// as --iree-preprocessing-transform-spec-filename.
module attributes {transform.with_named_sequence} {
  stream.executable private @halo_matmul_executable {
    stream.executable.export public @halo_matmul_tile workgroups(%n: index) -> (index, index, index) {
      %x = affine.apply affine_map<()[s0] -> (s0 ceildiv 512)>()[%n]
      %c1 = arith.constant 1 : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v0(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_matmul_tile(%ab: !stream.binding, %bb: !stream.binding, %cb: !stream.binding,
                                  %m: index, %n: index, %k: index) {
        %c0 = arith.constant 0 : index
        %id = stream.dispatch.workgroup.id[0] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 512)>()[%id]
        %cols = affine.min affine_map<()[s0, s1] -> (512, s1 - s0 * 512)>()[%id, %n]
        %a = stream.binding.subspan %ab[%c0] : !stream.binding -> memref<?x?xf32>{%m, %k}
        %b = stream.binding.subspan %bb[%c0] : !stream.binding -> memref<?x?xf32>{%k, %n}
        %c = stream.binding.subspan %cb[%c0] : !stream.binding -> memref<?x?xf32>{%m, %n}
        %ap, %ao, %as0, %as1, %at0, %at1 = iree_codegen.extract_strided_metadata %a
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %bp, %bo, %bs0, %bs1, %bt0, %bt1 = iree_codegen.extract_strided_metadata %b
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %cp, %co, %cs0, %cs1, %ct0, %ct1 = iree_codegen.extract_strided_metadata %c
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %b_tile = arith.addi %bo, %col : index
        %c_tile = arith.addi %co, %col : index
        %flags = arith.constant 0 : index
        func.call @halo_matmul_f32_v0(%ap, %ao, %bp, %b_tile, %bp, %b_tile, %cp, %c_tile, %m, %cols, %k, %at0, %bt0, %ct0, %flags)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  util.func private @halo_matmul(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %init: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %lhs, %c0 : tensor<?x?xf32>
    %k = tensor.dim %lhs, %c1 : tensor<?x?xf32>
    %n = tensor.dim %rhs, %c1 : tensor<?x?xf32>
    %r = flow.dispatch @halo_matmul_executable::@halo_matmul_tile[%n](%lhs, %rhs, %m, %n, %k)
        : (tensor<?x?xf32>{%m, %k}, tensor<?x?xf32>{%k, %n}, index, index, index) -> tensor<?x?xf32>{%m, %n}
    util.return %r : tensor<?x?xf32>
  }

  transform.named_sequence @match_matmul(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %init: tensor<?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<?x?xf32>) -> tensor<?x?xf32>
        %matmul = linalg.matmul ins(%lhs, %rhs : tensor<?x?xf32>, tensor<?x?xf32>)
            outs(%fill : tensor<?x?xf32>) -> tensor<?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_matmul(%ins: !transform.any_value {transform.readonly},
                                             %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_matmul_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_matmul into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @__transform_main(%module: !transform.any_op) {
    %funcs = transform.structured.match ops{["util.func"]} in %module : (!transform.any_op) -> !transform.any_op
    transform.foreach %funcs : !transform.any_op {
      ^bb1(%func: !transform.any_op):
        transform.foreach_match in %func
          @match_matmul -> @call_halo_matmul
        : (!transform.any_op) -> (!transform.any_op)
    }
    transform.apply_dce to %module : !transform.any_op
    transform.apply_registered_pass "inline" to %module : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
