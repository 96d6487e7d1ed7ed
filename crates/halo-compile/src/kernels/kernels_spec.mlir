// halo compile (on CPU devices, unless --portable), passed to iree-compile as --iree-preprocessing-transform-spec-filename:
// - every f32 linalg.matmul that starts from zeros (linalg.fill 0), and every batch matmul of one
//   batch against a broadcast matrix (ONNX's MatMul of [1, M, K] by [K, N]: a transformer's
//   projections), becomes a dispatch calling halo's matmul kernel (halo_matmul_f32_v0,
//   crates/halo-kernels/src/import.rs), one workgroup per 48 rows by 192 columns of the output,
//   the rows' workgroups one after another so that a strip of the right-hand matrix (a layer's
//   weights, read from memory) is read once and reused from cache. A bias added per column after
//   it, and a ReLU after that, are fused (the kernel's flags), in a pass of their own before the
//   plain matmuls. Measured on ViT-S/16 (2 cores): 70.0 ms a call with IREE's code, 62.0 with
//   one workgroup per 48 x 192 taken a column strip at a time, 58.6 a row strip at a time. The
//   last column strip also takes up to 48 columns past its 192 (a 14x14 image's 196, attention's
//   197 tokens), which as a workgroup of their own ran at a tenth of the kernel's rate and read
//   their rows of `a` again (matmul_rate, one 48-row strip from memory: 48x192x96 plus 48x4x96
//   40.2 us, 48x196x96 36.4; with K = 576 201.6 against 185.6). The dense layers' packed
//   weights keep whole strips of 192;
// - every f32 batch matmul that starts from zeros (attention's products of queries and keys, and
//   of weights and values) too, with the batch as the grid's third dimension (ViT-S/16: 58.4 to
//   57.0 ms);
// - every f32 convolution of one group, stride 1 or 2 and dilation 1 on a batch of one, larger
//   than 1x1 (linalg.conv_2d_nchw_fchw; its padding, a tensor.pad before it, stays IREE's), with
//   its bias in either form it arrives in (the importer's: the convolution starts from the
//   broadcast bias; halo's graph rewrite's: it starts from zeros and a [1, F, 1, 1] bias is added
//   after it) and with or without a ReLU, a SiLU or a hard-swish (or, in the second form, a Clip(0, 6)) after
//   that, becomes a dispatch calling halo_conv2d_f32_v4 with them fused (crates/halo-kernels/src/conv.rs), one
//   workgroup per 48 output channels by as many output rows as make about 256 columns of the
//   input's phase width. A stride-2 convolution's input is first split into its four phases;
// - every f32 grouped convolution (linalg.conv_2d_ngchw_gfchw between the importer's split and
//   join of the channels) in halo's graph rewrite's form (its bias added after the join) or
//   without a bias, with a ReLU after it or not, the same way, the kernel told the groups;
// - every f32 1x1 convolution of stride 1 or 2 on a batch of one, in the same forms, becomes a
//   product of its filters [F, C] by its input [C, H * W] (at stride 2, its every other row and
//   column, gathered first) through halo_matmul_f32_v5, bias (one per row) and activation fused,
//   and a tensor added to its result too (a residual block's end, in halo's rewrite's form, when
//   the sum is the convolution's only reader: @read_once), and the ReLU after that sum if there
//   is one. Where its input is a squeeze-and-excitation's product x · s (in halo's rewrite's form,
//   with or without the residual), the kernel takes x and s, and scales its filters' columns by s
//   (EfficientNet-B0 and MobileNet-v3 no longer write and read back each scaled image);
// - every f32 depthwise convolution of stride 1 or 2 and dilation 1 on a batch of one, with its
//   bias (the importer's broadcast form) and with or without a ReLU, a Clip(0, 6), a SiLU or a
//   hard-swish after it, becomes a dispatch calling halo_depthwise_conv2d_f32_v2 with all of it
//   fused (crates/halo-kernels/src/depthwise.rs), one workgroup per group of whole channel
//   planes; when its input comes through a pad of zeros, as many on each side, the kernel adds
//   them itself.
// - every f32 global sum pool of a batch of one (ONNX's GlobalAveragePool before its division:
//   linalg.pooling_nchw_sum from zeros to a 1x1 output) becomes a dispatch calling
//   halo_row_sums_f32_v0 (crates/halo-kernels/src/row_sums.rs) over the image as [C, H * W], one
//   workgroup per channels of about 16384 elements;
// - attention's softmax of scaled scores (ONNX's Mul by a one-element constant, then Softmax along
//   the last axis of [1, H, S, S]) becomes a dispatch calling halo_softmax_f32_v0
//   (crates/halo-kernels/src/softmax.rs), one workgroup per rows of about 4096 scores.
// SiLU is ONNX's Sigmoid then Mul of the same value (EfficientNet's activation; @silu_input_of),
// hard-swish ONNX's HardSwish (MobileNet-v3's; @hard_swish_input_of), ReLU the importer's select
// of the positive part (@relu_input_of).
//   The matchers are tried in four passes: the depthwise convolutions with an activation after
//   such a pad, the other forms with an activation, then those after such a pad without one and
//   the matmuls with a bias, then the rest.
//
// The part between `halo:per-stride` markers is written once per stride by halo compile
// (crates/halo-compile/src/kernels.rs), with STRIDE replaced: a matcher compares the
// convolution's attributes exactly, and the call it makes fixes the stride.
module attributes {transform.with_named_sequence} {
  stream.executable private @halo_matmul_executable {
    stream.executable.export public @halo_matmul_tile workgroups(%m: index, %n: index) -> (index, index, index) {
      %x = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%m]
      %c1 = arith.constant 1 : index
      stream.return %y, %x, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v0(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_matmul_tile(%ab: !stream.binding, %bb: !stream.binding, %cb: !stream.binding,
                                  %m: index, %n: index, %k: index) {
        %c0 = arith.constant 0 : index
        %id = stream.dispatch.workgroup.id[1] : index
        %idy = stream.dispatch.workgroup.id[0] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 192)>()[%id]
        %col_tiles = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
        %last_col_tile = affine.apply affine_map<()[s0] -> (s0 - 1)>()[%col_tiles]
        %is_last_col_tile = arith.cmpi eq, %id, %last_col_tile : index
        %cols_left = affine.apply affine_map<()[s0, s1] -> (s1 - s0 * 192)>()[%id, %n]
        %c192_cols = arith.constant 192 : index
        %cols = arith.select %is_last_col_tile, %cols_left, %c192_cols : index
        %row = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%idy]
        %rows = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%idy, %m]
        %a = stream.binding.subspan %ab[%c0] : !stream.binding -> memref<?x?xf32>{%m, %k}
        %b = stream.binding.subspan %bb[%c0] : !stream.binding -> memref<?x?xf32>{%k, %n}
        %c = stream.binding.subspan %cb[%c0] : !stream.binding -> memref<?x?xf32>{%m, %n}
        %ap, %ao, %as0, %as1, %at0, %at1 = iree_codegen.extract_strided_metadata %a
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %bp, %bo, %bs0, %bs1, %bt0, %bt1 = iree_codegen.extract_strided_metadata %b
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %cp, %co, %cs0, %cs1, %ct0, %ct1 = iree_codegen.extract_strided_metadata %c
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %a_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%ao, %row, %at0]
        %b_tile = arith.addi %bo, %col : index
        %c_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%co, %row, %ct0, %col]
        %flags = arith.constant 0 : index
        func.call @halo_matmul_f32_v0(%ap, %a_tile, %bp, %b_tile, %bp, %b_tile, %cp, %c_tile, %rows, %cols, %k, %at0, %bt0, %ct0, %flags)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // A batch of matmuls (attention's heads): the grid's third dimension is the batch.
  stream.executable private @halo_batch_matmul_executable {
    stream.executable.export public @halo_batch_matmul_tile workgroups(%batch: index, %m: index, %n: index) -> (index, index, index) {
      %x = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%m]
      stream.return %y, %x, %batch : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v0(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_batch_matmul_tile(%ab: !stream.binding, %bb: !stream.binding, %cb: !stream.binding,
                                        %batch: index, %m: index, %n: index, %k: index) {
        %c0 = arith.constant 0 : index
        %idy = stream.dispatch.workgroup.id[0] : index
        %id = stream.dispatch.workgroup.id[1] : index
        %idz = stream.dispatch.workgroup.id[2] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 192)>()[%id]
        %col_tiles = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
        %last_col_tile = affine.apply affine_map<()[s0] -> (s0 - 1)>()[%col_tiles]
        %is_last_col_tile = arith.cmpi eq, %id, %last_col_tile : index
        %cols_left = affine.apply affine_map<()[s0, s1] -> (s1 - s0 * 192)>()[%id, %n]
        %c192_cols = arith.constant 192 : index
        %cols = arith.select %is_last_col_tile, %cols_left, %c192_cols : index
        %row = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%idy]
        %rows = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%idy, %m]
        %a = stream.binding.subspan %ab[%c0] : !stream.binding -> memref<?x?x?xf32>{%batch, %m, %k}
        %b = stream.binding.subspan %bb[%c0] : !stream.binding -> memref<?x?x?xf32>{%batch, %k, %n}
        %c = stream.binding.subspan %cb[%c0] : !stream.binding -> memref<?x?x?xf32>{%batch, %m, %n}
        %ap, %ao, %as0, %as1, %as2, %at0, %at1, %at2 = iree_codegen.extract_strided_metadata %a
            : memref<?x?x?xf32> -> memref<f32>, index, index, index, index, index, index, index
        %bp, %bo, %bs0, %bs1, %bs2, %bt0, %bt1, %bt2 = iree_codegen.extract_strided_metadata %b
            : memref<?x?x?xf32> -> memref<f32>, index, index, index, index, index, index, index
        %cp, %co, %cs0, %cs1, %cs2, %ct0, %ct1, %ct2 = iree_codegen.extract_strided_metadata %c
            : memref<?x?x?xf32> -> memref<f32>, index, index, index, index, index, index, index
        %a_tile = affine.apply affine_map<()[s0, s1, s2, s3, s4] -> (s0 + s1 * s2 + s3 * s4)>()[%ao, %idz, %at0, %row, %at1]
        %b_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%bo, %idz, %bt0, %col]
        %c_tile = affine.apply affine_map<()[s0, s1, s2, s3, s4, s5] -> (s0 + s1 * s2 + s3 * s4 + s5)>()[%co, %idz, %ct0, %row, %ct1, %col]
        %flags = arith.constant 0 : index
        func.call @halo_matmul_f32_v0(%ap, %a_tile, %bp, %b_tile, %bp, %b_tile, %cp, %c_tile, %rows, %cols, %k, %at1, %bt1, %ct1, %flags)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // Attention's softmax (halo_softmax_f32_v0): one workgroup per as many rows as make about 4096
  // elements.
  stream.executable private @halo_softmax_executable {
    stream.executable.export public @halo_softmax_tile workgroups(%rows: index, %cols: index) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      %c4096 = arith.constant 4096 : index
      %width = arith.maxui %cols, %c1 : index
      %fit = arith.divui %c4096, %width : index
      %per = arith.maxui %fit, %c1 : index
      %x = arith.ceildivui %rows, %per : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_softmax_f32_v0(memref<f32>, index, memref<f32>, index, index, index, index, index, index)
          attributes {llvm.bareptr = true}
      func.func @halo_softmax_tile(%xb: !stream.binding, %yb: !stream.binding, %rows: index, %cols: index, %scale: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c4096 = arith.constant 4096 : index
        %width = arith.maxui %cols, %c1 : index
        %fit = arith.divui %c4096, %width : index
        %per = arith.maxui %fit, %c1 : index
        %id = stream.dispatch.workgroup.id[0] : index
        %first = arith.muli %id, %per : index
        %left = arith.subi %rows, %first : index
        %count = arith.minui %per, %left : index
        %x = stream.binding.subspan %xb[%c0] : !stream.binding -> memref<?x?xf32>{%rows, %cols}
        %y = stream.binding.subspan %yb[%c0] : !stream.binding -> memref<?x?xf32>{%rows, %cols}
        %xp, %xo, %xs0, %xs1, %xt0, %xt1 = iree_codegen.extract_strided_metadata %x
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %yp, %yo, %ys0, %ys1, %yt0, %yt1 = iree_codegen.extract_strided_metadata %y
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %x_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%xo, %first, %xt0]
        %y_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%yo, %first, %yt0]
        func.call @halo_softmax_f32_v0(%xp, %x_tile, %yp, %y_tile, %count, %cols, %xt0, %yt0, %scale)
            : (memref<f32>, index, memref<f32>, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // The sums of a global pool (halo_row_sums_f32_v0): one workgroup per as many channels as make
  // about 16384 elements.
  stream.executable private @halo_row_sums_executable {
    stream.executable.export public @halo_row_sums_tile workgroups(%rows: index, %cols: index) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      %c16384 = arith.constant 16384 : index
      %width = arith.maxui %cols, %c1 : index
      %fit = arith.divui %c16384, %width : index
      %per = arith.maxui %fit, %c1 : index
      %x = arith.ceildivui %rows, %per : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_row_sums_f32_v0(memref<f32>, index, memref<f32>, index, index, index, index)
          attributes {llvm.bareptr = true}
      func.func @halo_row_sums_tile(%xb: !stream.binding, %sb: !stream.binding, %rows: index, %cols: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c16384 = arith.constant 16384 : index
        %width = arith.maxui %cols, %c1 : index
        %fit = arith.divui %c16384, %width : index
        %per = arith.maxui %fit, %c1 : index
        %id = stream.dispatch.workgroup.id[0] : index
        %first = arith.muli %id, %per : index
        %left = arith.subi %rows, %first : index
        %count = arith.minui %per, %left : index
        %x = stream.binding.subspan %xb[%c0] : !stream.binding -> memref<?x?xf32>{%rows, %cols}
        %s = stream.binding.subspan %sb[%c0] : !stream.binding -> memref<?xf32>{%rows}
        %xp, %xo, %xs0, %xs1, %xt0, %xt1 = iree_codegen.extract_strided_metadata %x
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %sp, %so, %ss, %st = iree_codegen.extract_strided_metadata %s
            : memref<?xf32> -> memref<f32>, index, index, index
        %x_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%xo, %first, %xt0]
        %s_tile = arith.addi %so, %first : index
        func.call @halo_row_sums_f32_v0(%xp, %x_tile, %sp, %s_tile, %count, %cols, %xt0)
            : (memref<f32>, index, memref<f32>, index, index, index, index) -> ()
        return
      }
    }
  }

  stream.executable private @halo_conv2d_executable {
    stream.executable.export public @halo_conv2d_tile workgroups(%f: index, %ho: index, %pw: index) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      %c256 = arith.constant 256 : index
      %wide = arith.divui %c256, %pw : index
      %rows = arith.maxui %wide, %c1 : index
      %x = arith.ceildivui %ho, %rows : index
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%f]
      stream.return %x, %y, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_conv2d_f32_v4(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index, index, index, index, index,
          index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_conv2d_tile(%xb: !stream.binding, %wb: !stream.binding, %biasb: !stream.binding,
                                  %ob: !stream.binding, %c: index, %f: index, %hp: index, %wp: index,
                                  %kh: index, %kw: index, %s: index, %flags: index, %groups: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c256 = arith.constant 256 : index
        %ho_span = arith.subi %hp, %kh : index
        %ho_steps = arith.divui %ho_span, %s : index
        %ho = arith.addi %ho_steps, %c1 : index
        %wo_span = arith.subi %wp, %kw : index
        %wo_steps = arith.divui %wo_span, %s : index
        %wo = arith.addi %wo_steps, %c1 : index
        %ph = arith.ceildivui %hp, %s : index
        %pw = arith.ceildivui %wp, %s : index
        %x_len = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 * s0 * s1 * s2 * s3)>()[%s, %c, %ph, %pw]
        %cg = arith.divui %c, %groups : index
        %w_len = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 * s1 * s2 * s3)>()[%kh, %kw, %f, %cg]
        %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%f, %ho, %wo]
        %wide = arith.divui %c256, %pw : index
        %rows_per_tile = arith.maxui %wide, %c1 : index
        %tx = stream.dispatch.workgroup.id[0] : index
        %ty = stream.dispatch.workgroup.id[1] : index
        %row = arith.muli %tx, %rows_per_tile : index
        %rows_left = arith.subi %ho, %row : index
        %rows = arith.minui %rows_per_tile, %rows_left : index
        %filter = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%ty]
        %filters = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%ty, %f]
        %x = stream.binding.subspan %xb[%c0] : !stream.binding -> memref<?xf32>{%x_len}
        %w = stream.binding.subspan %wb[%c0] : !stream.binding -> memref<?xf32>{%w_len}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%f}
        %o = stream.binding.subspan %ob[%c0] : !stream.binding -> memref<?xf32>{%o_len}
        %xp, %xo, %xs, %xt = iree_codegen.extract_strided_metadata %x : memref<?xf32> -> memref<f32>, index, index, index
        %wq, %wo2, %ws, %wt = iree_codegen.extract_strided_metadata %w : memref<?xf32> -> memref<f32>, index, index, index
        %bp, %bo, %bs, %bt = iree_codegen.extract_strided_metadata %bias : memref<?xf32> -> memref<f32>, index, index, index
        %op, %oo, %os, %ot = iree_codegen.extract_strided_metadata %o : memref<?xf32> -> memref<f32>, index, index, index
        func.call @halo_conv2d_f32_v4(%xp, %xo, %wq, %wo2, %bp, %bo, %op, %oo, %c, %f, %hp, %wp, %kh, %kw,
                                      %filter, %filters, %row, %rows, %flags, %s, %c1, %groups)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index, index, index, index, index, index, index, index) -> ()
        return
      }
    }
  }

  // A 1x1 convolution as a product of its filters [F, C] by its input [C, H * W]: the matmul's
  // 48 x 192 tiles, with the bias (one per row) and activation fused.
  stream.executable private @halo_pointwise_executable {
    stream.executable.export public @halo_pointwise_tile workgroups(%m: index, %n: index) -> (index, index, index) {
      %x = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%m]
      %c1 = arith.constant 1 : index
      stream.return %y, %x, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v5(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index,
          memref<f32>, index, index, memref<f32>, index) attributes {llvm.bareptr = true}
      func.func @halo_pointwise_tile(%ab: !stream.binding, %bb: !stream.binding, %biasb: !stream.binding,
                                     %sb: !stream.binding, %cb: !stream.binding, %m: index, %n: index, %k: index,
                                     %flags: index, %scale_len: index) {
        %c0 = arith.constant 0 : index
        %id = stream.dispatch.workgroup.id[1] : index
        %idy = stream.dispatch.workgroup.id[0] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 192)>()[%id]
        %col_tiles = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
        %last_col_tile = affine.apply affine_map<()[s0] -> (s0 - 1)>()[%col_tiles]
        %is_last_col_tile = arith.cmpi eq, %id, %last_col_tile : index
        %cols_left = affine.apply affine_map<()[s0, s1] -> (s1 - s0 * 192)>()[%id, %n]
        %c192_cols = arith.constant 192 : index
        %cols = arith.select %is_last_col_tile, %cols_left, %c192_cols : index
        %row = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%idy]
        %rows = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%idy, %m]
        %a = stream.binding.subspan %ab[%c0] : !stream.binding -> memref<?x?xf32>{%m, %k}
        %b = stream.binding.subspan %bb[%c0] : !stream.binding -> memref<?x?xf32>{%k, %n}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%m}
        %scale = stream.binding.subspan %sb[%c0] : !stream.binding -> memref<?xf32>{%scale_len}
        %c = stream.binding.subspan %cb[%c0] : !stream.binding -> memref<?x?xf32>{%m, %n}
        %ap, %ao, %as0, %as1, %at0, %at1 = iree_codegen.extract_strided_metadata %a
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %bp, %bo, %bs0, %bs1, %bt0, %bt1 = iree_codegen.extract_strided_metadata %b
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %biasp, %biaso, %biass, %biast = iree_codegen.extract_strided_metadata %bias
            : memref<?xf32> -> memref<f32>, index, index, index
        %scalep, %scaleo, %scales, %scalet = iree_codegen.extract_strided_metadata %scale
            : memref<?xf32> -> memref<f32>, index, index, index
        %cp, %co, %cs0, %cs1, %ct0, %ct1 = iree_codegen.extract_strided_metadata %c
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %a_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%ao, %row, %at0]
        %b_tile = arith.addi %bo, %col : index
        %bias_tile = arith.addi %biaso, %row : index
        %c_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%co, %row, %ct0, %col]
        // No residual: the flags never ask for one, so its operands (`a` again) are not read.
        func.call @halo_matmul_f32_v5(%ap, %a_tile, %bp, %b_tile, %biasp, %bias_tile, %cp, %c_tile, %rows, %cols, %k, %at0, %bt0, %ct0, %flags,
                                      %ap, %a_tile, %at0, %scalep, %scaleo)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index, memref<f32>, index, index, memref<f32>, index) -> ()
        return
      }
    }
  }

  // A 1x1 convolution of stride %s: the input's every %s-th row and column first (for stride 1,
  // the input itself), then the product.
  util.func private @halo_pointwise(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
                                    %scale: tensor<?xf32>, %s: index, %flags: index) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %f = tensor.dim %w, %c0 : tensor<?x?x1x1xf32>
    %c = tensor.dim %w, %c1 : tensor<?x?x1x1xf32>
    %h = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wd = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %h_last = arith.subi %h, %c1 : index
    %h_steps = arith.divui %h_last, %s : index
    %ho = arith.addi %h_steps, %c1 : index
    %w_last = arith.subi %wd, %c1 : index
    %w_steps = arith.divui %w_last, %s : index
    %wo = arith.addi %w_steps, %c1 : index
    %n = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%ho, %wo]
    %strided = tensor.extract_slice %x[0, 0, 0, 0] [1, %c, %ho, %wo] [1, 1, %s, %s]
        : tensor<1x?x?x?xf32> to tensor<1x?x?x?xf32>
    %b = tensor.collapse_shape %strided [[0, 1], [2, 3]] : tensor<1x?x?x?xf32> into tensor<?x?xf32>
    %a = tensor.collapse_shape %w [[0], [1, 2, 3]] : tensor<?x?x1x1xf32> into tensor<?x?xf32>
    %scale_len = tensor.dim %scale, %c0 : tensor<?xf32>
    %r = flow.dispatch @halo_pointwise_executable::@halo_pointwise_tile[%f, %n](%a, %b, %bias, %scale, %f, %n, %c, %flags, %scale_len)
        : (tensor<?x?xf32>{%f, %c}, tensor<?x?xf32>{%c, %n}, tensor<?xf32>{%f}, tensor<?xf32>{%scale_len}, index, index, index, index, index)
          -> tensor<?x?xf32>{%f, %n}
    %r4 = tensor.expand_shape %r [[0, 1], [2, 3]] output_shape [1, %f, %ho, %wo] : tensor<?x?xf32> into tensor<1x?x?x?xf32>
    util.return %r4 : tensor<1x?x?x?xf32>
  }

  // A 1x1 convolution that ends a residual block: @halo_pointwise_executable's tiles, the other
  // branch [F, H * W] added with the bias (halo_matmul_f32_v5), so the convolution's result is
  // not written out and read back to be added.
  stream.executable private @halo_pointwise_residual_executable {
    stream.executable.export public @halo_pointwise_residual_tile workgroups(%m: index, %n: index) -> (index, index, index) {
      %x = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%m]
      %c1 = arith.constant 1 : index
      stream.return %y, %x, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v5(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index,
          memref<f32>, index, index, memref<f32>, index) attributes {llvm.bareptr = true}
      func.func @halo_pointwise_residual_tile(%ab: !stream.binding, %bb: !stream.binding, %biasb: !stream.binding,
                                              %sb: !stream.binding, %rb: !stream.binding, %cb: !stream.binding,
                                              %m: index, %n: index, %k: index, %flags: index, %scale_len: index) {
        %c0 = arith.constant 0 : index
        %id = stream.dispatch.workgroup.id[1] : index
        %idy = stream.dispatch.workgroup.id[0] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 192)>()[%id]
        %col_tiles = affine.max affine_map<()[s0] -> (1, (s0 - 48) ceildiv 192)>()[%n]
        %last_col_tile = affine.apply affine_map<()[s0] -> (s0 - 1)>()[%col_tiles]
        %is_last_col_tile = arith.cmpi eq, %id, %last_col_tile : index
        %cols_left = affine.apply affine_map<()[s0, s1] -> (s1 - s0 * 192)>()[%id, %n]
        %c192_cols = arith.constant 192 : index
        %cols = arith.select %is_last_col_tile, %cols_left, %c192_cols : index
        %row = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%idy]
        %rows = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%idy, %m]
        %a = stream.binding.subspan %ab[%c0] : !stream.binding -> memref<?x?xf32>{%m, %k}
        %b = stream.binding.subspan %bb[%c0] : !stream.binding -> memref<?x?xf32>{%k, %n}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%m}
        %scale = stream.binding.subspan %sb[%c0] : !stream.binding -> memref<?xf32>{%scale_len}
        %r = stream.binding.subspan %rb[%c0] : !stream.binding -> memref<?x?xf32>{%m, %n}
        %c = stream.binding.subspan %cb[%c0] : !stream.binding -> memref<?x?xf32>{%m, %n}
        %ap, %ao, %as0, %as1, %at0, %at1 = iree_codegen.extract_strided_metadata %a
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %bp, %bo, %bs0, %bs1, %bt0, %bt1 = iree_codegen.extract_strided_metadata %b
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %biasp, %biaso, %biass, %biast = iree_codegen.extract_strided_metadata %bias
            : memref<?xf32> -> memref<f32>, index, index, index
        %scalep, %scaleo, %scales, %scalet = iree_codegen.extract_strided_metadata %scale
            : memref<?xf32> -> memref<f32>, index, index, index
        %rp, %ro, %rs0, %rs1, %rt0, %rt1 = iree_codegen.extract_strided_metadata %r
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %cp, %co, %cs0, %cs1, %ct0, %ct1 = iree_codegen.extract_strided_metadata %c
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %a_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%ao, %row, %at0]
        %b_tile = arith.addi %bo, %col : index
        %bias_tile = arith.addi %biaso, %row : index
        %r_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%ro, %row, %rt0, %col]
        %c_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%co, %row, %ct0, %col]
        func.call @halo_matmul_f32_v5(%ap, %a_tile, %bp, %b_tile, %biasp, %bias_tile, %cp, %c_tile, %rows, %cols, %k, %at0, %bt0, %ct0, %flags,
                                      %rp, %r_tile, %rt0, %scalep, %scaleo)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index, memref<f32>, index, index, memref<f32>, index) -> ()
        return
      }
    }
  }

  // @halo_pointwise with `%res` (the convolution's output size) added with the bias.
  util.func private @halo_pointwise_residual(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
                                             %scale: tensor<?xf32>, %res: tensor<1x?x?x?xf32>, %s: index, %flags: index)
      -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %f = tensor.dim %w, %c0 : tensor<?x?x1x1xf32>
    %c = tensor.dim %w, %c1 : tensor<?x?x1x1xf32>
    %h = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wd = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %h_last = arith.subi %h, %c1 : index
    %h_steps = arith.divui %h_last, %s : index
    %ho = arith.addi %h_steps, %c1 : index
    %w_last = arith.subi %wd, %c1 : index
    %w_steps = arith.divui %w_last, %s : index
    %wo = arith.addi %w_steps, %c1 : index
    %n = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%ho, %wo]
    %strided = tensor.extract_slice %x[0, 0, 0, 0] [1, %c, %ho, %wo] [1, 1, %s, %s]
        : tensor<1x?x?x?xf32> to tensor<1x?x?x?xf32>
    %b = tensor.collapse_shape %strided [[0, 1], [2, 3]] : tensor<1x?x?x?xf32> into tensor<?x?xf32>
    %a = tensor.collapse_shape %w [[0], [1, 2, 3]] : tensor<?x?x1x1xf32> into tensor<?x?xf32>
    %r = tensor.collapse_shape %res [[0, 1], [2, 3]] : tensor<1x?x?x?xf32> into tensor<?x?xf32>
    %scale_len = tensor.dim %scale, %c0 : tensor<?xf32>
    %o = flow.dispatch @halo_pointwise_residual_executable::@halo_pointwise_residual_tile[%f, %n](%a, %b, %bias, %scale, %r, %f, %n, %c, %flags, %scale_len)
        : (tensor<?x?xf32>{%f, %c}, tensor<?x?xf32>{%c, %n}, tensor<?xf32>{%f}, tensor<?xf32>{%scale_len}, tensor<?x?xf32>{%f, %n}, index, index, index, index, index)
          -> tensor<?x?xf32>{%f, %n}
    %o4 = tensor.expand_shape %o [[0, 1], [2, 3]] output_shape [1, %f, %ho, %wo] : tensor<?x?xf32> into tensor<1x?x?x?xf32>
    util.return %o4 : tensor<1x?x?x?xf32>
  }

  // A depthwise convolution: one workgroup per group of whole channel planes, about 4096 output
  // elements each (56x56 and larger: one channel; 7x7: 83).
  stream.executable private @halo_depthwise_executable {
    stream.executable.export public @halo_depthwise_tile workgroups(%c: index, %ho: index, %wo: index) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      %c4096 = arith.constant 4096 : index
      %plane = arith.muli %ho, %wo : index
      %plane1 = arith.maxui %plane, %c1 : index
      %fit = arith.divui %c4096, %plane1 : index
      %per_tile = arith.maxui %fit, %c1 : index
      %x = arith.ceildivui %c, %per_tile : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_depthwise_conv2d_f32_v2(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index, index, index, index, index,
          index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_depthwise_tile(%xb: !stream.binding, %wb: !stream.binding, %biasb: !stream.binding,
                                     %ob: !stream.binding, %c: index, %hp: index, %wp: index,
                                     %kh: index, %kw: index, %s: index, %flags: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c4096 = arith.constant 4096 : index
        %ho_span = arith.subi %hp, %kh : index
        %ho_steps = arith.divui %ho_span, %s : index
        %ho = arith.addi %ho_steps, %c1 : index
        %wo_span = arith.subi %wp, %kw : index
        %wo_steps = arith.divui %wo_span, %s : index
        %wo = arith.addi %wo_steps, %c1 : index
        %plane = arith.muli %ho, %wo : index
        %plane1 = arith.maxui %plane, %c1 : index
        %fit = arith.divui %c4096, %plane1 : index
        %per_tile = arith.maxui %fit, %c1 : index
        %tx = stream.dispatch.workgroup.id[0] : index
        %first = arith.muli %tx, %per_tile : index
        %left = arith.subi %c, %first : index
        %count = arith.minui %per_tile, %left : index
        %x_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %hp, %wp]
        %w_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %kh, %kw]
        %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %ho, %wo]
        %x = stream.binding.subspan %xb[%c0] : !stream.binding -> memref<?xf32>{%x_len}
        %w = stream.binding.subspan %wb[%c0] : !stream.binding -> memref<?xf32>{%w_len}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%c}
        %o = stream.binding.subspan %ob[%c0] : !stream.binding -> memref<?xf32>{%o_len}
        %xp, %xo, %xs, %xt = iree_codegen.extract_strided_metadata %x : memref<?xf32> -> memref<f32>, index, index, index
        %wq, %wo2, %ws, %wt = iree_codegen.extract_strided_metadata %w : memref<?xf32> -> memref<f32>, index, index, index
        %bp, %bo, %bs, %bt = iree_codegen.extract_strided_metadata %bias : memref<?xf32> -> memref<f32>, index, index, index
        %op, %oo, %os, %ot = iree_codegen.extract_strided_metadata %o : memref<?xf32> -> memref<f32>, index, index, index
        // The input is padded already: the kernel adds no zeros.
        func.call @halo_depthwise_conv2d_f32_v2(%xp, %xo, %wq, %wo2, %bp, %bo, %op, %oo, %c, %hp, %wp, %kh, %kw,
                                                %s, %c1, %first, %count, %c0, %ho, %flags,
                                                %c0, %c0, %c0, %c0)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index, index, index, index, index, index,
               index, index, index, index) -> ()
        return
      }
    }
  }

  // Filters [C, KH, KW] as the kernel takes them; the input padded before, by a pad that
  // @even_zero_padding_of did not accept (or none).
  util.func private @halo_depthwise(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>,
                                    %s: index, %flags: index) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c = tensor.dim %w, %c0 : tensor<?x?x?xf32>
    %kh = tensor.dim %w, %c1 : tensor<?x?x?xf32>
    %kw = tensor.dim %w, %c2 : tensor<?x?x?xf32>
    %hp = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wp = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %ho_span = arith.subi %hp, %kh : index
    %ho_steps = arith.divui %ho_span, %s : index
    %ho = arith.addi %ho_steps, %c1 : index
    %wo_span = arith.subi %wp, %kw : index
    %wo_steps = arith.divui %wo_span, %s : index
    %wo = arith.addi %wo_steps, %c1 : index
    %x_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %hp, %wp]
    %w_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %kh, %kw]
    %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %ho, %wo]
    %x1 = tensor.collapse_shape %x [[0, 1, 2, 3]] : tensor<1x?x?x?xf32> into tensor<?xf32>
    %w1 = tensor.collapse_shape %w [[0, 1, 2]] : tensor<?x?x?xf32> into tensor<?xf32>
    %r = flow.dispatch @halo_depthwise_executable::@halo_depthwise_tile[%c, %ho, %wo](%x1, %w1, %bias, %c, %hp, %wp, %kh, %kw, %s, %flags)
        : (tensor<?xf32>{%x_len}, tensor<?xf32>{%w_len}, tensor<?xf32>{%c}, index, index, index, index, index, index, index)
          -> tensor<?xf32>{%o_len}
    %r4 = tensor.expand_shape %r [[0, 1, 2, 3]] output_shape [1, %c, %ho, %wo] : tensor<?xf32> into tensor<1x?x?x?xf32>
    util.return %r4 : tensor<1x?x?x?xf32>
  }

  // A depthwise convolution whose zero padding the kernel adds itself (halo_depthwise_conv2d_f32_v2):
  // the input arrives unpadded, and IREE never writes the padded tensor out.
  stream.executable private @halo_depthwise_padded_executable {
    stream.executable.export public @halo_depthwise_padded_tile workgroups(%c: index, %ho: index, %wo: index) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      %c4096 = arith.constant 4096 : index
      %plane = arith.muli %ho, %wo : index
      %plane1 = arith.maxui %plane, %c1 : index
      %fit = arith.divui %c4096, %plane1 : index
      %per_tile = arith.maxui %fit, %c1 : index
      %x = arith.ceildivui %c, %per_tile : index
      stream.return %x, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_depthwise_conv2d_f32_v2(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index, index, index, index, index,
          index, index, index, index, index) attributes {llvm.bareptr = true}
      func.func @halo_depthwise_padded_tile(%xb: !stream.binding, %wb: !stream.binding, %biasb: !stream.binding,
                                            %ob: !stream.binding, %c: index, %h: index, %w_in: index,
                                            %kh: index, %kw: index, %s: index, %pad_h: index, %pad_w: index,
                                            %flags: index) {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %c4096 = arith.constant 4096 : index
        %hp = affine.apply affine_map<()[s0, s1] -> (s0 + s1 * 2)>()[%h, %pad_h]
        %wp = affine.apply affine_map<()[s0, s1] -> (s0 + s1 * 2)>()[%w_in, %pad_w]
        %ho_span = arith.subi %hp, %kh : index
        %ho_steps = arith.divui %ho_span, %s : index
        %ho = arith.addi %ho_steps, %c1 : index
        %wo_span = arith.subi %wp, %kw : index
        %wo_steps = arith.divui %wo_span, %s : index
        %wo = arith.addi %wo_steps, %c1 : index
        %plane = arith.muli %ho, %wo : index
        %plane1 = arith.maxui %plane, %c1 : index
        %fit = arith.divui %c4096, %plane1 : index
        %per_tile = arith.maxui %fit, %c1 : index
        %tx = stream.dispatch.workgroup.id[0] : index
        %first = arith.muli %tx, %per_tile : index
        %left = arith.subi %c, %first : index
        %count = arith.minui %per_tile, %left : index
        %x_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %h, %w_in]
        %w_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %kh, %kw]
        %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %ho, %wo]
        %x = stream.binding.subspan %xb[%c0] : !stream.binding -> memref<?xf32>{%x_len}
        %w = stream.binding.subspan %wb[%c0] : !stream.binding -> memref<?xf32>{%w_len}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%c}
        %o = stream.binding.subspan %ob[%c0] : !stream.binding -> memref<?xf32>{%o_len}
        %xp, %xo, %xs, %xt = iree_codegen.extract_strided_metadata %x : memref<?xf32> -> memref<f32>, index, index, index
        %wq, %wo2, %ws, %wt = iree_codegen.extract_strided_metadata %w : memref<?xf32> -> memref<f32>, index, index, index
        %bp, %bo, %bs, %bt = iree_codegen.extract_strided_metadata %bias : memref<?xf32> -> memref<f32>, index, index, index
        %op, %oo, %os, %ot = iree_codegen.extract_strided_metadata %o : memref<?xf32> -> memref<f32>, index, index, index
        func.call @halo_depthwise_conv2d_f32_v2(%xp, %xo, %wq, %wo2, %bp, %bo, %op, %oo, %c, %hp, %wp, %kh, %kw,
                                                %s, %c1, %first, %count, %c0, %ho, %flags,
                                                %pad_h, %pad_h, %pad_w, %pad_w)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index, index, index, index, index, index,
               index, index, index, index) -> ()
        return
      }
    }
  }

  // `%x` padded by as many zeros on each side of a dimension (the calls check it) is `%padded`,
  // of which only the size is read: once the calls are inlined that is a constant, and the pad
  // itself has no use left.
  util.func private @halo_depthwise_padded(%x: tensor<1x?x?x?xf32>, %padded: tensor<1x?x?x?xf32>,
                                           %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %s: index,
                                           %flags: index) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c = tensor.dim %w, %c0 : tensor<?x?x?xf32>
    %kh = tensor.dim %w, %c1 : tensor<?x?x?xf32>
    %kw = tensor.dim %w, %c2 : tensor<?x?x?xf32>
    %h = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wd = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %hp = tensor.dim %padded, %c2 : tensor<1x?x?x?xf32>
    %wp = tensor.dim %padded, %c3 : tensor<1x?x?x?xf32>
    %pad_h = affine.apply affine_map<()[s0, s1] -> ((s0 - s1) floordiv 2)>()[%hp, %h]
    %pad_w = affine.apply affine_map<()[s0, s1] -> ((s0 - s1) floordiv 2)>()[%wp, %wd]
    %ho_span = arith.subi %hp, %kh : index
    %ho_steps = arith.divui %ho_span, %s : index
    %ho = arith.addi %ho_steps, %c1 : index
    %wo_span = arith.subi %wp, %kw : index
    %wo_steps = arith.divui %wo_span, %s : index
    %wo = arith.addi %wo_steps, %c1 : index
    %x_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %h, %wd]
    %w_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %kh, %kw]
    %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %ho, %wo]
    %x1 = tensor.collapse_shape %x [[0, 1, 2, 3]] : tensor<1x?x?x?xf32> into tensor<?xf32>
    %w1 = tensor.collapse_shape %w [[0, 1, 2]] : tensor<?x?x?xf32> into tensor<?xf32>
    %r = flow.dispatch @halo_depthwise_padded_executable::@halo_depthwise_padded_tile[%c, %ho, %wo](%x1, %w1, %bias, %c, %h, %wd, %kh, %kw, %s, %pad_h, %pad_w, %flags)
        : (tensor<?xf32>{%x_len}, tensor<?xf32>{%w_len}, tensor<?xf32>{%c}, index, index, index, index, index, index, index, index, index)
          -> tensor<?xf32>{%o_len}
    %r4 = tensor.expand_shape %r [[0, 1, 2, 3]] output_shape [1, %c, %ho, %wo] : tensor<?xf32> into tensor<1x?x?x?xf32>
    util.return %r4 : tensor<1x?x?x?xf32>
  }

  util.func private @halo_matmul(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %init: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %lhs, %c0 : tensor<?x?xf32>
    %k = tensor.dim %lhs, %c1 : tensor<?x?xf32>
    %n = tensor.dim %rhs, %c1 : tensor<?x?xf32>
    %r = flow.dispatch @halo_matmul_executable::@halo_matmul_tile[%m, %n](%lhs, %rhs, %m, %n, %k)
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

  // ONNX's MatMul of a [1, M, K] tensor by a [K, N] one arrives as a batch matmul of one against
  // the second broadcast to [1, K, N].
  transform.named_sequence @match_batch1_matmul(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%lhs: tensor<1x?x?xf32>, %w: tensor<?x?xf32>, %w_init: tensor<1x?x?xf32>, %init: tensor<1x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %rhs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                               iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%w : tensor<?x?xf32>) outs(%w_init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            linalg.yield %in : f32
        } -> tensor<1x?x?xf32>
        %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?xf32>) -> tensor<1x?x?xf32>
        %product = linalg.batch_matmul ins(%lhs, %rhs : tensor<1x?x?xf32>, tensor<1x?x?xf32>)
            outs(%fill : tensor<1x?x?xf32>) -> tensor<1x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  util.func private @halo_batch1_matmul(%lhs: tensor<1x?x?xf32>, %w: tensor<?x?xf32>, %w_init: tensor<1x?x?xf32>,
                                        %init: tensor<1x?x?xf32>) -> tensor<1x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %lhs, %c1 : tensor<1x?x?xf32>
    %n = tensor.dim %w, %c1 : tensor<?x?xf32>
    %lhs2 = tensor.collapse_shape %lhs [[0, 1], [2]] : tensor<1x?x?xf32> into tensor<?x?xf32>
    %empty = tensor.empty(%m, %n) : tensor<?x?xf32>
    %r = util.call @halo_matmul(%lhs2, %w, %empty) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
    %r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [1, %m, %n] : tensor<?x?xf32> into tensor<1x?x?xf32>
    util.return %r3 : tensor<1x?x?xf32>
  }

  transform.named_sequence @call_halo_batch1_matmul(%ins: !transform.any_value {transform.readonly},
                                                    %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_matmul_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %inner = transform.util.import_symbol @halo_matmul into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_batch1_matmul into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_batch_matmul(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%lhs: tensor<?x?x?xf32>, %rhs: tensor<?x?x?xf32>, %init: tensor<?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
        %product = linalg.batch_matmul ins(%lhs, %rhs : tensor<?x?x?xf32>, tensor<?x?x?xf32>)
            outs(%fill : tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  util.func private @halo_batch_matmul(%lhs: tensor<?x?x?xf32>, %rhs: tensor<?x?x?xf32>, %init: tensor<?x?x?xf32>) -> tensor<?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %batch = tensor.dim %lhs, %c0 : tensor<?x?x?xf32>
    %m = tensor.dim %lhs, %c1 : tensor<?x?x?xf32>
    %k = tensor.dim %lhs, %c2 : tensor<?x?x?xf32>
    %n = tensor.dim %rhs, %c2 : tensor<?x?x?xf32>
    %r = flow.dispatch @halo_batch_matmul_executable::@halo_batch_matmul_tile[%batch, %m, %n](%lhs, %rhs, %batch, %m, %n, %k)
        : (tensor<?x?x?xf32>{%batch, %m, %k}, tensor<?x?x?xf32>{%batch, %k, %n}, index, index, index, index)
          -> tensor<?x?x?xf32>{%batch, %m, %n}
    util.return %r : tensor<?x?x?xf32>
  }

  transform.named_sequence @call_halo_batch_matmul(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_batch_matmul_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_batch_matmul into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // softmax(scale · scores) along the last dimension of [1, H, S, S] (attention's weights), the
  // scale's bits passed as an index (halo_softmax_f32_v0).
  util.func private @halo_scaled_softmax(%scores: tensor<1x?x?x?xf32>, %scale: tensor<1xf32>) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %heads = tensor.dim %scores, %c1 : tensor<1x?x?x?xf32>
    %queries = tensor.dim %scores, %c2 : tensor<1x?x?x?xf32>
    %cols = tensor.dim %scores, %c3 : tensor<1x?x?x?xf32>
    %rows = arith.muli %heads, %queries : index
    %flat = tensor.collapse_shape %scores [[0, 1, 2], [3]] : tensor<1x?x?x?xf32> into tensor<?x?xf32>
    %s = tensor.extract %scale[%c0] : tensor<1xf32>
    %bits = arith.bitcast %s : f32 to i32
    %scale_bits = arith.index_castui %bits : i32 to index
    %weights = flow.dispatch @halo_softmax_executable::@halo_softmax_tile[%rows, %cols](%flat, %rows, %cols, %scale_bits)
        : (tensor<?x?xf32>{%rows, %cols}, index, index, index) -> tensor<?x?xf32>{%rows, %cols}
    %r = tensor.expand_shape %weights [[0, 1, 2], [3]] output_shape [1, %heads, %queries, %cols]
        : tensor<?x?xf32> into tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  // ONNX's Softmax along the last axis of [1, H, S, S] after a Mul by a one-element constant, as
  // the importer writes them: the product, the row maximum (with the index of its place, which
  // nothing reads), the difference, its exponential, the row sum and the quotient, each a generic
  // of its own. From the quotient back, each step checked to take the one before; the scores
  // and the scale, and the quotient; a silenceable failure otherwise.
  transform.named_sequence @match_scaled_softmax(%divide: !transform.any_op {transform.readonly})
      -> (!transform.any_value, !transform.any_value, !transform.any_value) {
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    %quotient_ins, %quotient = transform.iree.match.cast_compatible_dag_from_root %divide {
      ^bb0(%e: tensor<1x?x?x?xf32>, %total: tensor<1x?x?x1xf32>, %init: tensor<1x?x?x?xf32>):
        %q = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%e, %total : tensor<1x?x?x?xf32>, tensor<1x?x?x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %t: f32, %out: f32):
            %d = arith.divf %in, %t : f32
            linalg.yield %d : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %sum = transform.get_producer_of_operand %divide[1] : (!transform.any_op) -> !transform.any_op
    %sum_ins, %sum_result = transform.iree.match.cast_compatible_dag_from_root %sum {
      ^bb0(%e: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x1xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x1xf32>) -> tensor<1x?x?x1xf32>
        %s = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>],
            iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
            ins(%e : tensor<1x?x?x?xf32>) outs(%zeros : tensor<1x?x?x1xf32>) {
          ^bb0(%in: f32, %out: f32):
            %a = arith.addf %in, %out : f32
            linalg.yield %a : f32
        } -> tensor<1x?x?x1xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    // The sum is of the exponentials divided.
    %exp = transform.get_producer_of_operand %divide[0] : (!transform.any_op) -> !transform.any_op
    %summed = transform.get_producer_of_operand %sum[0] : (!transform.any_op) -> !transform.any_op
    %exps = transform.merge_handles deduplicate %exp, %summed : !transform.any_op
    %exp_count = transform.num_associations %exps : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %exp_count, %one : !transform.param<i64>
    %exp_ins, %exp_result = transform.iree.match.cast_compatible_dag_from_root %exp {
      ^bb0(%t: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x?xf32>):
        %e = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%t : tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %x = math.exp %in : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %subtract = transform.get_producer_of_operand %exp[0] : (!transform.any_op) -> !transform.any_op
    %sub_ins, %sub_result = transform.iree.match.cast_compatible_dag_from_root %subtract {
      ^bb0(%v: tensor<1x?x?x?xf32>, %m: tensor<1x?x?x1xf32>, %init: tensor<1x?x?x?xf32>):
        %d = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%v, %m : tensor<1x?x?x?xf32>, tensor<1x?x?x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %mx: f32, %out: f32):
            %x = arith.subf %in, %mx : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    // What is subtracted is the maximum of what it is subtracted from.
    %expand = transform.get_producer_of_operand %subtract[1] : (!transform.any_op) -> !transform.any_op
    transform.match.operation_name %expand ["tensor.expand_shape"] : !transform.any_op
    %max = transform.get_producer_of_operand %expand[0] : (!transform.any_op) -> !transform.any_op
    %max_ins, %max_results = transform.iree.match.cast_compatible_dag_from_root %max {
      ^bb0(%v: tensor<1x?x?x?xf32>, %init: tensor<1x?x?xf32>, %index_init: tensor<1x?x?xi64>):
        %lowest = arith.constant 0xFF800000 : f32
        %first = arith.constant 0 : i64
        %lows = linalg.fill ins(%lowest : f32) outs(%init : tensor<1x?x?xf32>) -> tensor<1x?x?xf32>
        %firsts = linalg.fill ins(%first : i64) outs(%index_init : tensor<1x?x?xi64>) -> tensor<1x?x?xi64>
        %m:2 = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
            iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
            ins(%v : tensor<1x?x?x?xf32>) outs(%lows, %firsts : tensor<1x?x?xf32>, tensor<1x?x?xi64>) {
          ^bb0(%in: f32, %out: f32, %at: i64):
            %i = linalg.index 3 : index
            %i64 = arith.index_cast %i : index to i64
            %larger = arith.maximumf %in, %out : f32
            %above = arith.cmpf ogt, %in, %out : f32
            %place = arith.select %above, %i64, %at : i64
            linalg.yield %larger, %place : f32, i64
        } -> (tensor<1x?x?xf32>, tensor<1x?x?xi64>)
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %subtracted_from = transform.get_producer_of_operand %subtract[0] : (!transform.any_op) -> !transform.any_op
    %maximized = transform.get_producer_of_operand %max[0] : (!transform.any_op) -> !transform.any_op
    %scaled = transform.merge_handles deduplicate %subtracted_from, %maximized : !transform.any_op
    %scaled_count = transform.num_associations %scaled : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %scaled_count, %one : !transform.param<i64>
    %scale_ins, %scale_result = transform.iree.match.cast_compatible_dag_from_root %scaled {
      ^bb0(%scores: tensor<1x?x?x?xf32>, %scale: tensor<1xf32>, %init: tensor<1x?x?x?xf32>):
        %p = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%scores, %scale : tensor<1x?x?x?xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %s: f32, %out: f32):
            %x = arith.mulf %in, %s : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %scores = transform.get_operand %scaled[0] : (!transform.any_op) -> !transform.any_value
    %scale = transform.get_operand %scaled[1] : (!transform.any_op) -> !transform.any_value
    transform.yield %scores, %scale, %quotient : !transform.any_value, !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_scaled_softmax(%scores: !transform.any_value {transform.readonly},
                                                     %scale: !transform.any_value {transform.readonly},
                                                     %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_softmax_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_scaled_softmax into %module if undefined : (!transform.any_op) -> !transform.any_op
    %ins = transform.merge_handles %scores, %scale : !transform.any_value
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // A global sum pool: each channel's whole plane summed (ONNX's GlobalAveragePool keeps its
  // division by the plane's size after it, in IREE's code).
  util.func private @halo_global_sum(%x: tensor<1x?x?x?xf32>, %window: tensor<?x?xf32>,
                                     %init: tensor<1x?x1x1xf32>) -> tensor<1x?x1x1xf32> {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c = tensor.dim %x, %c1 : tensor<1x?x?x?xf32>
    %h = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %w = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %n = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%h, %w]
    %flat = tensor.collapse_shape %x [[0, 1], [2, 3]] : tensor<1x?x?x?xf32> into tensor<?x?xf32>
    %sums = flow.dispatch @halo_row_sums_executable::@halo_row_sums_tile[%c, %n](%flat, %c, %n)
        : (tensor<?x?xf32>{%c, %n}, index, index) -> tensor<?xf32>{%c}
    %pooled = tensor.expand_shape %sums [[0, 1, 2, 3]] output_shape [1, %c, 1, 1] : tensor<?xf32> into tensor<1x?x1x1xf32>
    util.return %pooled : tensor<1x?x1x1xf32>
  }

  // A sum pool of a batch of one from zeros whose output is 1x1 at stride 1, so its window is
  // the whole image: ONNX's GlobalAveragePool before its division, as the importer writes it.
  transform.named_sequence @match_global_sum(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %window: tensor<?x?xf32>, %init: tensor<1x?x1x1xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x1x1xf32>) -> tensor<1x?x1x1xf32>
        %sum = linalg.pooling_nchw_sum {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
            ins(%x, %window : tensor<1x?x?x?xf32>, tensor<?x?xf32>) outs(%zeros : tensor<1x?x1x1xf32>) -> tensor<1x?x1x1xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_global_sum(%ins: !transform.any_value {transform.readonly},
                                                 %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_row_sums_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_global_sum into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
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


  // The filters [F, C / G, KH, KW] go tap first, [KH, KW, F, C / G]; IREE reorders constant
  // filters once, when it compiles. The groups are the input's channels over the filters'.
  util.func private @halo_conv2d_flags_s1(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>,
                                       %flags: index) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %f = tensor.dim %w, %c0 : tensor<?x?x?x?xf32>
    %cg = tensor.dim %w, %c1 : tensor<?x?x?x?xf32>
    %c = tensor.dim %x, %c1 : tensor<1x?x?x?xf32>
    %groups = arith.divui %c, %cg : index
    %kh = tensor.dim %w, %c2 : tensor<?x?x?x?xf32>
    %kw = tensor.dim %w, %c3 : tensor<?x?x?x?xf32>
    %hp = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wp = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %ho = affine.apply affine_map<()[s0, s1] -> (s0 - s1 + 1)>()[%hp, %kh]
    %wo = affine.apply affine_map<()[s0, s1] -> (s0 - s1 + 1)>()[%wp, %kw]
    %x_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%c, %hp, %wp]
    %w_len = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 * s1 * s2 * s3)>()[%kh, %kw, %f, %cg]
    %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%f, %ho, %wo]
    %taps_first = tensor.empty(%kh, %kw, %f, %cg) : tensor<?x?x?x?xf32>
    %wt = linalg.transpose ins(%w : tensor<?x?x?x?xf32>) outs(%taps_first : tensor<?x?x?x?xf32>) permutation = [2, 3, 0, 1]
    %x1 = tensor.collapse_shape %x [[0, 1, 2, 3]] : tensor<1x?x?x?xf32> into tensor<?xf32>
    %w1 = tensor.collapse_shape %wt [[0, 1, 2, 3]] : tensor<?x?x?x?xf32> into tensor<?xf32>
    %r = flow.dispatch @halo_conv2d_executable::@halo_conv2d_tile[%f, %ho, %wp](%x1, %w1, %bias, %c, %f, %hp, %wp, %kh, %kw, %c1, %flags, %groups)
        : (tensor<?xf32>{%x_len}, tensor<?xf32>{%w_len}, tensor<?xf32>{%f}, index, index, index, index, index, index, index, index, index)
          -> tensor<?xf32>{%o_len}
    %r4 = tensor.expand_shape %r [[0, 1, 2, 3]] output_shape [1, %f, %ho, %wo] : tensor<?xf32> into tensor<1x?x?x?xf32>
    util.return %r4 : tensor<1x?x?x?xf32>
  }

  // A stride-2 convolution: the padded input, padded again to even sizes, goes as its four phases
  // ([2, 2, C, HP/2, WP/2]: rows and columns of one parity each), which the kernel views tap by tap.
  util.func private @halo_conv2d_flags_s2(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>,
                                          %flags: index) -> tensor<1x?x?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %zero = arith.constant 0.0 : f32
    %f = tensor.dim %w, %c0 : tensor<?x?x?x?xf32>
    %cg = tensor.dim %w, %c1 : tensor<?x?x?x?xf32>
    %c = tensor.dim %x, %c1 : tensor<1x?x?x?xf32>
    %groups = arith.divui %c, %cg : index
    %kh = tensor.dim %w, %c2 : tensor<?x?x?x?xf32>
    %kw = tensor.dim %w, %c3 : tensor<?x?x?x?xf32>
    %hp = tensor.dim %x, %c2 : tensor<1x?x?x?xf32>
    %wp = tensor.dim %x, %c3 : tensor<1x?x?x?xf32>
    %ph = affine.apply affine_map<()[s0] -> (s0 ceildiv 2)>()[%hp]
    %pw = affine.apply affine_map<()[s0] -> (s0 ceildiv 2)>()[%wp]
    %extra_h = affine.apply affine_map<()[s0] -> ((s0 ceildiv 2) * 2 - s0)>()[%hp]
    %extra_w = affine.apply affine_map<()[s0] -> ((s0 ceildiv 2) * 2 - s0)>()[%wp]
    %ho = affine.apply affine_map<()[s0, s1] -> ((s0 - s1) floordiv 2 + 1)>()[%hp, %kh]
    %wo = affine.apply affine_map<()[s0, s1] -> ((s0 - s1) floordiv 2 + 1)>()[%wp, %kw]
    %x_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2 * 4)>()[%c, %ph, %pw]
    %w_len = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 * s1 * s2 * s3)>()[%kh, %kw, %f, %cg]
    %o_len = affine.apply affine_map<()[s0, s1, s2] -> (s0 * s1 * s2)>()[%f, %ho, %wo]
    %even = tensor.pad %x low[0, 0, 0, 0] high[0, 0, %extra_h, %extra_w] {
      ^bb0(%i: index, %j: index, %k: index, %l: index):
        tensor.yield %zero : f32
    } : tensor<1x?x?x?xf32> to tensor<1x?x?x?xf32>
    %split = tensor.expand_shape %even [[0], [1], [2, 3], [4, 5]] output_shape [1, %c, %ph, 2, %pw, 2]
        : tensor<1x?x?x?xf32> into tensor<1x?x?x2x?x2xf32>
    %phases_empty = tensor.empty(%c, %ph, %pw) : tensor<2x2x1x?x?x?xf32>
    %phases = linalg.transpose ins(%split : tensor<1x?x?x2x?x2xf32>) outs(%phases_empty : tensor<2x2x1x?x?x?xf32>)
        permutation = [3, 5, 0, 1, 2, 4]
    %taps_first = tensor.empty(%kh, %kw, %f, %cg) : tensor<?x?x?x?xf32>
    %wt = linalg.transpose ins(%w : tensor<?x?x?x?xf32>) outs(%taps_first : tensor<?x?x?x?xf32>) permutation = [2, 3, 0, 1]
    %x1 = tensor.collapse_shape %phases [[0, 1, 2, 3, 4, 5]] : tensor<2x2x1x?x?x?xf32> into tensor<?xf32>
    %w1 = tensor.collapse_shape %wt [[0, 1, 2, 3]] : tensor<?x?x?x?xf32> into tensor<?xf32>
    %r = flow.dispatch @halo_conv2d_executable::@halo_conv2d_tile[%f, %ho, %pw](%x1, %w1, %bias, %c, %f, %hp, %wp, %kh, %kw, %c2, %flags, %groups)
        : (tensor<?xf32>{%x_len}, tensor<?xf32>{%w_len}, tensor<?xf32>{%f}, index, index, index, index, index, index, index, index, index)
          -> tensor<?xf32>{%o_len}
    %r4 = tensor.expand_shape %r [[0, 1, 2, 3]] output_shape [1, %f, %ho, %wo] : tensor<?xf32> into tensor<1x?x?x?xf32>
    util.return %r4 : tensor<1x?x?x?xf32>
  }


  // The input and the result of the tensor.pad before `%conv` when it adds zeros, as many on each
  // side of a dimension (1 to 3, as 3x3, 5x5 and 7x7 filters keep the size); a silenceable
  // failure otherwise.
  transform.named_sequence @even_zero_padding_of(%conv: !transform.any_op {transform.readonly})
      -> (!transform.any_value, !transform.any_value) {
    %pad = transform.get_producer_of_operand %conv[0] : (!transform.any_op) -> !transform.any_op
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    %yield = transform.structured.match ops{["tensor.yield"]} in %pad : (!transform.any_op) -> !transform.any_op
    %value = transform.get_producer_of_operand %yield[0] : (!transform.any_op) -> !transform.any_op
    %zero = transform.structured.match ops{["arith.constant"]} attributes {value = 0.0 : f32} in %value : (!transform.any_op) -> !transform.any_op
    %zeros = transform.num_associations %zero : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %zeros, %one : !transform.param<i64>
    %by1 = transform.structured.match ops{["tensor.pad"]} attributes {static_low = array<i64: 0, 0, 1, 1>, static_high = array<i64: 0, 0, 1, 1>} in %pad : (!transform.any_op) -> !transform.any_op
    %by2 = transform.structured.match ops{["tensor.pad"]} attributes {static_low = array<i64: 0, 0, 2, 2>, static_high = array<i64: 0, 0, 2, 2>} in %pad : (!transform.any_op) -> !transform.any_op
    %by3 = transform.structured.match ops{["tensor.pad"]} attributes {static_low = array<i64: 0, 0, 3, 3>, static_high = array<i64: 0, 0, 3, 3>} in %pad : (!transform.any_op) -> !transform.any_op
    %even = transform.merge_handles %by1, %by2, %by3 : !transform.any_op
    %evens = transform.num_associations %even : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %evens, %one : !transform.param<i64>
    %source = transform.get_operand %pad[0] : (!transform.any_op) -> !transform.any_value
    %padded = transform.get_result %pad[0] : (!transform.any_op) -> !transform.any_value
    transform.yield %source, %padded : !transform.any_value, !transform.any_value
  }

  // The value `%mul` multiplies by its own sigmoid (SiLU as ONNX's Sigmoid then Mul arrive: an
  // elementwise linalg.generic of 1 / (exp(-x) + 1), then one of x * that), as the operation
  // producing that value and the product; a silenceable failure otherwise. The sigmoid's body is
  // followed from its yield rather than matched by a DAG pattern, since the matcher cannot map
  // the constant 1 it captures from outside.
  transform.named_sequence @silu_input_of(%mul: !transform.any_op {transform.readonly}) -> (!transform.any_op, !transform.any_value) {
    %factors, %product = transform.iree.match.cast_compatible_dag_from_root %mul {
      ^bb0(%v: tensor<1x?x?x?xf32>, %gate: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x?xf32>):
        %silu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%v, %gate : tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %g: f32, %out: f32):
            %activated = arith.mulf %in, %g : f32
            linalg.yield %activated : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %producer = transform.get_producer_of_operand %mul[0] : (!transform.any_op) -> !transform.any_op
    %sigmoid = transform.get_producer_of_operand %mul[1] : (!transform.any_op) -> !transform.any_op
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    // The gate: an elementwise generic of one input, that same value.
    %elementwise = transform.structured.match ops{["linalg.generic"]} attributes {
        indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
        iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>]}
        in %sigmoid : (!transform.any_op) -> !transform.any_op
    %elementwise_count = transform.num_associations %elementwise : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %elementwise_count, %one : !transform.param<i64>
    %sigmoid_input = transform.get_producer_of_operand %sigmoid[0] : (!transform.any_op) -> !transform.any_op
    %both = transform.merge_handles deduplicate %producer, %sigmoid_input : !transform.any_op
    %distinct = transform.num_associations %both : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %distinct, %one : !transform.param<i64>
    // Its body, from what it yields back: 1 / (exp(-x) + 1).
    %yield = transform.structured.match ops{["linalg.yield"]} in %sigmoid : (!transform.any_op) -> !transform.any_op
    %divide = transform.get_producer_of_operand %yield[0] : (!transform.any_op) -> !transform.any_op
    transform.match.operation_name %divide ["arith.divf"] : !transform.any_op
    %numerator = transform.get_producer_of_operand %divide[0] : (!transform.any_op) -> !transform.any_op
    %sum = transform.get_producer_of_operand %divide[1] : (!transform.any_op) -> !transform.any_op
    transform.match.operation_name %sum ["arith.addf"] : !transform.any_op
    %exp = transform.get_producer_of_operand %sum[0] : (!transform.any_op) -> !transform.any_op
    %addend = transform.get_producer_of_operand %sum[1] : (!transform.any_op) -> !transform.any_op
    transform.match.operation_name %exp ["math.exp"] : !transform.any_op
    %negate = transform.get_producer_of_operand %exp[0] : (!transform.any_op) -> !transform.any_op
    transform.match.operation_name %negate ["arith.negf"] : !transform.any_op
    // Both ones are the same constant once IREE has folded its duplicates.
    %ones = transform.merge_handles deduplicate %numerator, %addend : !transform.any_op
    %one_count = transform.num_associations %ones : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %one_count, %one : !transform.param<i64>
    %constant_one = transform.structured.match ops{["arith.constant"]} attributes {value = 1.0 : f32} in %ones : (!transform.any_op) -> !transform.any_op
    %constant_ones = transform.num_associations %constant_one : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %constant_ones, %one : !transform.param<i64>
    transform.yield %producer, %product : !transform.any_op, !transform.any_value
  }

  // The operands of a squeeze-and-excitation's product x · s (an image [1, C, H, W] by its
  // channels' weights [1, C, 1, 1], in that order, as torch exports EfficientNet's and
  // MobileNet-v3's Mul) that 1x1 convolution `%conv` reads: x and s, one handle.
  transform.named_sequence @se_scaled_input_of(%conv: !transform.any_op {transform.readonly}) -> !transform.any_value {
    %mul = transform.get_producer_of_operand %conv[0] : (!transform.any_op) -> !transform.any_op
    %ins, %out = transform.iree.match.cast_compatible_dag_from_root %mul {
      ^bb0(%x: tensor<1x?x?x?xf32>, %se: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %scaled = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%x, %se : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %weight: f32, %o: f32):
            %product = arith.mulf %in, %weight : f32
            linalg.yield %product : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %x = transform.get_operand %mul[0] : (!transform.any_op) -> !transform.any_value
    %se = transform.get_operand %mul[1] : (!transform.any_op) -> !transform.any_value
    %both = transform.merge_handles %x, %se : !transform.any_value
    transform.yield %both : !transform.any_value
  }

  // Succeeds when the first result of `%op` has one reader: a convolution fused into the sum
  // that reads it is computed inside the sum's dispatch, so one whose result is read elsewhere
  // too (a block's output that is both the next block's input and the other term of its sum, as
  // in EfficientNet and MobileNet) would be computed twice.
  transform.named_sequence @read_once(%op: !transform.any_op {transform.readonly}) {
    %readers = transform.get_consumers_of_result %op[0] : (!transform.any_op) -> !transform.any_op
    %count = transform.num_associations %readers : (!transform.any_op) -> !transform.param<i64>
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %count, %one : !transform.param<i64>
    transform.yield
  }

  // The value `%relu` keeps where it is above zero, and zero elsewhere (ONNX's Relu as the
  // importer writes it: an elementwise generic of select(x > 0, x, 0), the comparison unordered
  // so that NaN is kept), as the operation producing that value and the result; a silenceable
  // failure otherwise. As in @silu_input_of, the body is followed from its yield, since a DAG
  // pattern cannot map the zero it captures from outside.
  transform.named_sequence @relu_input_of(%relu: !transform.any_op {transform.readonly}) -> (!transform.any_op, !transform.any_value) {
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    %elementwise = transform.structured.match ops{["linalg.generic"]} attributes {
        indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
        iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>]}
        in %relu : (!transform.any_op) -> !transform.any_op
    %elementwise_count = transform.num_associations %elementwise : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %elementwise_count, %one : !transform.param<i64>
    // The generic and its three: the comparison, the select and the yield.
    %four = transform.param.constant 4 : i64 -> !transform.param<i64>
    %all = transform.structured.match in %relu : (!transform.any_op) -> !transform.any_op
    %all_count = transform.num_associations %all : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %all_count, %four : !transform.param<i64>
    %yield = transform.structured.match ops{["linalg.yield"]} in %relu : (!transform.any_op) -> !transform.any_op
    %select = transform.get_producer_of_operand %yield[0] : (!transform.any_op) -> !transform.any_op
    transform.match.operation_name %select ["arith.select"] : !transform.any_op
    %compare = transform.get_producer_of_operand %select[0] : (!transform.any_op) -> !transform.any_op
    %above = transform.structured.match ops{["arith.cmpf"]} attributes {predicate = 9 : i64} in %compare : (!transform.any_op) -> !transform.any_op
    %above_count = transform.num_associations %above : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %above_count, %one : !transform.param<i64>
    // The bound compared with and the value chosen below it: one constant zero. The value
    // compared and the value kept are then the body's argument (their producer would fail).
    %bound = transform.get_producer_of_operand %compare[1] : (!transform.any_op) -> !transform.any_op
    %floor = transform.get_producer_of_operand %select[2] : (!transform.any_op) -> !transform.any_op
    %zeros = transform.merge_handles deduplicate %bound, %floor : !transform.any_op
    %zero_count = transform.num_associations %zeros : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %zero_count, %one : !transform.param<i64>
    %zero = transform.structured.match ops{["arith.constant"]} attributes {value = 0.0 : f32} in %zeros : (!transform.any_op) -> !transform.any_op
    %zero_constants = transform.num_associations %zero : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %zero_constants, %one : !transform.param<i64>
    %producer = transform.get_producer_of_operand %relu[0] : (!transform.any_op) -> !transform.any_op
    %result = transform.get_result %relu[0] : (!transform.any_op) -> !transform.any_value
    transform.yield %producer, %result : !transform.any_op, !transform.any_value
  }

  // The value `%mul` takes hard-swish of (ONNX's HardSwish as the importer writes it: x + 3,
  // ReLU, the minimum with a 6 of its own, / 6, then the product of that gate by x, each an
  // elementwise generic), as the operation producing that value and the product; a silenceable
  // failure otherwise.
  transform.named_sequence @hard_swish_input_of(%mul: !transform.any_op {transform.readonly}) -> (!transform.any_op, !transform.any_value) {
    %factors, %product = transform.iree.match.cast_compatible_dag_from_root %mul {
      ^bb0(%gate: tensor<1x?x?x?xf32>, %v: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x?xf32>):
        %activated = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%gate, %v : tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%g: f32, %in: f32, %out: f32):
            %scaled = arith.mulf %g, %in : f32
            linalg.yield %scaled : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    %producer = transform.get_producer_of_operand %mul[1] : (!transform.any_op) -> !transform.any_op
    // gate = min(relu(x + 3), 6) / 6, from its last step back.
    %divided = transform.get_producer_of_operand %mul[0] : (!transform.any_op) -> !transform.any_op
    %minimum, %divide, %six = transform.include @constant_step_of failures(propagate) (%divided)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.match.operation_name %divide ["arith.divf"] : !transform.any_op
    %six_constant = transform.structured.match ops{["arith.constant"]} attributes {value = 6.0 : f32} in %six : (!transform.any_op) -> !transform.any_op
    %six_count = transform.num_associations %six_constant : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %six_count, %one : !transform.param<i64>
    %bounded, %smaller = transform.iree.match.cast_compatible_dag_from_root %minimum {
      ^bb0(%v: tensor<1x?x?x?xf32>, %bound: tensor<f32>, %init: tensor<1x?x?x?xf32>):
        %min = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ()>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%v, %bound : tensor<1x?x?x?xf32>, tensor<f32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %below = arith.cmpf olt, %in, %b : f32
            %kept = arith.select %below, %in, %b : f32
            linalg.yield %kept : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %bound = transform.get_producer_of_operand %minimum[1] : (!transform.any_op) -> !transform.any_op
    %bound_six = transform.structured.match ops{["arith.constant"]} attributes {value = dense<6.0> : tensor<f32>} in %bound : (!transform.any_op) -> !transform.any_op
    %bound_count = transform.num_associations %bound_six : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %bound_count, %one : !transform.param<i64>
    %relu = transform.get_producer_of_operand %minimum[0] : (!transform.any_op) -> !transform.any_op
    %shifted, %relu_result = transform.include @relu_input_of failures(propagate) (%relu)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %source, %add, %three = transform.include @constant_step_of failures(propagate) (%shifted)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.match.operation_name %add ["arith.addf"] : !transform.any_op
    %three_constant = transform.structured.match ops{["arith.constant"]} attributes {value = 3.0 : f32} in %three : (!transform.any_op) -> !transform.any_op
    %three_count = transform.num_associations %three_constant : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %three_count, %one : !transform.param<i64>
    // The value shifted is the one the gate multiplies.
    %both = transform.merge_handles deduplicate %producer, %source : !transform.any_op
    %distinct = transform.num_associations %both : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %distinct, %one : !transform.param<i64>
    transform.yield %producer, %product : !transform.any_op, !transform.any_value
  }

  // An elementwise generic of one input whose body is one arithmetic operation of its element
  // and a constant captured from outside (x + 3, x / 6), as the operation producing its input,
  // that operation and the constant's; a silenceable failure otherwise.
  transform.named_sequence @constant_step_of(%step: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    %elementwise = transform.structured.match ops{["linalg.generic"]} attributes {
        indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
        iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>]}
        in %step : (!transform.any_op) -> !transform.any_op
    %elementwise_count = transform.num_associations %elementwise : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %elementwise_count, %one : !transform.param<i64>
    // The generic, the operation and the yield.
    %three = transform.param.constant 3 : i64 -> !transform.param<i64>
    %all = transform.structured.match in %step : (!transform.any_op) -> !transform.any_op
    %all_count = transform.num_associations %all : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %all_count, %three : !transform.param<i64>
    %yield = transform.structured.match ops{["linalg.yield"]} in %step : (!transform.any_op) -> !transform.any_op
    %operation = transform.get_producer_of_operand %yield[0] : (!transform.any_op) -> !transform.any_op
    %constant = transform.get_producer_of_operand %operation[1] : (!transform.any_op) -> !transform.any_op
    %input = transform.get_producer_of_operand %step[0] : (!transform.any_op) -> !transform.any_op
    transform.yield %input, %operation, %constant : !transform.any_op, !transform.any_op, !transform.any_op
  }

