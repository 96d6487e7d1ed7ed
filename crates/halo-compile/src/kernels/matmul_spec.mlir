// halo compile --kernels, passed to iree-compile as --iree-preprocessing-transform-spec-filename:
// - every f32 linalg.matmul that starts from zeros (linalg.fill 0) becomes a dispatch calling
//   halo's matmul kernel (halo_matmul_f32_v0, crates/halo-kernels/src/import.rs), one workgroup per
//   512 output columns; its bias and activation stay IREE's;
// - every f32 1x1 convolution of stride 1 on a batch of one (linalg.conv_2d_nchw_fchw), with its
//   bias in either form it arrives in (the importer's: the convolution starts from the broadcast
//   bias; halo's graph rewrite's: it starts from zeros and a [1, F, 1, 1] bias is added after it)
//   and with or without a ReLU after that, becomes a dispatch calling halo_matmul_f32_v1 with the
//   bias per row and the ReLU fused: filter [F, C] times input [C, H*W], one workgroup per 48
//   output channels by 256 pixels. The matchers are tried in order, the longer DAGs first.
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

  stream.executable private @halo_conv1x1_executable {
    stream.executable.export public @halo_conv1x1_tile workgroups(%f: index, %hw: index) -> (index, index, index) {
      %x = affine.apply affine_map<()[s0] -> (s0 ceildiv 256)>()[%hw]
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%f]
      %c1 = arith.constant 1 : index
      stream.return %x, %y, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v1(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_conv1x1_tile(%xb: !stream.binding, %wb: !stream.binding, %biasb: !stream.binding,
                                   %ob: !stream.binding, %f: index, %c: index, %hw: index, %flags: index) {
        %c0 = arith.constant 0 : index
        %tx = stream.dispatch.workgroup.id[0] : index
        %ty = stream.dispatch.workgroup.id[1] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 256)>()[%tx]
        %cols = affine.min affine_map<()[s0, s1] -> (256, s1 - s0 * 256)>()[%tx, %hw]
        %row = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%ty]
        %rows = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%ty, %f]
        %x = stream.binding.subspan %xb[%c0] : !stream.binding -> memref<?x?xf32>{%c, %hw}
        %w = stream.binding.subspan %wb[%c0] : !stream.binding -> memref<?x?xf32>{%f, %c}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%f}
        %o = stream.binding.subspan %ob[%c0] : !stream.binding -> memref<?x?xf32>{%f, %hw}
        %xp, %xo, %xs0, %xs1, %xt0, %xt1 = iree_codegen.extract_strided_metadata %x
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %wp, %wo, %ws0, %ws1, %wt0, %wt1 = iree_codegen.extract_strided_metadata %w
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %bp, %bo, %bs0, %bt0 = iree_codegen.extract_strided_metadata %bias
            : memref<?xf32> -> memref<f32>, index, index, index
        %op, %oo, %os0, %os1, %ot0, %ot1 = iree_codegen.extract_strided_metadata %o
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %w_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%wo, %row, %wt0]
        %x_tile = arith.addi %xo, %col : index
        %bias_tile = arith.addi %bo, %row : index
        %o_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%oo, %row, %ot0, %col]
        func.call @halo_matmul_f32_v1(%wp, %w_tile, %xp, %x_tile, %bp, %bias_tile, %op, %o_tile,
                                      %rows, %cols, %c, %wt0, %xt0, %ot0, %flags)
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

  // Flags of halo_matmul_f32_v1: 4 adds the bias per row, 2 applies ReLU.
  util.func private @halo_conv1x1(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
                                  %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 4 : index
    %r = util.call @halo_conv1x1_flags(%x, %w, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv1x1_relu(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
                                       %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 6 : index
    %r = util.call @halo_conv1x1_flags(%x, %w, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv1x1_add(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
                                      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 4 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv1x1_flags(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv1x1_add_relu(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
                                           %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 6 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv1x1_flags(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv1x1_flags(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
                                        %flags: index) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %f = tensor.dim %w, %c0 : tensor<?x?x1x1xf32>
    %c = tensor.dim %w, %c1 : tensor<?x?x1x1xf32>
    %h = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wd = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %hw = arith.muli %h, %wd : index
    %x2 = tensor.collapse_shape %x [[0, 1], [2, 3]] : tensor<1x?x?x?xf32> into tensor<?x?xf32>
    %w2 = tensor.collapse_shape %w [[0], [1, 2, 3]] : tensor<?x?x1x1xf32> into tensor<?x?xf32>
    %r = flow.dispatch @halo_conv1x1_executable::@halo_conv1x1_tile[%f, %hw](%x2, %w2, %bias, %f, %c, %hw, %flags)
        : (tensor<?x?xf32>{%c, %hw}, tensor<?x?xf32>{%f, %c}, tensor<?xf32>{%f}, index, index, index, index)
          -> tensor<?x?xf32>{%f, %hw}
    %r4 = tensor.expand_shape %r [[0, 1], [2, 3]] output_shape [1, %f, %h, %wd]
        : tensor<?x?xf32> into tensor<1x?x?x?xf32>
    util.return %r4 : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @match_conv1x1_relu(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %relu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv : tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %positive = arith.cmpf ugt, %in, %zero : f32
            %kept = arith.select %positive, %in, %zero : f32
            linalg.yield %kept : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv1x1(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_conv1x1_relu(%ins: !transform.any_value {transform.readonly},
      %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv1x1_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv1x1_flags into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv1x1_relu into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv1x1(%ins: !transform.any_value {transform.readonly},
      %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv1x1_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv1x1_flags into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv1x1 into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_conv1x1_add_relu(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %biased = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
        %relu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%biased : tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %positive = arith.cmpf ugt, %in, %zero : f32
            %kept = arith.select %positive, %in, %zero : f32
            linalg.yield %kept : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv1x1_add(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %biased = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_conv1x1_add_relu(%ins: !transform.any_value {transform.readonly},
      %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv1x1_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv1x1_flags into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv1x1_add_relu into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv1x1_add(%ins: !transform.any_value {transform.readonly},
      %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv1x1_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv1x1_flags into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv1x1_add into %module if undefined : (!transform.any_op) -> !transform.any_op
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
          @match_matmul -> @call_halo_matmul,
          @match_conv1x1_add_relu -> @call_halo_conv1x1_add_relu,
          @match_conv1x1_add -> @call_halo_conv1x1_add,
          @match_conv1x1_relu -> @call_halo_conv1x1_relu,
          @match_conv1x1 -> @call_halo_conv1x1
        : (!transform.any_op) -> (!transform.any_op)
    }
    transform.apply_dce to %module : !transform.any_op
    transform.apply_registered_pass "inline" to %module : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