// halo:per-stride begin

  util.func private @halo_conv2d_add_relu6_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
                                                     %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 5 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_conv2d_add_relu6_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                              %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_add_relu6_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // Flags of halo_matmul_f32_v5 for a 1x1 convolution: 4 adds the bias per row, 2 applies ReLU,
  // 8 ReLU6, 32 SiLU, 64 hard-swish; 16 adds the residual; 256 scales the filters' columns. The
  // calls without a scale pass the bias in its place, which the kernel then does not read.

  util.func private @halo_pointwise_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 4 : index
    %r = util.call @halo_pointwise(%x, %w, %bias, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  util.func private @halo_pointwise_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 6 : index
    %r = util.call @halo_pointwise(%x, %w, %bias, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_pointwise_silu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 36 : index
    %r = util.call @halo_pointwise(%x, %w, %bias, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_pointwise_hard_swish_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 68 : index
    %r = util.call @halo_pointwise(%x, %w, %bias, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_pointwise_silu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_silu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_pointwise_hard_swish_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_hard_swish_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  util.func private @halo_pointwise_add_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 4 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise(%x, %w, %b, %b, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_add_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  util.func private @halo_pointwise_add_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 6 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise(%x, %w, %b, %b, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_pointwise_add_silu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 36 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise(%x, %w, %b, %b, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_pointwise_add_hard_swish_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 68 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise(%x, %w, %b, %b, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_add_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_pointwise_add_silu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_silu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_pointwise_add_hard_swish_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_hard_swish_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  util.func private @halo_pointwise_add_relu6_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 12 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise(%x, %w, %b, %b, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_add_relu6_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_relu6_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }
  // A 1x1 convolution (halo's rewrite's form: from zeros, then its bias) whose result is added to
  // another tensor of its size (in either order), with or without a ReLU after the sum: the
  // end of a residual block (ResNet's, with the ReLU; MobileNet-v2's, without).

  util.func private @halo_pointwise_add_residual_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %res: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 22 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise_residual(%x, %w, %b, %b, %res, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, tensor<1x?x?x?xf32>, index, index)
          -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_add_residual_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_residual_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise_residual into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_residual_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  util.func private @halo_pointwise_add_residual_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %res: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 20 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise_residual(%x, %w, %b, %b, %res, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, tensor<1x?x?x?xf32>, index, index)
          -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_pointwise_add_residual_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_residual_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise_residual into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_pointwise_add_residual_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // A 1x1 convolution (halo's rewrite's form) of an image whose channels a squeeze-and-excitation
  // scaled: the kernel scales the filters' columns instead (flag 256), so the scaled image is
  // never written. Flags 260: the bias per row and the scale; 276: and the residual.
  util.func private @halo_se_pointwise_add_sSTRIDE(%x: tensor<1x?x?x?xf32>, %se: tensor<1x?x1x1xf32>,
      %scaled: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 260 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %scale = tensor.collapse_shape %se [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise(%x, %w, %b, %scale, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_se_pointwise_add_residual_sSTRIDE(%x: tensor<1x?x?x?xf32>, %se: tensor<1x?x1x1xf32>,
      %scaled: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>,
      %res: tensor<1x?x?x?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 276 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %scale = tensor.collapse_shape %se [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_pointwise_residual(%x, %w, %b, %scale, %res, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>, tensor<?xf32>, tensor<?xf32>, tensor<1x?x?x?xf32>, index, index)
          -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  // @match_pointwise_add_sSTRIDE of a squeeze-and-excitation's product: x and s, then its operands.
  transform.named_sequence @match_se_pointwise_add_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.include @match_pointwise_add_sSTRIDE failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %product = transform.get_producer_of_operand %root[0] : (!transform.any_op) -> !transform.any_op
    %se = transform.include @se_scaled_input_of failures(propagate) (%product) : (!transform.any_op) -> !transform.any_value
    %all = transform.merge_handles %se, %ins : !transform.any_value
    transform.yield %all, %outs : !transform.any_value, !transform.any_value
  }

  // @match_pointwise_add_residual_sSTRIDE and @match_residual_add_pointwise_sSTRIDE of a
  // squeeze-and-excitation's product: x and s, then their operands.
  transform.named_sequence @match_se_pointwise_add_residual_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.include @match_pointwise_add_residual_sSTRIDE failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %biased = transform.get_producer_of_operand %root[0] : (!transform.any_op) -> !transform.any_op
    %product = transform.get_producer_of_operand %biased[0] : (!transform.any_op) -> !transform.any_op
    %se = transform.include @se_scaled_input_of failures(propagate) (%product) : (!transform.any_op) -> !transform.any_value
    %all = transform.merge_handles %se, %ins : !transform.any_value
    transform.yield %all, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_se_residual_add_pointwise_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.include @match_residual_add_pointwise_sSTRIDE failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %biased = transform.get_producer_of_operand %root[1] : (!transform.any_op) -> !transform.any_op
    %product = transform.get_producer_of_operand %biased[0] : (!transform.any_op) -> !transform.any_op
    %se = transform.include @se_scaled_input_of failures(propagate) (%product) : (!transform.any_op) -> !transform.any_value
    %all = transform.merge_handles %se, %ins : !transform.any_value
    transform.yield %all, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_se_pointwise_add_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_se_pointwise_add_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_se_pointwise_add_residual_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_pointwise_residual_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_pointwise_residual into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_se_pointwise_add_residual_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_pointwise_add_residual_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %res: tensor<1x?x?x?xf32>,
           %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %biased = arith.addf %in, %b : f32
            linalg.yield %biased : f32
        } -> tensor<1x?x?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %res : tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %other: f32, %out: f32):
            %added = arith.addf %in, %other : f32
            linalg.yield %added : f32
        } -> tensor<1x?x?x?xf32>
        %relu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%sum : tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %positive = arith.cmpf ugt, %in, %zero : f32
            %kept = arith.select %positive, %in, %zero : f32
            linalg.yield %kept : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %sum = transform.get_producer_of_operand %root[0] : (!transform.any_op) -> !transform.any_op
    %fused = transform.get_producer_of_operand %sum[0] : (!transform.any_op) -> !transform.any_op
    transform.include @read_once failures(propagate) (%fused) : (!transform.any_op) -> ()
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_residual_add_pointwise_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %res: tensor<1x?x?x?xf32>,
           %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %biased = arith.addf %in, %b : f32
            linalg.yield %biased : f32
        } -> tensor<1x?x?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%res, %conv : tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %other: f32, %out: f32):
            %added = arith.addf %in, %other : f32
            linalg.yield %added : f32
        } -> tensor<1x?x?x?xf32>
        %relu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%sum : tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %positive = arith.cmpf ugt, %in, %zero : f32
            %kept = arith.select %positive, %in, %zero : f32
            linalg.yield %kept : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %sum = transform.get_producer_of_operand %root[0] : (!transform.any_op) -> !transform.any_op
    %fused = transform.get_producer_of_operand %sum[1] : (!transform.any_op) -> !transform.any_op
    transform.include @read_once failures(propagate) (%fused) : (!transform.any_op) -> ()
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_add_residual_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %res: tensor<1x?x?x?xf32>,
           %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %biased = arith.addf %in, %b : f32
            linalg.yield %biased : f32
        } -> tensor<1x?x?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %res : tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %other: f32, %out: f32):
            %added = arith.addf %in, %other : f32
            linalg.yield %added : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %fused = transform.get_producer_of_operand %root[0] : (!transform.any_op) -> !transform.any_op
    transform.include @read_once failures(propagate) (%fused) : (!transform.any_op) -> ()
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_residual_add_pointwise_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %res: tensor<1x?x?x?xf32>,
           %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %biased = arith.addf %in, %b : f32
            linalg.yield %biased : f32
        } -> tensor<1x?x?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%res, %conv : tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %other: f32, %out: f32):
            %added = arith.addf %in, %other : f32
            linalg.yield %added : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %fused = transform.get_producer_of_operand %root[1] : (!transform.any_op) -> !transform.any_op
    transform.include @read_once failures(propagate) (%fused) : (!transform.any_op) -> ()
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  // Flags of halo_conv2d_f32_v4: 1 adds the bias, 2 applies ReLU, 4 ReLU6, 8 SiLU, 16 hard-swish.
  util.func private @halo_conv2d_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>,
                                           %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 1 : index
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>,
                                                %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 3 : index
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_silu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>,
                                                %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 9 : index
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_hard_swish_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>,
                                                %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 17 : index
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_add_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
                                               %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 1 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_add_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
                                                    %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 3 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_add_silu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
                                                    %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 9 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_conv2d_add_hard_swish_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
                                                    %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 17 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @match_pointwise_add_relu6_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %low = arith.constant dense<0.0> : tensor<1xf32>
        %high = arith.constant dense<6.0> : tensor<1xf32>
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
        %clip = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0)>,
                             affine_map<(d0, d1, d2, d3) -> (0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %low, %high : tensor<1x?x?x?xf32>, tensor<1xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %lo: f32, %hi: f32, %out: f32):
            %below = arith.cmpf ult, %in, %lo : f32
            %raised = arith.select %below, %lo, %in : f32
            %above = arith.cmpf ugt, %raised, %hi : f32
            %clipped = arith.select %above, %hi, %raised : f32
            linalg.yield %clipped : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_add_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
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

  transform.named_sequence @match_pointwise_add_silu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @silu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_pointwise_add_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_add_hard_swish_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @hard_swish_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_pointwise_add_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_add_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @relu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_pointwise_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_silu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @silu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_pointwise_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_hard_swish_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @hard_swish_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_pointwise_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_pointwise_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x1x1xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x1x1xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_add_relu6_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %low = arith.constant dense<0.0> : tensor<1xf32>
        %high = arith.constant dense<6.0> : tensor<1xf32>
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
        %clip = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0)>,
                             affine_map<(d0, d1, d2, d3) -> (0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %low, %high : tensor<1x?x?x?xf32>, tensor<1xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %lo: f32, %hi: f32, %out: f32):
            %below = arith.cmpf ult, %in, %lo : f32
            %raised = arith.select %below, %lo, %in : f32
            %above = arith.cmpf ugt, %raised, %hi : f32
            %clipped = arith.select %above, %hi, %raised : f32
            linalg.yield %clipped : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_add_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
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

  transform.named_sequence @match_conv2d_add_silu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @silu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_conv2d_add_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_add_hard_swish_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @hard_swish_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_conv2d_add_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_add_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %product = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @relu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_conv2d_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_silu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @silu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_conv2d_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_hard_swish_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @hard_swish_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_conv2d_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_conv2d_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_conv2d_add_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                            %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_add_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_add_silu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                            %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_add_silu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_add_hard_swish_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                            %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_add_hard_swish_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_add_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                       %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_add_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_silu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_silu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_hard_swish_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_hard_swish_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_conv2d_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                   %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_conv2d_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // Flags of halo_depthwise_conv2d_f32_v2: 1 adds the bias, 2 applies ReLU, 4 ReLU6, 8 SiLU, 16
  // hard-swish.
  util.func private @halo_depthwise_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>,
                                            %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 1 : index
    %r = util.call @halo_depthwise(%x, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>,
                                                 %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 3 : index
    %r = util.call @halo_depthwise(%x, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_silu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>,
                                                 %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 9 : index
    %r = util.call @halo_depthwise(%x, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_hard_swish_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>,
                                                 %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 17 : index
    %r = util.call @halo_depthwise(%x, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_relu6_sSTRIDE(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>,
                                                  %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 5 : index
    %r = util.call @halo_depthwise(%x, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  // ONNX's Clip(0, 6) as the importer writes it: its bounds are one-element constants.
  transform.named_sequence @match_depthwise_relu6_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %low = arith.constant dense<0.0> : tensor<1xf32>
        %high = arith.constant dense<6.0> : tensor<1xf32>
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x?xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %clip = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0)>,
                             affine_map<(d0, d1, d2, d3) -> (0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %low, %high : tensor<1x?x?x?xf32>, tensor<1xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %lo: f32, %hi: f32, %out: f32):
            %below = arith.cmpf ult, %in, %lo : f32
            %raised = arith.select %below, %lo, %in : f32
            %above = arith.cmpf ugt, %raised, %hi : f32
            %clipped = arith.select %above, %hi, %raised : f32
            linalg.yield %clipped : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_depthwise_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @relu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_depthwise_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_depthwise_silu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @silu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_depthwise_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_depthwise_hard_swish_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @hard_swish_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_depthwise_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_depthwise_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?xf32>, %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?xf32>, tensor<?x?x?xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @call_halo_depthwise_relu6_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_depthwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_depthwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_depthwise_relu6_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_depthwise_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_depthwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_depthwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_depthwise_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_depthwise_silu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_depthwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_depthwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_depthwise_silu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_depthwise_hard_swish_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_depthwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_depthwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_depthwise_hard_swish_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_depthwise_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_depthwise_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_depthwise into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_depthwise_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  util.func private @halo_depthwise_padded_relu6_sSTRIDE(%x: tensor<1x?x?x?xf32>, %padded: tensor<1x?x?x?xf32>,
      %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 5 : index
    %r = util.call @halo_depthwise_padded(%x, %padded, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_padded_relu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %padded: tensor<1x?x?x?xf32>,
      %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 3 : index
    %r = util.call @halo_depthwise_padded(%x, %padded, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_padded_silu_sSTRIDE(%x: tensor<1x?x?x?xf32>, %padded: tensor<1x?x?x?xf32>,
      %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 9 : index
    %r = util.call @halo_depthwise_padded(%x, %padded, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_padded_hard_swish_sSTRIDE(%x: tensor<1x?x?x?xf32>, %padded: tensor<1x?x?x?xf32>,
      %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 17 : index
    %r = util.call @halo_depthwise_padded(%x, %padded, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_depthwise_padded_sSTRIDE(%x: tensor<1x?x?x?xf32>, %padded: tensor<1x?x?x?xf32>,
      %w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %s = arith.constant STRIDE : index
    %flags = arith.constant 1 : index
    %r = util.call @halo_depthwise_padded(%x, %padded, %w, %bias, %s, %flags)
        : (tensor<1x?x?x?xf32>, tensor<1x?x?x?xf32>, tensor<?x?x?xf32>, tensor<?xf32>, index, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  // As @match_depthwise_relu6_sSTRIDE, the input padded by a tensor.pad (which a matcher can only
  // name; the call checks the rest).
  transform.named_sequence @match_depthwise_padded_relu6_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %low = arith.constant dense<0.0> : tensor<1xf32>
        %high = arith.constant dense<6.0> : tensor<1xf32>
        %c1 = arith.constant 1 : index
        %source = tensor.empty(%c1, %c1, %c1) : tensor<1x?x?x?xf32>
        %pad_value = arith.constant 0.0 : f32
        %padded = tensor.pad %source low[0, 0, 0, 0] high[0, 0, 0, 0] {
          ^bb1(%i: index, %j: index, %k: index, %l: index):
            tensor.yield %pad_value : f32
        } {match.operation_name_only} : tensor<1x?x?x?xf32> to tensor<1x?x?x?xf32>
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%padded, %w : tensor<1x?x?x?xf32>, tensor<?x?x?xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
        %clip = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (0)>,
                             affine_map<(d0, d1, d2, d3) -> (0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%conv, %low, %high : tensor<1x?x?x?xf32>, tensor<1xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %lo: f32, %hi: f32, %out: f32):
            %below = arith.cmpf ult, %in, %lo : f32
            %raised = arith.select %below, %lo, %in : f32
            %above = arith.cmpf ugt, %raised, %hi : f32
            %clipped = arith.select %above, %hi, %raised : f32
            linalg.yield %clipped : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  // Calls the kernel when @even_zero_padding_of accepts the pad; otherwise leaves the pad and the
  // convolution to the later passes.
  transform.named_sequence @call_halo_depthwise_padded_relu6_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    // A silenceable failure inside a sequence that suppresses them goes on to the next
    // operation; one inside a sequence that propagates them ends it, and the outer one
    // swallows it.
    transform.sequence %root : !transform.any_op failures(suppress) {
    ^bb0(%outer: !transform.any_op):
      transform.sequence %outer : !transform.any_op failures(propagate) {
      ^bb1(%r: !transform.any_op):
        %conv = transform.get_producer_of_operand %r[0] : (!transform.any_op) -> !transform.any_op
        %source, %padded = transform.include @even_zero_padding_of failures(propagate) (%conv)
            : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
        %args = transform.merge_handles %source, %padded, %ins : !transform.any_value
        %module = transform.util.get_nearest_symbol_table %r : (!transform.any_op) -> !transform.any_op
        %executable = transform.util.import_symbol @halo_depthwise_padded_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
        %helper = transform.util.import_symbol @halo_depthwise_padded into %module if undefined : (!transform.any_op) -> !transform.any_op
        %func = transform.util.import_symbol @halo_depthwise_padded_relu6_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
        transform.util.cast_and_call %func(%args) -> %out after %r {
          transform.type_conversion.tensor.cast_shape_dynamic_dims
        } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
      }
    }
    transform.yield
  }

  // As @match_depthwise_relu_sSTRIDE, the input padded by a tensor.pad (which a matcher can only
  // name; the call checks the rest).
  transform.named_sequence @match_depthwise_padded_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @relu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_depthwise_padded_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_depthwise_padded_silu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @silu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_depthwise_padded_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_depthwise_padded_hard_swish_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @hard_swish_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_depthwise_padded_sSTRIDE failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  // Calls the kernel when @even_zero_padding_of accepts the pad; otherwise leaves the pad and the
  // convolution to the later passes.
  transform.named_sequence @call_halo_depthwise_padded_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    // A silenceable failure inside a sequence that suppresses them goes on to the next
    // operation; one inside a sequence that propagates them ends it, and the outer one
    // swallows it.
    transform.sequence %root : !transform.any_op failures(suppress) {
    ^bb0(%outer: !transform.any_op):
      transform.sequence %outer : !transform.any_op failures(propagate) {
      ^bb1(%r: !transform.any_op):
        %conv = transform.get_producer_of_operand %r[0] : (!transform.any_op) -> !transform.any_op
        %source, %padded = transform.include @even_zero_padding_of failures(propagate) (%conv)
            : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
        %args = transform.merge_handles %source, %padded, %ins : !transform.any_value
        %module = transform.util.get_nearest_symbol_table %r : (!transform.any_op) -> !transform.any_op
        %executable = transform.util.import_symbol @halo_depthwise_padded_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
        %helper = transform.util.import_symbol @halo_depthwise_padded into %module if undefined : (!transform.any_op) -> !transform.any_op
        %func = transform.util.import_symbol @halo_depthwise_padded_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
        transform.util.cast_and_call %func(%args) -> %out after %r {
          transform.type_conversion.tensor.cast_shape_dynamic_dims
        } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
      }
    }
    transform.yield
  }

  transform.named_sequence @call_halo_depthwise_padded_silu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    // A silenceable failure inside a sequence that suppresses them goes on to the next
    // operation; one inside a sequence that propagates them ends it, and the outer one
    // swallows it.
    transform.sequence %root : !transform.any_op failures(suppress) {
    ^bb0(%outer: !transform.any_op):
      transform.sequence %outer : !transform.any_op failures(propagate) {
      ^bb1(%r: !transform.any_op):
        %conv = transform.get_producer_of_operand %r[0] : (!transform.any_op) -> !transform.any_op
        %source, %padded = transform.include @even_zero_padding_of failures(propagate) (%conv)
            : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
        %args = transform.merge_handles %source, %padded, %ins : !transform.any_value
        %module = transform.util.get_nearest_symbol_table %r : (!transform.any_op) -> !transform.any_op
        %executable = transform.util.import_symbol @halo_depthwise_padded_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
        %helper = transform.util.import_symbol @halo_depthwise_padded into %module if undefined : (!transform.any_op) -> !transform.any_op
        %func = transform.util.import_symbol @halo_depthwise_padded_silu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
        transform.util.cast_and_call %func(%args) -> %out after %r {
          transform.type_conversion.tensor.cast_shape_dynamic_dims
        } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
      }
    }
    transform.yield
  }

  transform.named_sequence @call_halo_depthwise_padded_hard_swish_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    // A silenceable failure inside a sequence that suppresses them goes on to the next
    // operation; one inside a sequence that propagates them ends it, and the outer one
    // swallows it.
    transform.sequence %root : !transform.any_op failures(suppress) {
    ^bb0(%outer: !transform.any_op):
      transform.sequence %outer : !transform.any_op failures(propagate) {
      ^bb1(%r: !transform.any_op):
        %conv = transform.get_producer_of_operand %r[1] : (!transform.any_op) -> !transform.any_op
        %source, %padded = transform.include @even_zero_padding_of failures(propagate) (%conv)
            : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
        %args = transform.merge_handles %source, %padded, %ins : !transform.any_value
        %module = transform.util.get_nearest_symbol_table %r : (!transform.any_op) -> !transform.any_op
        %executable = transform.util.import_symbol @halo_depthwise_padded_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
        %helper = transform.util.import_symbol @halo_depthwise_padded into %module if undefined : (!transform.any_op) -> !transform.any_op
        %func = transform.util.import_symbol @halo_depthwise_padded_hard_swish_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
        transform.util.cast_and_call %func(%args) -> %out after %r {
          transform.type_conversion.tensor.cast_shape_dynamic_dims
        } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
      }
    }
    transform.yield
  }

  // As @match_depthwise_sSTRIDE, the input padded by a tensor.pad (which a matcher can only
  // name; the call checks the rest).
  transform.named_sequence @match_depthwise_padded_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%w: tensor<?x?x?xf32>, %bias: tensor<?xf32>, %init: tensor<1x?x?x?xf32>):
        %c1 = arith.constant 1 : index
        %source = tensor.empty(%c1, %c1, %c1) : tensor<1x?x?x?xf32>
        %pad_value = arith.constant 0.0 : f32
        %padded = tensor.pad %source low[0, 0, 0, 0] high[0, 0, 0, 0] {
          ^bb1(%i: index, %j: index, %k: index, %l: index):
            tensor.yield %pad_value : f32
        } {match.operation_name_only} : tensor<1x?x?x?xf32> to tensor<1x?x?x?xf32>
        %biased = linalg.broadcast ins(%bias : tensor<?xf32>) outs(%init : tensor<1x?x?x?xf32>) dimensions = [0, 2, 3]
        %conv = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%padded, %w : tensor<1x?x?x?xf32>, tensor<?x?x?xf32>) outs(%biased : tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  // Calls the kernel when @even_zero_padding_of accepts the pad; otherwise leaves the pad and the
  // convolution to the later passes.
  transform.named_sequence @call_halo_depthwise_padded_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    // A silenceable failure inside a sequence that suppresses them goes on to the next
    // operation; one inside a sequence that propagates them ends it, and the outer one
    // swallows it.
    transform.sequence %root : !transform.any_op failures(suppress) {
    ^bb0(%outer: !transform.any_op):
      transform.sequence %outer : !transform.any_op failures(propagate) {
      ^bb1(%r: !transform.any_op):
        %conv = transform.merge_handles %r : !transform.any_op
        %source, %padded = transform.include @even_zero_padding_of failures(propagate) (%conv)
            : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
        %args = transform.merge_handles %source, %padded, %ins : !transform.any_value
        %module = transform.util.get_nearest_symbol_table %r : (!transform.any_op) -> !transform.any_op
        %executable = transform.util.import_symbol @halo_depthwise_padded_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
        %helper = transform.util.import_symbol @halo_depthwise_padded into %module if undefined : (!transform.any_op) -> !transform.any_op
        %func = transform.util.import_symbol @halo_depthwise_padded_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
        transform.util.cast_and_call %func(%args) -> %out after %r {
          transform.type_conversion.tensor.cast_shape_dynamic_dims
        } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
      }
    }
    transform.yield
  }


  // A grouped convolution in halo's graph rewrite's form: the input's and the output's channels
  // split into [G, C / G] around linalg.conv_2d_ngchw_gfchw (filters [G, F / G, C / G, KH, KW])
  // from zeros, its result's channels joined again, then a [1, F, 1, 1] bias added, and a ReLU
  // after that or not. The kernel takes the joined input and the filters as [F, C / G, KH, KW].
  transform.named_sequence @match_grouped_conv2d_add_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>, %groups_init: tensor<1x?x?x?x?xf32>,
           %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%groups_init : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %grouped = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %product = tensor.collapse_shape %grouped [[0], [1, 2], [3], [4]] : tensor<1x?x?x?x?xf32> into tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
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

  transform.named_sequence @match_grouped_conv2d_add_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>, %groups_init: tensor<1x?x?x?x?xf32>,
           %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%groups_init : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %grouped = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %product = tensor.collapse_shape %grouped [[0], [1, 2], [3], [4]] : tensor<1x?x?x?x?xf32> into tensor<1x?x?x?xf32>
        %conv = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>,
                             affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?x?xf32>, tensor<1x?x1x1xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %sum = arith.addf %in, %b : f32
            linalg.yield %sum : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  // @halo_conv2d_flags_sSTRIDE's work with the groups' axes joined.
  util.func private @halo_grouped_conv2d_flags_sSTRIDE(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %bias: tensor<?xf32>,
                                                        %flags: index) -> tensor<1x?x?x?xf32> {
    %joined = tensor.collapse_shape %x [[0], [1, 2], [3], [4]] : tensor<1x?x?x?x?xf32> into tensor<1x?x?x?xf32>
    %filters = tensor.collapse_shape %w [[0, 1], [2], [3], [4]] : tensor<?x?x?x?x?xf32> into tensor<?x?x?x?xf32>
    %r = util.call @halo_conv2d_flags_sSTRIDE(%joined, %filters, %bias, %flags)
        : (tensor<1x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  // Zeros for the bias binding of a convolution with none (its flags leave them unread).
  util.func private @halo_grouped_no_bias_sSTRIDE(%w: tensor<?x?x?x?x?xf32>) -> tensor<?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %zero = arith.constant 0.0 : f32
    %groups = tensor.dim %w, %c0 : tensor<?x?x?x?x?xf32>
    %per_group = tensor.dim %w, %c1 : tensor<?x?x?x?x?xf32>
    %f = arith.muli %groups, %per_group : index
    %empty = tensor.empty(%f) : tensor<?xf32>
    %zeros = linalg.fill ins(%zero : f32) outs(%empty : tensor<?xf32>) -> tensor<?xf32>
    util.return %zeros : tensor<?xf32>
  }

  util.func private @halo_grouped_conv2d_add_relu_sSTRIDE(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
      %groups_init: tensor<1x?x?x?x?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 3 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_grouped_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_grouped_conv2d_add_sSTRIDE(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %bias: tensor<1x?x1x1xf32>,
      %groups_init: tensor<1x?x?x?x?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 1 : index
    %b = tensor.collapse_shape %bias [[0, 1, 2, 3]] : tensor<1x?x1x1xf32> into tensor<?xf32>
    %r = util.call @halo_grouped_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_grouped_conv2d_add_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                                 %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %grouped = transform.util.import_symbol @halo_grouped_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_grouped_conv2d_add_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_grouped_conv2d_add_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                                 %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %grouped = transform.util.import_symbol @halo_grouped_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_grouped_conv2d_add_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // The same without a bias: the ReLU after the join, or nothing.
  transform.named_sequence @match_grouped_conv2d_relu_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %groups_init: tensor<1x?x?x?x?xf32>, %init: tensor<1x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%groups_init : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %grouped = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %product = tensor.collapse_shape %grouped [[0], [1, 2], [3], [4]] : tensor<1x?x?x?x?xf32> into tensor<1x?x?x?xf32>
        %relu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%product : tensor<1x?x?x?xf32>) outs(%init : tensor<1x?x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %positive = arith.cmpf ugt, %in, %zero : f32
            %kept = arith.select %positive, %in, %zero : f32
            linalg.yield %kept : f32
        } -> tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  transform.named_sequence @match_grouped_conv2d_sSTRIDE(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>, %groups_init: tensor<1x?x?x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %zeros = linalg.fill ins(%zero : f32) outs(%groups_init : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %grouped = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<STRIDE> : vector<2xi64>}
            ins(%x, %w : tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>) outs(%zeros : tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?x?xf32>
        %product = tensor.collapse_shape %grouped [[0], [1, 2], [3], [4]] : tensor<1x?x?x?x?xf32> into tensor<1x?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  util.func private @halo_grouped_conv2d_relu_sSTRIDE(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>,
      %groups_init: tensor<1x?x?x?x?xf32>, %init: tensor<1x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 2 : index
    %b = util.call @halo_grouped_no_bias_sSTRIDE(%w) : (tensor<?x?x?x?x?xf32>) -> tensor<?xf32>
    %r = util.call @halo_grouped_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  util.func private @halo_grouped_conv2d_sSTRIDE(%x: tensor<1x?x?x?x?xf32>, %w: tensor<?x?x?x?x?xf32>,
      %groups_init: tensor<1x?x?x?x?xf32>) -> tensor<1x?x?x?xf32> {
    %flags = arith.constant 0 : index
    %b = util.call @halo_grouped_no_bias_sSTRIDE(%w) : (tensor<?x?x?x?x?xf32>) -> tensor<?xf32>
    %r = util.call @halo_grouped_conv2d_flags_sSTRIDE(%x, %w, %b, %flags)
        : (tensor<1x?x?x?x?xf32>, tensor<?x?x?x?x?xf32>, tensor<?xf32>, index) -> tensor<1x?x?x?xf32>
    util.return %r : tensor<1x?x?x?xf32>
  }

  transform.named_sequence @call_halo_grouped_conv2d_relu_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                             %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %grouped = transform.util.import_symbol @halo_grouped_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %zeros = transform.util.import_symbol @halo_grouped_no_bias_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_grouped_conv2d_relu_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_grouped_conv2d_sSTRIDE(%ins: !transform.any_value {transform.readonly},
                                                             %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_conv2d_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %grouped = transform.util.import_symbol @halo_grouped_conv2d_flags_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %zeros = transform.util.import_symbol @halo_grouped_no_bias_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_grouped_conv2d_sSTRIDE into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }
// halo:per-stride end

  // A matmul with its bias (one per column) and ReLU, GELU or none: the matmul's 48 x 192 tiles,
  // the bias and activation fused (`halo_matmul_f32_v4`'s flags: 1 the bias, 2 ReLU, 128 GELU). The weights come packed by
  // @halo_dense: each workgroup's columns lie together, K rows of 192 (of what is left past the
  // last whole 192 for the last workgroup), so a tile reads one contiguous block instead of K
  // rows a whole matrix width apart (which at 4 KiB apart also fall into the same cache sets).
  stream.executable private @halo_dense_executable {
    stream.executable.export public @halo_dense_tile workgroups(%m: index, %n: index) -> (index, index, index) {
      %x = affine.apply affine_map<()[s0] -> (s0 ceildiv 192)>()[%n]
      %y = affine.apply affine_map<()[s0] -> (s0 ceildiv 48)>()[%m]
      %c1 = arith.constant 1 : index
      stream.return %y, %x, %c1 : index, index, index
    }
    builtin.module {
      func.func private @halo_matmul_f32_v4(memref<f32>, index, memref<f32>, index, memref<f32>, index,
          memref<f32>, index, index, index, index, index, index, index, index,
          memref<f32>, index, index) attributes {llvm.bareptr = true}
      func.func @halo_dense_tile(%ab: !stream.binding, %bb: !stream.binding, %biasb: !stream.binding,
                                 %cb: !stream.binding, %m: index, %n: index, %k: index, %flags: index) {
        %c0 = arith.constant 0 : index
        %id = stream.dispatch.workgroup.id[1] : index
        %idy = stream.dispatch.workgroup.id[0] : index
        %col = affine.apply affine_map<()[s0] -> (s0 * 192)>()[%id]
        %cols = affine.min affine_map<()[s0, s1] -> (192, s1 - s0 * 192)>()[%id, %n]
        %row = affine.apply affine_map<()[s0] -> (s0 * 48)>()[%idy]
        %rows = affine.min affine_map<()[s0, s1] -> (48, s1 - s0 * 48)>()[%idy, %m]
        %b_len = arith.muli %k, %n : index
        %a = stream.binding.subspan %ab[%c0] : !stream.binding -> memref<?x?xf32>{%m, %k}
        %b = stream.binding.subspan %bb[%c0] : !stream.binding -> memref<?xf32>{%b_len}
        %bias = stream.binding.subspan %biasb[%c0] : !stream.binding -> memref<?xf32>{%n}
        %c = stream.binding.subspan %cb[%c0] : !stream.binding -> memref<?x?xf32>{%m, %n}
        %ap, %ao, %as0, %as1, %at0, %at1 = iree_codegen.extract_strided_metadata %a
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %bp, %bo, %bs0, %bt0 = iree_codegen.extract_strided_metadata %b
            : memref<?xf32> -> memref<f32>, index, index, index
        %biasp, %biaso, %biass, %biast = iree_codegen.extract_strided_metadata %bias
            : memref<?xf32> -> memref<f32>, index, index, index
        %cp, %co, %cs0, %cs1, %ct0, %ct1 = iree_codegen.extract_strided_metadata %c
            : memref<?x?xf32> -> memref<f32>, index, index, index, index, index
        %a_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2)>()[%ao, %row, %at0]
        %b_tile = affine.apply affine_map<()[s0, s1, s2] -> (s0 + s1 * s2 * 192)>()[%bo, %id, %k]
        %bias_tile = arith.addi %biaso, %col : index
        %c_tile = affine.apply affine_map<()[s0, s1, s2, s3] -> (s0 + s1 * s2 + s3)>()[%co, %row, %ct0, %col]
        // No residual: the flags never ask for one, so its operands (`a` again) are not read.
        func.call @halo_matmul_f32_v4(%ap, %a_tile, %bp, %b_tile, %biasp, %bias_tile, %cp, %c_tile, %rows, %cols, %k, %at0, %cols, %ct0, %flags,
                                      %ap, %a_tile, %at0)
            : (memref<f32>, index, memref<f32>, index, memref<f32>, index, memref<f32>, index,
               index, index, index, index, index, index, index, memref<f32>, index, index) -> ()
        return
      }
    }
  }

  // The weights [K, N] packed by workgroup: the whole strips of 192 columns as [N / 192, K, 192],
  // then the last N % 192 columns as [K, N % 192], in one run of K * N floats. For a constant
  // matrix (a dense layer's weights) IREE evaluates the packing once, at compile time, which it
  // does only for a result no larger than its source by more than 1 MiB (a zero-padded last strip
  // of 2048 rows, ResNet-50's classifier, was larger and was packed on every call).
  util.func private @halo_dense(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %bias: tensor<?xf32>,
                                %flags: index) -> tensor<?x?xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %lhs, %c0 : tensor<?x?xf32>
    %k = tensor.dim %lhs, %c1 : tensor<?x?xf32>
    %n = tensor.dim %rhs, %c1 : tensor<?x?xf32>
    %whole = affine.apply affine_map<()[s0] -> (s0 floordiv 192)>()[%n]
    %head = affine.apply affine_map<()[s0] -> ((s0 floordiv 192) * 192)>()[%n]
    %rest = affine.apply affine_map<()[s0] -> (s0 mod 192)>()[%n]
    %left = tensor.extract_slice %rhs[0, 0] [%k, %head] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
    %strips = tensor.expand_shape %left [[0], [1, 2]] output_shape [%k, %whole, 192] : tensor<?x?xf32> into tensor<?x?x192xf32>
    %empty = tensor.empty(%whole, %k) : tensor<?x?x192xf32>
    %packed = linalg.transpose ins(%strips : tensor<?x?x192xf32>) outs(%empty : tensor<?x?x192xf32>) permutation = [1, 0, 2]
    %packed1 = tensor.collapse_shape %packed [[0, 1, 2]] : tensor<?x?x192xf32> into tensor<?xf32>
    %right = tensor.extract_slice %rhs[0, %head] [%k, %rest] [1, 1] : tensor<?x?xf32> to tensor<?x?xf32>
    %right1 = tensor.collapse_shape %right [[0, 1]] : tensor<?x?xf32> into tensor<?xf32>
    %b_len = arith.muli %k, %n : index
    %head_len = arith.muli %k, %head : index
    %rest_len = arith.muli %k, %rest : index
    %all = tensor.empty(%b_len) : tensor<?xf32>
    %b0 = tensor.insert_slice %packed1 into %all[0] [%head_len] [1] : tensor<?xf32> into tensor<?xf32>
    %b1 = tensor.insert_slice %right1 into %b0[%head_len] [%rest_len] [1] : tensor<?xf32> into tensor<?xf32>
    %r = flow.dispatch @halo_dense_executable::@halo_dense_tile[%m, %n](%lhs, %b1, %bias, %m, %n, %k, %flags)
        : (tensor<?x?xf32>{%m, %k}, tensor<?xf32>{%b_len}, tensor<?xf32>{%n}, index, index, index, index)
          -> tensor<?x?xf32>{%m, %n}
    util.return %r : tensor<?x?xf32>
  }

  // ONNX's MatMul, Add of a bias per column and Relu (a dense layer).
  transform.named_sequence @match_matmul_add_relu(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %bias: tensor<?xf32>, %init: tensor<?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<?x?xf32>) -> tensor<?x?xf32>
        %product = linalg.matmul ins(%lhs, %rhs : tensor<?x?xf32>, tensor<?x?xf32>)
            outs(%fill : tensor<?x?xf32>) -> tensor<?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
            iterator_types = ["parallel", "parallel"]}
            ins(%product, %bias : tensor<?x?xf32>, tensor<?xf32>) outs(%init : tensor<?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %added = arith.addf %in, %b : f32
            linalg.yield %added : f32
        } -> tensor<?x?xf32>
        %relu = linalg.generic {
            indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
            iterator_types = ["parallel", "parallel"]}
            ins(%sum : tensor<?x?xf32>) outs(%init : tensor<?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %positive = arith.cmpf ugt, %in, %zero : f32
            %kept = arith.select %positive, %in, %zero : f32
            linalg.yield %kept : f32
        } -> tensor<?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  // ONNX's MatMul and Add of a bias per column.
  transform.named_sequence @match_matmul_add(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %bias: tensor<?xf32>, %init: tensor<?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<?x?xf32>) -> tensor<?x?xf32>
        %product = linalg.matmul ins(%lhs, %rhs : tensor<?x?xf32>, tensor<?x?xf32>)
            outs(%fill : tensor<?x?xf32>) -> tensor<?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
            iterator_types = ["parallel", "parallel"]}
            ins(%product, %bias : tensor<?x?xf32>, tensor<?xf32>) outs(%init : tensor<?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %added = arith.addf %in, %b : f32
            linalg.yield %added : f32
        } -> tensor<?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  util.func private @halo_matmul_add_relu(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %bias: tensor<?xf32>,
                                          %init: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %flags = arith.constant 3 : index
    %r = util.call @halo_dense(%lhs, %rhs, %bias, %flags) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, index) -> tensor<?x?xf32>
    util.return %r : tensor<?x?xf32>
  }

  util.func private @halo_matmul_add(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %bias: tensor<?xf32>,
                                     %init: tensor<?x?xf32>) -> tensor<?x?xf32> {
    %flags = arith.constant 1 : index
    %r = util.call @halo_dense(%lhs, %rhs, %bias, %flags) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, index) -> tensor<?x?xf32>
    util.return %r : tensor<?x?xf32>
  }

  transform.named_sequence @call_halo_matmul_add_relu(%ins: !transform.any_value {transform.readonly},
                                                      %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_dense_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_dense into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_matmul_add_relu into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  transform.named_sequence @call_halo_matmul_add(%ins: !transform.any_value {transform.readonly},
                                                 %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_dense_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_dense into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_matmul_add into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // ONNX's MatMul of a [1, M, K] tensor by a [K, N] one (as a batch matmul of one against the
  // second broadcast) and Add of a bias per column: a transformer's projection.
  transform.named_sequence @match_batch1_matmul_add(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {
      ^bb0(%lhs: tensor<1x?x?xf32>, %w: tensor<?x?xf32>, %w_init: tensor<1x?x?xf32>, %bias: tensor<?xf32>,
           %init: tensor<1x?x?xf32>):
        %zero = arith.constant 0.0 : f32
        %rhs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                               iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%w : tensor<?x?xf32>) outs(%w_init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            linalg.yield %in : f32
        } -> tensor<1x?x?xf32>
        %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<1x?x?xf32>) -> tensor<1x?x?xf32>
        %product = linalg.batch_matmul ins(%lhs, %rhs : tensor<1x?x?xf32>, tensor<1x?x?xf32>)
            outs(%fill : tensor<1x?x?xf32>) -> tensor<1x?x?xf32>
        %sum = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>,
                             affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
            iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%product, %bias : tensor<1x?x?xf32>, tensor<?xf32>) outs(%init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %b: f32, %out: f32):
            %added = arith.addf %in, %b : f32
            linalg.yield %added : f32
        } -> tensor<1x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  util.func private @halo_batch1_matmul_add(%lhs: tensor<1x?x?xf32>, %w: tensor<?x?xf32>, %w_init: tensor<1x?x?xf32>,
                                            %bias: tensor<?xf32>, %init: tensor<1x?x?xf32>) -> tensor<1x?x?xf32> {
    %c1 = arith.constant 1 : index
    %m = tensor.dim %lhs, %c1 : tensor<1x?x?xf32>
    %n = tensor.dim %w, %c1 : tensor<?x?xf32>
    %lhs2 = tensor.collapse_shape %lhs [[0, 1], [2]] : tensor<1x?x?xf32> into tensor<?x?xf32>
    %r = util.call @halo_dense(%lhs2, %w, %bias, %c1) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, index) -> tensor<?x?xf32>
    %r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [1, %m, %n] : tensor<?x?xf32> into tensor<1x?x?xf32>
    util.return %r3 : tensor<1x?x?xf32>
  }

  transform.named_sequence @call_halo_batch1_matmul_add(%ins: !transform.any_value {transform.readonly},
                                                        %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_dense_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_dense into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_batch1_matmul_add into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // ONNX's MatMul of a [1, M, K] tensor by a [K, N] one, Add of a bias per column, then GELU: a
  // transformer's feed-forward layer.
  transform.named_sequence @match_batch1_matmul_add_gelu(%root: !transform.any_op {transform.readonly}) -> (!transform.any_value, !transform.any_value) {
    %producer, %outs = transform.include @gelu_input_of failures(propagate) (%root)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_value)
    %ins, %bare = transform.include @match_batch1_matmul_add failures(propagate) (%producer)
        : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    transform.yield %ins, %outs : !transform.any_value, !transform.any_value
  }

  util.func private @halo_batch1_matmul_add_gelu(%lhs: tensor<1x?x?xf32>, %w: tensor<?x?xf32>, %w_init: tensor<1x?x?xf32>,
                                                 %bias: tensor<?xf32>, %init: tensor<1x?x?xf32>) -> tensor<1x?x?xf32> {
    %c1 = arith.constant 1 : index
    %flags = arith.constant 129 : index
    %m = tensor.dim %lhs, %c1 : tensor<1x?x?xf32>
    %n = tensor.dim %w, %c1 : tensor<?x?xf32>
    %lhs2 = tensor.collapse_shape %lhs [[0, 1], [2]] : tensor<1x?x?xf32> into tensor<?x?xf32>
    %r = util.call @halo_dense(%lhs2, %w, %bias, %flags) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>, index) -> tensor<?x?xf32>
    %r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [1, %m, %n] : tensor<?x?xf32> into tensor<1x?x?xf32>
    util.return %r3 : tensor<1x?x?xf32>
  }

  transform.named_sequence @call_halo_batch1_matmul_add_gelu(%ins: !transform.any_value {transform.readonly},
                                                             %out: !transform.any_value {transform.readonly}) {
    %root = transform.get_defining_op %out : (!transform.any_value) -> !transform.any_op
    %module = transform.util.get_nearest_symbol_table %root : (!transform.any_op) -> !transform.any_op
    %executable = transform.util.import_symbol @halo_dense_executable into %module if undefined : (!transform.any_op) -> !transform.any_op
    %helper = transform.util.import_symbol @halo_dense into %module if undefined : (!transform.any_op) -> !transform.any_op
    %func = transform.util.import_symbol @halo_batch1_matmul_add_gelu into %module if undefined : (!transform.any_op) -> !transform.any_op
    transform.util.cast_and_call %func(%ins) -> %out after %root {
      transform.type_conversion.tensor.cast_shape_dynamic_dims
    } : (!transform.any_op, !transform.any_value, !transform.any_value, !transform.any_op) -> !transform.any_op
    transform.yield
  }

  // The value of [1, M, N] that `%half` takes GELU of (as the importer writes the Mul by 1/√2, Erf,
  // Add of 1, Mul by the value and Mul by 0.5 that torch exports for it, each an elementwise
  // generic, the constants one-element tensors), as the operation producing that value and the
  // result; a silenceable failure otherwise.
  transform.named_sequence @gelu_input_of(%half: !transform.any_op {transform.readonly}) -> (!transform.any_op, !transform.any_value) {
    %one = transform.param.constant 1 : i64 -> !transform.param<i64>
    %half_constant = transform.include @scalar_product_of failures(propagate) (%half) : (!transform.any_op) -> !transform.any_op
    %halves = transform.structured.match ops{["arith.constant"]} attributes {value = dense<0.5> : tensor<1xf32>} in %half_constant : (!transform.any_op) -> !transform.any_op
    %half_count = transform.num_associations %halves : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %half_count, %one : !transform.param<i64>
    %result = transform.get_result %half[0] : (!transform.any_op) -> !transform.any_value
    // x · (erf + 1)
    %halved = transform.get_producer_of_operand %half[0] : (!transform.any_op) -> !transform.any_op
    %factors, %gated = transform.iree.match.cast_compatible_dag_from_root %halved {
      ^bb0(%v: tensor<1x?x?xf32>, %gate: tensor<1x?x?xf32>, %init: tensor<1x?x?xf32>):
        %p = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                             affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
            iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%v, %gate : tensor<1x?x?xf32>, tensor<1x?x?xf32>) outs(%init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %g: f32, %out: f32):
            %x = arith.mulf %in, %g : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %producer = transform.get_producer_of_operand %halved[0] : (!transform.any_op) -> !transform.any_op
    // erf + 1
    %plus_one = transform.get_producer_of_operand %halved[1] : (!transform.any_op) -> !transform.any_op
    %one_constant = transform.include @scalar_sum_of failures(propagate) (%plus_one) : (!transform.any_op) -> !transform.any_op
    %ones = transform.structured.match ops{["arith.constant"]} attributes {value = dense<1.0> : tensor<1xf32>} in %one_constant : (!transform.any_op) -> !transform.any_op
    %one_count = transform.num_associations %ones : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %one_count, %one : !transform.param<i64>
    // erf(x · (1/√2))
    %erf = transform.get_producer_of_operand %plus_one[0] : (!transform.any_op) -> !transform.any_op
    %erf_ins, %erf_result = transform.iree.match.cast_compatible_dag_from_root %erf {
      ^bb0(%t: tensor<1x?x?xf32>, %init: tensor<1x?x?xf32>):
        %e = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
            iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%t : tensor<1x?x?xf32>) outs(%init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %out: f32):
            %x = math.erf %in : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %scaled = transform.get_producer_of_operand %erf[0] : (!transform.any_op) -> !transform.any_op
    %root_half_constant = transform.include @scalar_product_of failures(propagate) (%scaled) : (!transform.any_op) -> !transform.any_op
    %root_halves = transform.structured.match ops{["arith.constant"]} attributes {value = dense<0.707106769> : tensor<1xf32>} in %root_half_constant : (!transform.any_op) -> !transform.any_op
    %root_half_count = transform.num_associations %root_halves : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %root_half_count, %one : !transform.param<i64>
    // The value scaled is the one the gate multiplies.
    %source = transform.get_producer_of_operand %scaled[0] : (!transform.any_op) -> !transform.any_op
    %both = transform.merge_handles deduplicate %producer, %source : !transform.any_op
    %distinct = transform.num_associations %both : (!transform.any_op) -> !transform.param<i64>
    transform.match.param.cmpi eq %distinct, %one : !transform.param<i64>
    transform.yield %producer, %result : !transform.any_op, !transform.any_value
  }

  // The operation producing the one-element tensor that `%step` multiplies a [1, M, N] value by,
  // element by element; a silenceable failure when `%step` is not that product.
  transform.named_sequence @scalar_product_of(%step: !transform.any_op {transform.readonly}) -> !transform.any_op {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %step {
      ^bb0(%v: tensor<1x?x?xf32>, %c: tensor<1xf32>, %init: tensor<1x?x?xf32>):
        %p = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (0)>,
                             affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
            iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%v, %c : tensor<1x?x?xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %s: f32, %out: f32):
            %x = arith.mulf %in, %s : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %constant = transform.get_producer_of_operand %step[1] : (!transform.any_op) -> !transform.any_op
    transform.yield %constant : !transform.any_op
  }

  // As @scalar_product_of, for a sum.
  transform.named_sequence @scalar_sum_of(%step: !transform.any_op {transform.readonly}) -> !transform.any_op {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %step {
      ^bb0(%v: tensor<1x?x?xf32>, %c: tensor<1xf32>, %init: tensor<1x?x?xf32>):
        %p = linalg.generic {
            indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (0)>,
                             affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
            iterator_types = ["parallel", "parallel", "parallel"]}
            ins(%v, %c : tensor<1x?x?xf32>, tensor<1xf32>) outs(%init : tensor<1x?x?xf32>) {
          ^bb0(%in: f32, %s: f32, %out: f32):
            %x = arith.addf %in, %s : f32
            linalg.yield %x : f32
        } -> tensor<1x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %constant = transform.get_producer_of_operand %step[1] : (!transform.any_op) -> !transform.any_op
    transform.yield %constant : !transform.any_op
  }

  // Four passes: foreach_match tries the matchers on each operation in order of the function,
  // so in one pass a convolution or matmul would be taken alone before the activation or bias
  // after it is reached, and an operation whose call declines it is not tried again in the same
  // pass. The first takes the padded depthwise forms with an activation (before the unpadded
  // forms of the second could take the pad's result as their input), the second the other forms
  // with an activation (a 1x1 convolution's sum with another tensor before a ReLU among them),
  // the third the padded depthwise form without one, 1x1 convolutions summed with another tensor,
  // grouped convolutions with a bias (before the last pass's bare form could take their
  // convolution from under the bias) and matmuls with a bias, the last the rest (a padded
  // depthwise convolution the third declined among them).
  transform.named_sequence @__transform_main(%module: !transform.any_op) {
    %funcs_padded = transform.structured.match ops{["util.func"]} in %module : (!transform.any_op) -> !transform.any_op
    transform.foreach %funcs_padded : !transform.any_op {
      ^bb1(%func: !transform.any_op):
        transform.foreach_match in %func
// halo:per-stride-padded-matches begin
          @match_depthwise_padded_relu6_sSTRIDE -> @call_halo_depthwise_padded_relu6_sSTRIDE,
          @match_depthwise_padded_relu_sSTRIDE -> @call_halo_depthwise_padded_relu_sSTRIDE,
          @match_depthwise_padded_silu_sSTRIDE -> @call_halo_depthwise_padded_silu_sSTRIDE,
          @match_depthwise_padded_hard_swish_sSTRIDE -> @call_halo_depthwise_padded_hard_swish_sSTRIDE,
// halo:per-stride-padded-matches end
        : (!transform.any_op) -> (!transform.any_op)
    }
    transform.apply_dce to %module : !transform.any_op
    %funcs = transform.structured.match ops{["util.func"]} in %module : (!transform.any_op) -> !transform.any_op
    transform.foreach %funcs : !transform.any_op {
      ^bb1(%func: !transform.any_op):
        transform.foreach_match in %func
// halo:per-stride-matches begin
          @match_pointwise_add_residual_relu_sSTRIDE -> @call_halo_pointwise_add_residual_relu_sSTRIDE,
          @match_residual_add_pointwise_relu_sSTRIDE -> @call_halo_pointwise_add_residual_relu_sSTRIDE,
          @match_depthwise_relu6_sSTRIDE -> @call_halo_depthwise_relu6_sSTRIDE,
          @match_depthwise_relu_sSTRIDE -> @call_halo_depthwise_relu_sSTRIDE,
          @match_depthwise_silu_sSTRIDE -> @call_halo_depthwise_silu_sSTRIDE,
          @match_depthwise_hard_swish_sSTRIDE -> @call_halo_depthwise_hard_swish_sSTRIDE,
          @match_pointwise_add_relu6_sSTRIDE -> @call_halo_pointwise_add_relu6_sSTRIDE,
          @match_pointwise_add_relu_sSTRIDE -> @call_halo_pointwise_add_relu_sSTRIDE,
          @match_pointwise_add_silu_sSTRIDE -> @call_halo_pointwise_add_silu_sSTRIDE,
          @match_pointwise_add_hard_swish_sSTRIDE -> @call_halo_pointwise_add_hard_swish_sSTRIDE,
          @match_pointwise_relu_sSTRIDE -> @call_halo_pointwise_relu_sSTRIDE,
          @match_pointwise_silu_sSTRIDE -> @call_halo_pointwise_silu_sSTRIDE,
          @match_pointwise_hard_swish_sSTRIDE -> @call_halo_pointwise_hard_swish_sSTRIDE,
          @match_conv2d_add_relu6_sSTRIDE -> @call_halo_conv2d_add_relu6_sSTRIDE,
          @match_conv2d_add_relu_sSTRIDE -> @call_halo_conv2d_add_relu_sSTRIDE,
          @match_conv2d_add_silu_sSTRIDE -> @call_halo_conv2d_add_silu_sSTRIDE,
          @match_conv2d_add_hard_swish_sSTRIDE -> @call_halo_conv2d_add_hard_swish_sSTRIDE,
          @match_conv2d_relu_sSTRIDE -> @call_halo_conv2d_relu_sSTRIDE,
          @match_conv2d_silu_sSTRIDE -> @call_halo_conv2d_silu_sSTRIDE,
          @match_conv2d_hard_swish_sSTRIDE -> @call_halo_conv2d_hard_swish_sSTRIDE,
          @match_grouped_conv2d_add_relu_sSTRIDE -> @call_halo_grouped_conv2d_add_relu_sSTRIDE,
          @match_grouped_conv2d_relu_sSTRIDE -> @call_halo_grouped_conv2d_relu_sSTRIDE,
// halo:per-stride-matches end
          @match_matmul_add_relu -> @call_halo_matmul_add_relu,
          @match_batch1_matmul_add_gelu -> @call_halo_batch1_matmul_add_gelu
        : (!transform.any_op) -> (!transform.any_op)
    }
    transform.apply_dce to %module : !transform.any_op
    %funcs_biased = transform.structured.match ops{["util.func"]} in %module : (!transform.any_op) -> !transform.any_op
    transform.foreach %funcs_biased : !transform.any_op {
      ^bb1(%func: !transform.any_op):
        transform.foreach_match in %func
// halo:per-stride-later-matches begin
          @match_se_pointwise_add_residual_sSTRIDE -> @call_halo_se_pointwise_add_residual_sSTRIDE,
          @match_se_residual_add_pointwise_sSTRIDE -> @call_halo_se_pointwise_add_residual_sSTRIDE,
          @match_pointwise_add_residual_sSTRIDE -> @call_halo_pointwise_add_residual_sSTRIDE,
          @match_residual_add_pointwise_sSTRIDE -> @call_halo_pointwise_add_residual_sSTRIDE,
          @match_depthwise_padded_sSTRIDE -> @call_halo_depthwise_padded_sSTRIDE,
          @match_grouped_conv2d_add_sSTRIDE -> @call_halo_grouped_conv2d_add_sSTRIDE,
// halo:per-stride-later-matches end
          @match_matmul_add -> @call_halo_matmul_add,
          @match_batch1_matmul_add -> @call_halo_batch1_matmul_add
        : (!transform.any_op) -> (!transform.any_op)
    }
    transform.apply_dce to %module : !transform.any_op
    %funcs_left = transform.structured.match ops{["util.func"]} in %module : (!transform.any_op) -> !transform.any_op
    transform.foreach %funcs_left : !transform.any_op {
      ^bb1(%func: !transform.any_op):
        transform.foreach_match in %func
// halo:per-stride-plain-matches begin
          @match_depthwise_sSTRIDE -> @call_halo_depthwise_sSTRIDE,
          @match_se_pointwise_add_sSTRIDE -> @call_halo_se_pointwise_add_sSTRIDE,
          @match_pointwise_add_sSTRIDE -> @call_halo_pointwise_add_sSTRIDE,
          @match_pointwise_sSTRIDE -> @call_halo_pointwise_sSTRIDE,
          @match_conv2d_add_sSTRIDE -> @call_halo_conv2d_add_sSTRIDE,
          @match_conv2d_sSTRIDE -> @call_halo_conv2d_sSTRIDE,
          @match_grouped_conv2d_sSTRIDE -> @call_halo_grouped_conv2d_sSTRIDE,
// halo:per-stride-plain-matches end
          @match_matmul -> @call_halo_matmul,
          @match_batch1_matmul -> @call_halo_batch1_matmul,
          @match_batch_matmul -> @call_halo_batch_matmul,
          @match_scaled_softmax -> @call_halo_scaled_softmax,
          @match_global_sum -> @call_halo_global_sum
        : (!transform.any_op) -> (!transform.any_op)
    }
    transform.apply_dce to %module : !transform.any_op
    transform.apply_registered_pass "inline" to %module : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
