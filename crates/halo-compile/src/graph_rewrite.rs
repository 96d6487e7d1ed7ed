//! Changes made to an ONNX graph before it is imported, where IREE 3.13 compiles an operator to
//! much slower code than an equivalent form of it.
//!
//! Depthwise convolutions (one 3×3 or 5×5 filter per channel, as MobileNet, ShuffleNet and
//! EfficientNet have): IREE
//! turns ONNX's NCHW depthwise `Conv` into code that runs at scalar speed (iree-org/iree#10635),
//! with or without im2col or a channels-last layout. The same sum written as shifted slices of
//! the padded input, each scaled per channel, becomes elementwise dispatches that IREE fuses and
//! vectorizes along the image rows. On a 2-core AMD EPYC (AVX2; `iree-benchmark-module`, one
//! operator, `fast-o3` flags) that took 32×112×112 from 7.2 to 0.55 ms, 192×28×28 from 2.3 to
//! 0.61 ms and 576×14×14 from 1.4 to 0.61 ms; the full MobileNet-v2 went from 23.5 to 17.5 ms per
//! call. A stride-2 convolution takes every other row in its windows and subsamples the columns of
//! the sum (see [`MAX_STRIDE`]): windows strided within a row would not vectorize. With
//! EfficientNet-B0's 5×5 ones rewritten too (25 taps in four chains), it took 13.4 ms per call
//! instead of 17.9 (3 alternating runs, 2-core EPYC; the graph then compiles with `fast`, since
//! iree-compile refuses `O3` for it over a stack limit, which measured no faster anyway).
//!
//! Narrowing convolutions (a 3×3 filter over at least twice as many input channels as it has
//! outputs, as each of DenseNet's layers has): with im2col, IREE copies the input nine times
//! over before its matmul, and that copy runs at a few GB/s. The same convolution is one 1×1
//! convolution (a plain matmul) to one group of output channels per filter tap, whose groups,
//! shifted by their tap, add up to the result: the matmul does the same arithmetic, and the
//! nine-fold data is the narrower output's. See [`MAX_NARROWING`] for what that measured.
//!
//! Other unit-stride convolutions of one group (ResNet's and SqueezeNet's 3×3 layers): IREE's
//! im2col op itself is the slow part, so the rewrite writes the same copy as ONNX, the taps'
//! shifted windows concatenated along the channels, which IREE compiles to row-wise copies,
//! followed by one 1×1 convolution. Paired whole-process runs of `halo benchmark-module` against
//! IREE's im2col: SqueezeNet 0.81×, ResNet-50 0.88× the wall time. Strided and 7×7 convolutions
//! written the same way (strided windows) measured 1.00× on both, so they are left to IREE.
//!
//! Grouped convolutions (ResNeXt's 32 groups of 4 to 32 channels, 3×3, stride 1 or 2): IREE
//! 3.13 dispatches one as a grid of which only the first workgroups compute, each at scalar
//! speed, and they took half of ResNeXt-50's time. The same convolution is one batched matmul,
//! group by group, over the taps' windows split into groups (see [`grouped_windows_product`]).
//! One convolution at a time (`halo benchmark-module`, `fast-o3`, host CPU, 2-core EPYC, ms per
//! call, ResNeXt-50's shapes as channels×side/stride): 128×56 3.75 → 2.5, 256×28 5.1 → 1.4,
//! 512×14 3.3 → 0.9, 1024×7 3.1 → 0.6, 256×56/2 5.2 → 2.0, 512×28/2 5.2 → 1.2, 1024×14/2 3.1 →
//! 0.76; the whole ResNeXt-50, 120 → 68 ms per call. With halo's kernels they stay
//! convolutions (their bias separated), which the convolution kernel computes group by group
//! without copying the windows.
//!
//! Max pools: IREE compiles them to a scalar loop nest too; the largest of the windows, strided
//! as a depthwise convolution's, vectorizes (see [`max_of_windows`]).
//!
//! An average pool after a 1×1 convolution (DenseNet's transitions) is computed before it: both
//! are linear, so they commute, and the convolution then runs over a quarter of the pixels (see
//! [`pools_after_pointwise_convolutions`]).

use crate::kernels::KernelUse;
use crate::onnx::attribute_proto::AttributeType;
use crate::onnx::{tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto};
use halo_hal::Error;
use prost::Message;
use std::collections::{HashMap, HashSet};

/// A change made to an ONNX graph before import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GraphRewrite {
    /// The graph as given.
    None,
    /// Depthwise convolutions with filters up to 5×5 and strides up to 2 become sums of
    /// per-channel-scaled shifted slices of their padded input (subsampled when strided).
    DepthwiseAsShifts,
    /// What [`GraphRewrite::DepthwiseAsShifts`] does, and unit-stride convolutions of one group
    /// with filters up to 3×3 become 1×1 convolutions: narrowing ones to one channel group per
    /// filter tap, whose shifted groups are summed; the others over their input's shifted
    /// windows, concatenated along the channels. Grouped convolutions with filters up to 3×3 and
    /// strides up to 2 become one batched matmul over their windows, group by group. The other
    /// convolutions of one group add their
    /// bias after them, max pools (padded ones only over a `Relu`'s values) become the largest
    /// of their windows, and average pools run before the 1×1 convolutions they follow.
    ConvolutionsAsShifts,
}

impl GraphRewrite {
    /// Every rewrite, in the order the CLI lists them.
    pub const ALL: [GraphRewrite; 3] = [
        GraphRewrite::None,
        GraphRewrite::DepthwiseAsShifts,
        GraphRewrite::ConvolutionsAsShifts,
    ];

    /// The name reports and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            GraphRewrite::None => "none",
            GraphRewrite::DepthwiseAsShifts => "depthwise-as-shifts",
            GraphRewrite::ConvolutionsAsShifts => "convolutions-as-shifts",
        }
    }

    /// The rewrite called `name`.
    ///
    /// # Errors
    /// `InvalidArgument` listing the known names.
    pub fn from_name(name: &str) -> halo_hal::Result<GraphRewrite> {
        Self::ALL.into_iter().find(|r| r.name() == name).ok_or_else(|| {
            let known: Vec<_> = Self::ALL.iter().map(|r| r.name()).collect();
            Error::invalid_argument(format!(
                "unknown graph rewrite '{name}'; known rewrites: {}",
                known.join(", ")
            ))
        })
    }
}

/// An ONNX model after a rewrite.
#[derive(Debug)]
pub(crate) struct Rewritten {
    /// The model, encoded.
    pub bytes: Vec<u8>,
    /// How many nodes were replaced.
    pub nodes: usize,
    /// The rewrite that made the same graph with the least: [`GraphRewrite::DepthwiseAsShifts`]
    /// when [`GraphRewrite::ConvolutionsAsShifts`] found only depthwise convolutions.
    pub rewrite: GraphRewrite,
}

/// Rewrites ONNX model `bytes`; `None` when the rewrite changes nothing: no node qualifies, the
/// model does not decode (the importer will say why), its operator set predates the node forms
/// the rewrite writes (opset 11), or its weights live in external files, which a rewritten copy
/// elsewhere could not find. With [`KernelUse::HaloKernels`], unit-stride convolutions of one
/// group and grouped convolutions with a bias keep their form (their bias separated), for halo's
/// convolution kernel to take.
pub(crate) fn rewrite(bytes: &[u8], rewrite: GraphRewrite, kernels: KernelUse) -> Option<Rewritten> {
    if rewrite == GraphRewrite::None {
        return None;
    }
    let mut model = ModelProto::decode(bytes).ok()?;
    if default_opset(&model).is_none_or(|version| version < MIN_OPSET) || has_external_data(&model) {
        return None;
    }
    let graph = model.graph.as_mut()?;
    let count = decompose_convolutions(graph, rewrite, kernels);
    let nodes = count.depthwise + count.other;
    (nodes > 0).then(|| Rewritten {
        bytes: model.encode_to_vec(),
        nodes,
        rewrite: if count.other > 0 {
            GraphRewrite::ConvolutionsAsShifts
        } else {
            GraphRewrite::DepthwiseAsShifts
        },
    })
}

/// `Pad` with its pads as an input and `Slice` with starts, ends and axes as inputs.
const MIN_OPSET: i64 = 11;

fn default_opset(model: &ModelProto) -> Option<i64> {
    model
        .opset_import
        .iter()
        .find(|opset| matches!(opset.domain(), "" | "ai.onnx"))
        .map(|opset| opset.version())
}

/// `TensorProto.data_location = EXTERNAL`.
const EXTERNAL_DATA: i32 = 1;

fn has_external_data(model: &ModelProto) -> bool {
    model
        .graph
        .iter()
        .flat_map(|graph| &graph.initializer)
        .any(|tensor| tensor.data_location == Some(EXTERNAL_DATA))
}

/// The largest filter side rewritten: 3×3 is what was measured, and larger filters make many
/// more operands than IREE fuses into one dispatch (it splits above 16).
const MAX_KERNEL_SIDE: i64 = 3;

/// The largest filter side of a rewritten depthwise convolution: EfficientNet's 5×5 ones, whose
/// 25 taps are summed in chains of at most [`MAX_FUSED_DEPTHWISE_TAPS`].
const MAX_DEPTHWISE_KERNEL_SIDE: i64 = 5;

/// The largest stride of a rewritten depthwise convolution. A stride-2 convolution takes every
/// other row in its windows, which keeps each row contiguous, and is computed for every column
/// and then subsampled: twice the arithmetic, but vectorized. Computed at stride 1 in both
/// directions (four times the arithmetic), MobileNet-v2's shapes (halo benchmark-module, one
/// operator) took 96×112×112 from 4.2 to 2.2 ms and 144×56×56 from 0.85 to 0.4 ms, 192×28×28
/// stayed at 0.45 ms and 576×14×14 went from 0.26 to 0.35 ms; whole programs of 40 calls
/// (paired runs, whole process): MobileNet-v2 0.96× the time of the stride-1-only rewrite,
/// ShuffleNet v2 1.00×. Taking every other row on top (10 alternating runs of 40 calls, per
/// call, 2-core Xeon): MobileNet-v2 0.94×, ShuffleNet v2 0.96×, and 4.6 MiB less peak memory.
const MAX_STRIDE: i64 = 2;

/// The most taps of a depthwise convolution summed in one chain. IREE 3.13 fuses at most 16
/// operands into one dispatch, and each depthwise tap brings two (its window and its scale): of
/// a 3×3 filter's nine taps in one chain it fused six, and computed the other three as products
/// of their own, each written to memory and read back. Summed as two chains of five and four
/// taps, each chain is one dispatch and only the first one's sum is written: MobileNet-v2 took
/// 0.87× the time per call (10 alternating runs of 40 calls, 2-core Xeon). A 5×5 filter's 25
/// taps go in four chains (7, 7, 7, 4).
const MAX_FUSED_DEPTHWISE_TAPS: usize = 7;

/// A convolution is narrowing when it has at most 1/`MAX_NARROWING` as many output channels as
/// input channels. One 3×3 convolution at a time (halo benchmark-module, `fast-o3` flags, host
/// CPU; input→output channels at a side of the image), IREE's im2col against output shifts:
/// DenseNet's 128→32 took 5.7–6.8 ms against 3.1–3.3 at 56, 2.5 against 0.84–0.95 at 28, 1.0
/// against 0.30 at 14 and 0.33 against 0.11 at 7; half as many outputs, 64→32 at 56, 128→64 at
/// 28 and 256→128 at 14, gained 1.3–1.6×; as many (ResNet's 64→64 at 56 up to 512→512 at 7)
/// went either way within noise, and more (SqueezeNet's 16→64 at 55, 32→128 at 27, 64→256 at
/// 13) lost 1.15–1.5×. Concatenated input windows lost to output shifts on 128→32 at 56 (4.2–5.5
/// against 2.1–3.0 ms).
const MAX_NARROWING: i64 = 2;

/// What a rewritten convolution is.
#[derive(Clone, Copy)]
pub(crate) enum ConvolutionKind {
    /// One filter per channel.
    Depthwise,
    /// One group, `outputs` output channels, at most 1/[`MAX_NARROWING`] of its `inputs`.
    Narrowing { outputs: i64, inputs: i64 },
    /// One group, `outputs` output channels, more than 1/[`MAX_NARROWING`] of its inputs.
    Dense { outputs: i64 },
    /// `groups` groups (more than one, and not one filter per channel), `outputs` output
    /// channels in all.
    Grouped { groups: i64, outputs: i64 },
}

/// A convolution the rewrite can replace.
struct Convolution<'a> {
    kind: ConvolutionKind,
    input: &'a str,
    weight: &'a str,
    bias: Option<&'a str>,
    output: &'a str,
    /// Filter height and width.
    kernel: [i64; 2],
    /// Top, left, bottom, right.
    pads: [i64; 4],
    /// Row and column strides.
    strides: [i64; 2],
}

/// The window a filter or pool slides over an image: its height and width, and its row and
/// column strides.
#[derive(Clone, Copy)]
struct Sliding {
    kernel: [i64; 2],
    strides: [i64; 2],
}

impl<'a> Convolution<'a> {
    fn sliding(&self) -> Sliding {
        Sliding {
            kernel: self.kernel,
            strides: self.strides,
        }
    }

    /// `node` as a convolution `rewrite` replaces: unit dilations, explicit pads, filters up to
    /// [`MAX_KERNEL_SIDE`], and a filter whose shape in `weights` makes it depthwise (strides
    /// up to [`MAX_STRIDE`]) or, under [`GraphRewrite::ConvolutionsAsShifts`], one group and
    /// more than one tap (unit strides).
    fn of(node: &'a NodeProto, weights: &HashMap<&str, &[i64]>, rewrite: GraphRewrite) -> Option<Convolution<'a>> {
        if node.op_type() != "Conv" || !matches!(node.domain(), "" | "ai.onnx") || node.output.len() != 1 {
            return None;
        }
        let input = node.input.first().filter(|name| !name.is_empty())?;
        let weight = node.input.get(1)?;
        let &[outputs, inputs_per_group, height, width] = *weights.get(weight.as_str())? else {
            return None;
        };
        // Dimensions come from the file: bounded before any arithmetic on them.
        if ![height, width]
            .iter()
            .all(|side| (1..=MAX_DEPTHWISE_KERNEL_SIDE).contains(side))
        {
            return None;
        }
        let ints = |name: &str| ints_of(node, name);
        let group = int_of(node, "group", 1);
        let kind = if outputs > 1 && inputs_per_group == 1 && group == outputs {
            ConvolutionKind::Depthwise
        } else if rewrite != GraphRewrite::ConvolutionsAsShifts
            || height > MAX_KERNEL_SIDE
            || width > MAX_KERNEL_SIDE
            || group < 1
            || inputs_per_group < 1
            || height * width == 1
            // The 1×1 convolution of a narrowing one has this many output channels.
            || outputs.checked_mul(height * width).is_none_or(|channels| channels < 1)
        {
            return None;
        } else if group > 1 {
            if outputs % group != 0 {
                return None;
            }
            ConvolutionKind::Grouped { groups: group, outputs }
        } else if inputs_per_group >= MAX_NARROWING.saturating_mul(outputs) {
            ConvolutionKind::Narrowing {
                outputs,
                inputs: inputs_per_group,
            }
        } else {
            ConvolutionKind::Dense { outputs }
        };
        let max_stride = match kind {
            ConvolutionKind::Depthwise | ConvolutionKind::Grouped { .. } => MAX_STRIDE,
            ConvolutionKind::Narrowing { .. } | ConvolutionKind::Dense { .. } => 1,
        };
        let strides = match ints("strides") {
            None => [1, 1],
            Some(&[rows, columns]) if [rows, columns].iter().all(|s| (1..=max_stride).contains(s)) => [rows, columns],
            Some(_) => return None,
        };
        let pads = match ints("pads") {
            None => [0; 4],
            Some(&[top, left, bottom, right]) if [top, left, bottom, right].iter().all(|&p| p >= 0) => {
                [top, left, bottom, right]
            }
            Some(_) => return None,
        };
        let all_ones = |values: Option<&[i64]>| values.is_none_or(|v| v.len() == 2 && v.iter().all(|&x| x == 1));
        let auto_pad = node.attribute.iter().find(|a| a.name() == "auto_pad").map(|a| a.s());
        let plain = all_ones(ints("dilations"))
            && auto_pad.is_none_or(|mode| mode == b"NOTSET")
            && ints("kernel_shape").is_none_or(|k| k == [height, width]);
        plain.then(|| Convolution {
            kind,
            input,
            weight,
            bias: node.input.get(2).map(String::as_str).filter(|name| !name.is_empty()),
            output: &node.output[0],
            kernel: [height, width],
            pads,
            strides,
        })
    }
}

/// A max pool the rewrite replaces (see [`max_of_windows`]).
struct MaxPool<'a> {
    input: &'a str,
    output: &'a str,
    sliding: Sliding,
    /// Top, left, bottom, right: zeros, which only a pool of values known not to be negative
    /// may have.
    pads: [i64; 4],
}

impl<'a> MaxPool<'a> {
    /// `node` as a max pool over images: two spatial axes, more than one tap, sides up to
    /// [`MAX_KERNEL_SIDE`], strides up to [`MAX_STRIDE`], unit dilations, floor rounding, no
    /// indices output, and no padding unless its input is in `rectified` (never negative: a
    /// `Relu`'s value, as the pools after CNN stems pool, or a join or pool of such values only,
    /// as GoogLeNet's modules pool; see [`never_negative`]). Other padded pools would need their
    /// pad value (the element type's lowest) or an edge pad, which lost 1.12× on ShuffleNet v2.
    fn of(node: &'a NodeProto, rectified: &HashSet<&str>) -> Option<MaxPool<'a>> {
        if node.op_type() != "MaxPool" || !matches!(node.domain(), "" | "ai.onnx") || node.output.len() != 1 {
            return None;
        }
        let input = node.input.first().filter(|name| !name.is_empty())?;
        let pair = |name: &str, default: [i64; 2]| match ints_of(node, name) {
            None => Some(default),
            Some(&[rows, columns]) => Some([rows, columns]),
            Some(_) => None,
        };
        let kernel = pair("kernel_shape", [0, 0])?;
        let strides = pair("strides", [1, 1])?;
        let pads = match ints_of(node, "pads") {
            None => [0; 4],
            Some(&[top, left, bottom, right]) => [top, left, bottom, right],
            Some(_) => return None,
        };
        // A window of zero padding and values that are not negative has the largest value a
        // window padded with -inf has, as long as every window holds a value (pads < sides).
        let [height, width] = kernel;
        let pads_fit = pads == [0; 4]
            || (rectified.contains(input.as_str())
                && pads
                    .iter()
                    .zip([height, width, height, width])
                    .all(|(&pad, side)| (0..side).contains(&pad)));
        let plain = pads_fit
            && pads_as_given(node)
            && pair("dilations", [1, 1])? == [1, 1]
            && int_of(node, "ceil_mode", 0) == 0
            && kernel.iter().all(|side| (1..=MAX_KERNEL_SIDE).contains(side))
            && kernel != [1, 1]
            && strides.iter().all(|stride| (1..=MAX_STRIDE).contains(stride));
        plain.then(|| MaxPool {
            input,
            output: &node.output[0],
            sliding: Sliding { kernel, strides },
            pads,
        })
    }
}

/// How many convolutions of each kind a rewrite replaced.
#[derive(Default)]
struct Replaced {
    depthwise: usize,
    /// Narrowing and dense, those whose bias was moved after them, max pools, and average pools
    /// moved before their convolution.
    other: usize,
}

/// Replaces every convolution of `graph` (not of its subgraphs) that `rewrite` covers, in place.
fn decompose_convolutions(graph: &mut GraphProto, rewrite: GraphRewrite, kernels: KernelUse) -> Replaced {
    let weights: HashMap<&str, &[i64]> = graph
        .initializer
        .iter()
        .map(|tensor| (tensor.name(), tensor.dims.as_slice()))
        .collect();
    let rectified = never_negative(graph);
    let pooled_first = match rewrite {
        GraphRewrite::ConvolutionsAsShifts => pools_after_pointwise_convolutions(graph, &weights),
        _ => HashMap::new(),
    };
    let mut names = NameSource::of(graph);
    let mut replaced = Replaced::default();
    let mut nodes = Vec::with_capacity(graph.node.len());
    for node in &graph.node {
        let moved_after_its_pool =
            node.op_type() == "Conv" && node.output.iter().any(|o| pooled_first.contains_key(o.as_str()));
        if moved_after_its_pool {
            continue;
        }
        let pool_input = node.input.first().map(String::as_str).unwrap_or_default();
        if let Some(&conv) = pooled_first.get(pool_input).filter(|_| node.op_type() == "AveragePool") {
            nodes.extend(pooled_first_nodes(node, conv, &weights, &mut names));
            replaced.other += 1;
        } else if let Some(conv) = Convolution::of(node, &weights, rewrite)
            .filter(|conv| !kernels.takes(conv.kind, conv.strides, conv.bias.is_some()))
        {
            nodes.extend(replacement(&conv, &mut names));
            match conv.kind {
                ConvolutionKind::Depthwise => replaced.depthwise += 1,
                ConvolutionKind::Narrowing { .. } | ConvolutionKind::Dense { .. } | ConvolutionKind::Grouped { .. } => {
                    replaced.other += 1
                }
            }
        } else if let Some(separated) = (rewrite == GraphRewrite::ConvolutionsAsShifts)
            .then(|| {
                bias_separated(node, &weights, &mut names).or_else(|| max_of_windows(node, &rectified, &mut names))
            })
            .flatten()
        {
            nodes.extend(separated);
            replaced.other += 1;
        } else {
            nodes.push(node.clone());
        }
    }
    graph.node = nodes;
    replaced
}

/// The nodes computing `conv`, the last under the convolution's output name.
fn replacement(conv: &Convolution, names: &mut NameSource) -> Vec<NodeProto> {
    let prefix = match conv.kind {
        ConvolutionKind::Depthwise => "halo_depthwise",
        ConvolutionKind::Narrowing { .. } => "halo_narrowing",
        ConvolutionKind::Dense { .. } => "halo_windows",
        ConvolutionKind::Grouped { .. } => "halo_grouped",
    };
    let mut out = NodeWriter {
        nodes: Vec::new(),
        names,
        prefix: format!("{}.{prefix}", conv.output),
    };
    match conv.kind {
        ConvolutionKind::Dense { outputs } => windows_as_channels(conv, outputs, &mut out),
        ConvolutionKind::Grouped { groups, outputs } => grouped_windows_product(conv, groups, outputs, &mut out),
        ConvolutionKind::Depthwise | ConvolutionKind::Narrowing { .. } => shifted_sum(conv, &mut out),
    }
    if let Some(last) = out.nodes.last_mut() {
        last.output = vec![conv.output.to_string()];
    }
    out.nodes
}

/// `value` padded with zeros by `pads` (top, left, bottom, right: rows and columns of its last
/// two axes).
fn padded(pads: [i64; 4], value: String, out: &mut NodeWriter) -> String {
    if pads == [0; 4] {
        return value;
    }
    let [top, left, bottom, right] = pads;
    let pads = out.constant("pads", &[0, 0, top, left, 0, 0, bottom, right]);
    out.node("Pad", &[&value, &pads], "padded")
}

/// The window of `padded` that tap (i, j) of `sliding` reads: it starts i rows and j
/// columns in and stops `height - 1 - i` rows and `width - 1 - j` columns before the end, taking
/// every row-stride-th row; with `channels`, only that range of channels (`axes` then names axes
/// 1, 2 and 3, else 2 and 3).
fn window(
    sliding: Sliding,
    padded: &str,
    [i, j]: [i64; 2],
    channels: Option<[i64; 2]>,
    axes: &str,
    out: &mut NodeWriter,
) -> String {
    let tap = format!("tap{i}_{j}");
    let [height, width] = sliding.kernel;
    let mut starts = vec![i, j];
    let mut ends = vec![end_before(height - 1 - i), end_before(width - 1 - j)];
    if let Some([first, end]) = channels {
        starts.insert(0, first);
        ends.insert(0, end);
    }
    let starts = out.constant(&format!("{tap}.starts"), &starts);
    let ends = out.constant(&format!("{tap}.ends"), &ends);
    let row_stride = sliding.strides[0];
    let steps = (row_stride != 1).then(|| {
        let steps = if channels.is_some() {
            vec![1, row_stride, 1]
        } else {
            vec![row_stride, 1]
        };
        out.constant(&format!("{tap}.steps"), &steps)
    });
    let mut inputs = vec![padded, &starts, &ends, axes];
    inputs.extend(steps.as_deref());
    out.node("Slice", &inputs, &format!("{tap}.window"))
}

/// Every tap's window (see [`window`]) of `input` padded with zeros by `pads`, row by row.
fn padded_windows(input: &str, pads: [i64; 4], sliding: Sliding, out: &mut NodeWriter) -> Vec<String> {
    let padded = padded(pads, input.to_string(), out);
    let spatial = out.constant("axes", &[2, 3]);
    taps(sliding)
        .map(|tap| window(sliding, &padded, tap, None, &spatial, out))
        .collect()
}

/// The taps of `sliding`, row by row.
fn taps(sliding: Sliding) -> impl Iterator<Item = [i64; 2]> {
    let [height, width] = sliding.kernel;
    (0..height).flat_map(move |i| (0..width).map(move |j| [i, j]))
}

/// `conv` as a sum over its filter taps (i, j) of shifted windows:
/// - depthwise: w[:, 0, i, j] · pad(x)[:, :, i.., j..];
/// - narrowing: pad(z)[:, group (i, j), i.., j..], where the 1×1 convolution z = w' ∗ x has one
///   group of output channels per tap, w'[group (i, j)] = w[:, :, i, j].
fn shifted_sum(conv: &Convolution, out: &mut NodeWriter) {
    let shifted = match conv.kind {
        ConvolutionKind::Narrowing { inputs, .. } => {
            let taps_first = out.node_with("Transpose", &[conv.weight], "taps_first", ints("perm", &[2, 3, 0, 1]));
            let shape = out.constant("per_tap_shape", &[-1, inputs, 1, 1]);
            let filter = out.node("Reshape", &[&taps_first, &shape], "per_tap_filter");
            out.node("Conv", &[conv.input, &filter], "per_tap")
        }
        _ => conv.input.to_string(),
    };
    let padded = padded(conv.pads, shifted, out);
    let spatial = out.constant("axes", &[2, 3]);
    let per_channel = per_channel_shape(2, out);
    let mut terms = Vec::new();
    for [i, j] in taps(conv.sliding()) {
        let tap = format!("tap{i}_{j}");
        let term = match conv.kind {
            ConvolutionKind::Narrowing { outputs, .. } => {
                let group = (i * conv.kernel[1] + j) * outputs;
                let axes = out.constant(&format!("{tap}.axes"), &[1, 2, 3]);
                window(
                    conv.sliding(),
                    &padded,
                    [i, j],
                    Some([group, group + outputs]),
                    &axes,
                    out,
                )
            }
            _ => {
                let window = window(conv.sliding(), &padded, [i, j], None, &spatial, out);
                let starts = out.constant(&format!("{tap}.filter_starts"), &[i, j]);
                let ends = out.constant(&format!("{tap}.filter_ends"), &[i + 1, j + 1]);
                let filter = out.node(
                    "Slice",
                    &[conv.weight, &starts, &ends, &spatial],
                    &format!("{tap}.filter"),
                );
                let scale = out.node("Reshape", &[&filter, &per_channel], &format!("{tap}.scale"));
                out.node("Mul", &[&window, &scale], &format!("{tap}.product"))
            }
        };
        terms.push((tap, term));
    }
    let sum = match conv.kind {
        ConvolutionKind::Depthwise if terms.len() > MAX_FUSED_DEPTHWISE_TAPS => {
            let chains = terms.len().div_ceil(MAX_FUSED_DEPTHWISE_TAPS);
            let chain_sums: Vec<String> = terms
                .chunks(terms.len().div_ceil(chains))
                .map(|chain| added(chain, out))
                .collect();
            let mut sums = chain_sums.iter();
            let first = sums.next().cloned().unwrap_or_default();
            sums.fold(first, |sum, chain| out.node("Add", &[&sum, chain], "chains.sum"))
        }
        _ => added(&terms, out),
    };
    let sum = every_column(sum, conv.strides[1], out);
    if let Some(bias) = conv.bias {
        add_bias(&sum, bias, &per_channel, out);
    }
}

/// Every `stride`-th column of `value` (all of them for stride 1).
///
/// The windows took every stride-th row already: rows stay contiguous, so that is free. Within a
/// row they are contiguous, which vectorizes (strided windows do not): a strided result is
/// computed for every column, then subsampled.
fn every_column(value: String, stride: i64, out: &mut NodeWriter) -> String {
    if stride == 1 {
        return value;
    }
    let columns = out.constant("subsample.axes", &[3]);
    let starts = out.constant("subsample.starts", &[0]);
    let ends = out.constant("subsample.ends", &[i64::MAX]);
    let steps = out.constant("subsample.steps", &[stride]);
    out.node("Slice", &[&value, &starts, &ends, &columns, &steps], "subsampled")
}

/// The sum of `terms` (each a tap's name and value), added one after another.
fn added(terms: &[(String, String)], out: &mut NodeWriter) -> String {
    let mut terms = terms.iter();
    let first = terms.next().map(|(_, term)| term.clone()).unwrap_or_default();
    terms.fold(first, |sum, (tap, term)| {
        out.node("Add", &[&sum, term], &format!("{tap}.sum"))
    })
}

/// `conv` as IREE's im2col would compute it, written as ONNX: the taps' shifted windows of the
/// padded input concatenated along the channels, then one 1×1 convolution whose filter is
/// `conv`'s reordered tap-major, w'[:, (i, j, c)] = w[:, c, i, j].
fn windows_as_channels(conv: &Convolution, outputs: i64, out: &mut NodeWriter) {
    let windows = padded_windows(conv.input, conv.pads, conv.sliding(), out);
    let windows: Vec<&str> = windows.iter().map(String::as_str).collect();
    let columns = out.node_with("Concat", &windows, "columns", int("axis", 1));
    let taps_last = out.node_with("Transpose", &[conv.weight], "taps_last", ints("perm", &[0, 2, 3, 1]));
    let shape = out.constant("columns_filter_shape", &[outputs, -1, 1, 1]);
    let filter = out.node("Reshape", &[&taps_last, &shape], "columns_filter");
    let product = out.node("Conv", &[&columns, &filter], "product");
    if let Some(bias) = conv.bias {
        let per_channel = per_channel_shape(2, out);
        add_bias(&product, bias, &per_channel, out);
    }
}

/// `conv`, of `groups` groups, as one batched matmul, group by group: each tap's window of the
/// padded input (strided along rows and columns) split into its groups, `[groups, channels per
/// group, rows, columns]`, concatenated tap-major along the channels and flattened to
/// `[groups, taps × channels, pixels]`, times the filter reordered the same way, `[groups,
/// outputs per group, taps × channels]`; the `[groups, outputs per group, pixels]` product is the
/// output, `[1, outputs, rows, columns]`, whose rows and columns the first window's shape gives.
fn grouped_windows_product(conv: &Convolution, groups: i64, outputs: i64, out: &mut NodeWriter) {
    let padded = padded(conv.pads, conv.input.to_string(), out);
    let spatial = out.constant("axes", &[2, 3]);
    let per_group = out.constant("per_group_shape", &[groups, -1, 0, 0]);
    let mut windows = Vec::new();
    for tap in taps(conv.sliding()) {
        let window = window(conv.sliding(), &padded, tap, None, &spatial, out);
        windows.push(every_column(window, conv.strides[1], out));
    }
    let grouped: Vec<String> = windows
        .iter()
        .map(|window| out.node("Reshape", &[window, &per_group], "grouped_window"))
        .collect();
    let grouped: Vec<&str> = grouped.iter().map(String::as_str).collect();
    let columns = out.node_with("Concat", &grouped, "columns", int("axis", 1));
    let flat = out.constant("flat_columns_shape", &[0, 0, -1]);
    let columns = out.node("Reshape", &[&columns, &flat], "flat_columns");
    let taps_flat = out.constant("filter_taps_shape", &[0, 0, -1]);
    let filter = out.node("Reshape", &[conv.weight, &taps_flat], "filter_taps");
    let filter = out.node_with("Transpose", &[&filter], "taps_first", ints("perm", &[0, 2, 1]));
    let filter_shape = out.constant("columns_filter_shape", &[groups, outputs / groups, -1]);
    let filter = out.node("Reshape", &[&filter, &filter_shape], "columns_filter");
    let product = out.node("MatMul", &[&filter, &columns], "product");
    let window_shape = out.node("Shape", &[&windows[0]], "window_shape");
    let (first, end) = (out.constant("pixels.starts", &[2]), out.constant("pixels.ends", &[4]));
    let pixels = out.node("Slice", &[&window_shape, &first, &end], "pixels");
    let channels = out.constant("output_channels", &[1, outputs]);
    let shape = out.node_with("Concat", &[&channels, &pixels], "output_shape", int("axis", 0));
    let product = out.node("Reshape", &[&product, &shape], "image");
    if let Some(bias) = conv.bias {
        let per_channel = per_channel_shape(2, out);
        add_bias(&product, bias, &per_channel, out);
    }
}

/// Values known never to be negative: a `Relu`'s, and those a `Concat` or `MaxPool` makes of such
/// values only (GoogLeNet's modules join their branches' `Relu`s, then pool the join), in the
/// graph's order, which ONNX requires to be topological. With its pools so rewritten, GoogLeNet
/// took 22.1-23.1 ms a call instead of 23.6-24.7 (4 alternating runs, 2-core EPYC).
fn never_negative(graph: &GraphProto) -> HashSet<&str> {
    let mut known = HashSet::new();
    for node in graph.node.iter().filter(|n| matches!(n.domain(), "" | "ai.onnx")) {
        let of_known = || !node.input.is_empty() && node.input.iter().all(|input| known.contains(input.as_str()));
        let never = match node.op_type() {
            "Relu" => true,
            "Concat" => of_known(),
            "MaxPool" => node.output.len() == 1 && of_known(),
            _ => false,
        };
        if let (true, Some(output)) = (never, node.output.first()) {
            known.insert(output.as_str());
        }
    }
    known
}

/// The nodes computing `node` when it is a [`MaxPool`]: the largest of its taps' windows (of its
/// input padded with zeros, where it is padded), each taking every row-stride-th row, with every
/// column-stride-th column of that maximum kept, as the depthwise rewrite does. IREE 3.13
/// compiles an NCHW max pool to a scalar loop nest (`conv_64x55x55x3x3`, 8.6 % of SqueezeNet's
/// worker time). Alternating runs, per call: SqueezeNet's three unpadded 3×3 stride-2 pools
/// 0.93× (15 runs of 60 calls); ShuffleNet v2's padded stem pool 0.93× on one worker and on
/// `local-sync`, 0.98× on two, ResNet-50's 0.97×.
fn max_of_windows(node: &NodeProto, rectified: &HashSet<&str>, names: &mut NameSource) -> Option<Vec<NodeProto>> {
    let pool = MaxPool::of(node, rectified)?;
    let mut out = NodeWriter {
        nodes: Vec::new(),
        names,
        prefix: format!("{}.halo_max_pool", pool.output),
    };
    let windows = padded_windows(pool.input, pool.pads, pool.sliding, &mut out);
    let windows: Vec<&str> = windows.iter().map(String::as_str).collect();
    let max = out.node("Max", &windows, "max");
    every_column(max, pool.sliding.strides[1], &mut out);
    if let Some(last) = out.nodes.last_mut() {
        last.output = vec![pool.output.to_string()];
    }
    Some(out.nodes)
}

/// The average pools of `graph` to compute before the 1×1 convolution whose value they pool,
/// keyed by that value's name: pools over two axes without padding, rounding up or dilation,
/// of a convolution of one group with a 1×1 filter in `weights`, unit strides and no padding,
/// whose value nothing else reads. An average of a linear map's values is the map of their
/// average; the convolution then runs over the pooled pixels, a quarter of them for a 2×2 pool.
/// DenseNet-121's three transitions, full size, alternating runs per call: 0.92–0.94×
/// (`fast` flags, 8 runs of 15 calls; with them iree-compile 3.13 refuses `O3` for the third,
/// 1024 channels at 7×7, over a stack limit, and `halo compile` falls back to `fast`); the first
/// two alone, where `O3` compiles: 0.98×.
fn pools_after_pointwise_convolutions<'g>(
    graph: &'g GraphProto,
    weights: &HashMap<&str, &[i64]>,
) -> HashMap<&'g str, &'g NodeProto> {
    // A subgraph could read a value by name without it showing up among the nodes' inputs.
    let has_subgraphs = graph
        .node
        .iter()
        .flat_map(|n| &n.attribute)
        .any(|a| a.g.is_some() || !a.graphs.is_empty());
    if has_subgraphs {
        return HashMap::new();
    }
    let mut readers: HashMap<&str, usize> = HashMap::new();
    let read = graph.node.iter().flat_map(|n| &n.input).map(String::as_str);
    for name in read.chain(graph.output.iter().map(|o| o.name())) {
        *readers.entry(name).or_default() += 1;
    }
    let producers: HashMap<&str, &NodeProto> = graph
        .node
        .iter()
        .filter(|n| n.output.len() == 1)
        .map(|n| (n.output[0].as_str(), n))
        .collect();
    graph
        .node
        .iter()
        .filter(|pool| is_plain_average_pool(pool))
        .filter_map(|pool| {
            let value = pool.input.first()?.as_str();
            let conv = *producers.get(value)?;
            (readers.get(value) == Some(&1) && is_pointwise_convolution(conv, weights)).then_some((value, conv))
        })
        .collect()
}

/// The value of an `ints` attribute of `node` called `name`.
fn ints_of<'n>(node: &'n NodeProto, name: &str) -> Option<&'n [i64]> {
    node.attribute
        .iter()
        .find(|a| a.name() == name)
        .map(|a| a.ints.as_slice())
}

/// The value of an `int` attribute of `node` called `name`, or `default` without one.
fn int_of(node: &NodeProto, name: &str, default: i64) -> i64 {
    node.attribute
        .iter()
        .find(|a| a.name() == name)
        .map_or(default, |a| a.i())
}

/// Whether `node` pads as its `pads` say: no `auto_pad`, or `NOTSET` or `VALID`.
fn pads_as_given(node: &NodeProto) -> bool {
    let auto_pad = node.attribute.iter().find(|a| a.name() == "auto_pad").map(|a| a.s());
    auto_pad.is_none_or(|mode| matches!(mode, b"NOTSET" | b"VALID"))
}

/// Whether `node` is an ONNX node of `op_type` with one output and, for each of `unit` attributes,
/// nothing but ones (or the attribute absent), and for `pads`, nothing but zeros.
fn plain(node: &NodeProto, op_type: &str, unit: &[&str]) -> bool {
    let absent_or = |name: &str, value: i64| ints_of(node, name).is_none_or(|v| v.iter().all(|&x| x == value));
    node.op_type() == op_type
        && matches!(node.domain(), "" | "ai.onnx")
        && node.output.len() == 1
        && !node.input.first().is_none_or(String::is_empty)
        && absent_or("pads", 0)
        && pads_as_given(node)
        && unit.iter().all(|name| absent_or(name, 1))
}

/// An average pool over two axes without padding, rounding up or dilation.
fn is_plain_average_pool(node: &NodeProto) -> bool {
    plain(node, "AveragePool", &["dilations"])
        && int_of(node, "ceil_mode", 0) == 0
        && ints_of(node, "kernel_shape").is_some_and(|k| k.len() == 2)
}

/// A convolution of one group with a 1×1 filter in `weights`, unit strides and no padding.
fn is_pointwise_convolution(node: &NodeProto, weights: &HashMap<&str, &[i64]>) -> bool {
    let group = int_of(node, "group", 1);
    let filter = node.input.get(1).and_then(|w| weights.get(w.as_str()));
    plain(node, "Conv", &["strides", "dilations"])
        && group == 1
        && filter.is_some_and(|dims| matches!(dims, [_, _, 1, 1]))
}

/// `pool` computed before `conv`, the 1×1 convolution whose value it pooled: the same pool of
/// `conv`'s input, then `conv` (its bias added after it, see [`bias_separated`]) under the
/// pool's value name.
fn pooled_first_nodes(
    pool: &NodeProto,
    conv: &NodeProto,
    weights: &HashMap<&str, &[i64]>,
    names: &mut NameSource,
) -> Vec<NodeProto> {
    let output = &pool.output[0];
    let pooled = names.fresh(&format!("{output}.halo_pooled_first.input"));
    let moved_pool = NodeProto {
        input: vec![conv.input[0].clone()],
        output: vec![pooled.clone()],
        name: Some(pooled.clone()),
        ..pool.clone()
    };
    let mut inputs = conv.input.clone();
    inputs[0] = pooled;
    let moved_conv = NodeProto {
        input: inputs,
        output: vec![output.clone()],
        name: Some(names.fresh(&format!("{output}.halo_pooled_first.conv"))),
        ..conv.clone()
    };
    let conv_nodes = bias_separated(&moved_conv, weights, names).unwrap_or_else(|| vec![moved_conv]);
    std::iter::once(moved_pool).chain(conv_nodes).collect()
}

/// `node` with its bias added by an `Add` after it, when it is a convolution that is not
/// depthwise with a bias whose filter is an initializer of `weights` (one that
/// [`Convolution::of`] leaves to IREE, or to halo's kernels, whose grouped matchers take this
/// form).
///
/// IREE makes such a convolution a matmul whose accumulator starts as the bias: with data tiling
/// it first writes the bias, broadcast to the whole output, in the packed layout, and the matmul
/// reads it back. Without the bias the accumulator starts at zero inside the matmul, and the
/// `Add` joins the elementwise work fused after it. Full-size models, `fast-o3`, host CPU,
/// alternating runs of `halo benchmark-module`, per call: MobileNet-v2 0.93×, ResNet-50 0.94×,
/// ShuffleNet v2 0.97×, SqueezeNet 0.97× (on top of the shifts).
fn bias_separated(node: &NodeProto, weights: &HashMap<&str, &[i64]>, names: &mut NameSource) -> Option<Vec<NodeProto>> {
    if node.op_type() != "Conv" || !matches!(node.domain(), "" | "ai.onnx") || node.output.len() != 1 {
        return None;
    }
    let group = int_of(node, "group", 1);
    let bias = node.input.get(2).filter(|name| !name.is_empty())?;
    let filter = weights.get(node.input[1].as_str())?;
    let filter_rank = filter.len();
    // Depthwise convolutions keep their bias: the spec's depthwise matchers take the importer's form.
    let depthwise = group > 1 && filter.get(..2) == Some(&[group, 1]);
    if group < 1 || depthwise || node.input.len() != 3 || filter_rank < 3 {
        return None;
    }
    let output = &node.output[0];
    let mut out = NodeWriter {
        nodes: Vec::new(),
        names,
        prefix: format!("{output}.halo_bias"),
    };
    let product = out.node("Conv", &[&node.input[0], &node.input[1]], "product");
    if let Some(conv) = out.nodes.last_mut() {
        conv.attribute = node.attribute.clone();
    }
    let per_channel = per_channel_shape(filter_rank - 2, &mut out);
    add_bias(&product, bias, &per_channel, &mut out);
    if let Some(last) = out.nodes.last_mut() {
        last.output = vec![output.clone()];
    }
    Some(out.nodes)
}

/// A `Reshape` shape that puts one value per channel of a value with `spatial` axes after its
/// channels: `[1, -1, 1, ...]`.
fn per_channel_shape(spatial: usize, out: &mut NodeWriter) -> String {
    let shape: Vec<i64> = [1, -1].into_iter().chain(std::iter::repeat_n(1, spatial)).collect();
    out.constant("per_channel_shape", &shape)
}

/// `value` plus `bias`, one value per channel, shaped by `per_channel` (see [`per_channel_shape`]).
fn add_bias(value: &str, bias: &str, per_channel: &str, out: &mut NodeWriter) -> String {
    let bias = out.node("Reshape", &[bias, per_channel], "bias");
    out.node("Add", &[value, &bias], "output")
}

/// An `int` attribute.
fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..AttributeProto::default()
    }
}

/// An `ints` attribute.
fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..AttributeProto::default()
    }
}

/// Appends nodes whose values get fresh names under one prefix.
struct NodeWriter<'a> {
    nodes: Vec<NodeProto>,
    names: &'a mut NameSource,
    prefix: String,
}

impl NodeWriter<'_> {
    /// Appends an `op_type` node with one `attribute` reading `inputs`; returns its output's name.
    fn node_with(&mut self, op_type: &str, inputs: &[&str], part: &str, attribute: AttributeProto) -> String {
        let output = self.node(op_type, inputs, part);
        if let Some(node) = self.nodes.last_mut() {
            node.attribute = vec![attribute];
        }
        output
    }

    /// Appends an `op_type` node reading `inputs`; returns its output's name.
    fn node(&mut self, op_type: &str, inputs: &[&str], part: &str) -> String {
        let output = self.names.fresh(&format!("{}.{part}", self.prefix));
        self.nodes.push(NodeProto {
            op_type: Some(op_type.to_string()),
            input: inputs.iter().map(|name| name.to_string()).collect(),
            output: vec![output.clone()],
            name: Some(output.clone()),
            ..NodeProto::default()
        });
        output
    }

    /// Appends a `Constant` node holding 1-D int64 `values` (a node needs no graph input entry,
    /// which initializers of models before IR version 4 do); returns its output's name.
    fn constant(&mut self, part: &str, values: &[i64]) -> String {
        let tensor = TensorProto {
            dims: vec![values.len() as i64],
            data_type: Some(DataType::Int64 as i32),
            int64_data: values.to_vec(),
            ..TensorProto::default()
        };
        let value = AttributeProto {
            name: Some("value".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(tensor),
            ..AttributeProto::default()
        };
        self.node_with("Constant", &[], part, value)
    }
}

/// A `Slice` end `skipped` elements before the end of its axis (ONNX counts negative ends from
/// the end, and clamps an end past it).
fn end_before(skipped: i64) -> i64 {
    if skipped == 0 {
        i64::MAX
    } else {
        -skipped
    }
}

/// Value names no node, input, output or initializer of the graph uses yet.
struct NameSource {
    taken: HashSet<String>,
}

impl NameSource {
    fn of(graph: &GraphProto) -> NameSource {
        let values = graph.node.iter().flat_map(|n| n.input.iter().chain(&n.output));
        let declared = graph
            .input
            .iter()
            .chain(&graph.output)
            .chain(&graph.value_info)
            .map(|v| v.name());
        let taken = values
            .map(String::as_str)
            .chain(declared)
            .chain(graph.initializer.iter().map(|t| t.name()))
            .map(String::from)
            .collect();
        NameSource { taken }
    }

    /// `wanted`, or `wanted` with the first numeric suffix that is free.
    fn fresh(&mut self, wanted: &str) -> String {
        let mut name = wanted.to_string();
        let mut suffix = 1;
        while self.taken.contains(&name) {
            name = format!("{wanted}.{suffix}");
            suffix += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{OperatorSetIdProto, ValueInfoProto};
    use proptest::prelude::*;

    fn node(op_type: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            op_type: Some(op_type.into()),
            input: inputs.iter().map(|name| name.to_string()).collect(),
            output: vec![output.into()],
            ..NodeProto::default()
        }
    }

    fn conv(inputs: &[&str], output: &str, attributes: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            attribute: attributes,
            ..node("Conv", inputs, output)
        }
    }

    fn weight(name: &str, dims: &[i64]) -> TensorProto {
        let count: i64 = dims.iter().product();
        TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(DataType::Float as i32),
            float_data: (0..count).map(|v| v as f32).collect(),
            ..TensorProto::default()
        }
    }

    fn model(nodes: Vec<NodeProto>, initializers: Vec<TensorProto>, opset: i64) -> ModelProto {
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(opset),
            }],
            graph: Some(GraphProto {
                name: Some("g".into()),
                node: nodes,
                initializer: initializers,
                input: vec![ValueInfoProto {
                    name: Some("x".into()),
                    ..ValueInfoProto::default()
                }],
                output: vec![ValueInfoProto {
                    name: Some("y".into()),
                    ..ValueInfoProto::default()
                }],
                doc_string: Some("kept".into()),
                ..GraphProto::default()
            }),
            producer_name: Some("test".into()),
            ..ModelProto::default()
        }
    }

    fn depthwise_attributes() -> Vec<AttributeProto> {
        vec![
            int("group", 4),
            ints("pads", &[1, 1, 1, 1]),
            ints("kernel_shape", &[3, 3]),
            ints("strides", &[1, 1]),
        ]
    }

    fn rewritten(model: &ModelProto) -> Option<(ModelProto, usize)> {
        rewritten_by(model, GraphRewrite::DepthwiseAsShifts).map(|(model, nodes, _)| (model, nodes))
    }

    fn rewritten_by(model: &ModelProto, asked: GraphRewrite) -> Option<(ModelProto, usize, GraphRewrite)> {
        rewrite(&model.encode_to_vec(), asked, KernelUse::Portable)
            .map(|r| (ModelProto::decode(r.bytes.as_slice()).unwrap(), r.nodes, r.rewrite))
    }

    /// Every value is defined once, and defined before it is used.
    fn assert_defined_before_use(graph: &GraphProto, inputs: &[&'static str]) {
        let mut defined: HashSet<&str> = inputs.iter().copied().collect();
        for n in &graph.node {
            for input in &n.input {
                assert!(defined.contains(input.as_str()), "{input} used before it is defined");
            }
            for output in &n.output {
                assert!(defined.insert(output), "{output} defined twice");
            }
        }
    }

    fn constant<'g>(graph: &'g GraphProto, name: &str) -> &'g [i64] {
        let node = graph.node.iter().find(|n| n.output[0] == name).unwrap();
        &node.attribute[0].t.as_ref().unwrap().int64_data
    }

    fn ops(model: &ModelProto) -> Vec<&str> {
        model.graph.as_ref().unwrap().node.iter().map(|n| n.op_type()).collect()
    }

    /// How many nodes of each of `op_types` `model` has.
    fn op_counts<const N: usize>(model: &ModelProto, op_types: [&str; N]) -> [usize; N] {
        let ops = ops(model);
        op_types.map(|op_type| ops.iter().filter(|op| **op == op_type).count())
    }

    /// `original` under [`GraphRewrite::ConvolutionsAsShifts`], which must replace its one
    /// convolution by well-formed nodes.
    fn rewritten_once(original: &ModelProto) -> ModelProto {
        let (out, count, done) = rewritten_by(original, GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!((count, done), (1, GraphRewrite::ConvolutionsAsShifts));
        assert_defined_before_use(out.graph.as_ref().unwrap(), &["x", "w", "b"]);
        out
    }

    #[test]
    fn a_padded_3x3_depthwise_conv_becomes_nine_scaled_shifts_plus_bias() {
        let original = model(
            vec![
                conv(&["x", "w", "b"], "c", depthwise_attributes()),
                node("Relu", &["c"], "y"),
            ],
            vec![weight("w", &[4, 1, 3, 3]), weight("b", &[4])],
            17,
        );
        let (out, count) = rewritten(&original).unwrap();
        assert_eq!(count, 1);
        let graph = out.graph.as_ref().unwrap();
        let ops = ops(&out);
        assert!(!ops.contains(&"Conv"), "{ops:?}");
        assert_eq!(ops.iter().filter(|op| **op == "Pad").count(), 1);
        assert_eq!(ops.iter().filter(|op| **op == "Mul").count(), 9);
        // Eight adds between the nine taps, one for the bias.
        assert_eq!(ops.iter().filter(|op| **op == "Add").count(), 9);
        assert_eq!(ops.iter().filter(|op| **op == "Slice").count(), 18);
        // The conv's output is still produced, right before the node that reads it.
        let relu = graph.node.iter().position(|n| n.op_type() == "Relu").unwrap();
        assert_eq!(graph.node[relu - 1].output, ["c"]);
        assert_eq!(graph.node[relu - 1].op_type(), "Add");
        // Everything else of the model is kept.
        assert_eq!(out.producer_name(), "test");
        assert_eq!(graph.doc_string(), "kept");
        assert_eq!(graph.initializer, original.graph.as_ref().unwrap().initializer);
        assert_defined_before_use(graph, &["x", "w", "b"]);
        // The bottom-right tap's window runs to the end of both axes; the top-left one stops
        // two rows and two columns short.
        assert_eq!(constant(graph, "c.halo_depthwise.tap0_0.ends"), [-2, -2]);
        assert_eq!(constant(graph, "c.halo_depthwise.tap2_2.ends"), [i64::MAX, i64::MAX]);
        assert_eq!(constant(graph, "c.halo_depthwise.tap1_2.ends"), [-1, i64::MAX]);
        assert_eq!(constant(graph, "c.halo_depthwise.pads"), [0, 0, 1, 1, 0, 0, 1, 1]);
        // The taps are summed in two chains, of five and of four, then added.
        let input_of = |name: &str| {
            let node = graph.node.iter().find(|n| n.output[0] == name).unwrap();
            (node.op_type().to_string(), node.input.clone())
        };
        let sum = |tap: &str| format!("c.halo_depthwise.{tap}.sum");
        let product = |tap: &str| format!("c.halo_depthwise.{tap}.product");
        assert_eq!(
            input_of("c.halo_depthwise.chains.sum"),
            ("Add".to_string(), vec![sum("tap1_1"), sum("tap2_2")])
        );
        assert_eq!(input_of(&sum("tap0_1")).1, [product("tap0_0"), product("tap0_1")]);
        assert_eq!(input_of(&sum("tap2_0")).1, [product("tap1_2"), product("tap2_0")]);
        assert!(!graph.node.iter().any(|n| n.output[0] == sum("tap1_2")));
    }

    #[test]
    fn a_5x5_depthwise_conv_sums_its_25_taps_in_four_chains_of_at_most_seven() {
        let attributes = vec![
            int("group", 4),
            ints("pads", &[2, 2, 2, 2]),
            ints("kernel_shape", &[5, 5]),
        ];
        let original = model(
            vec![conv(&["x", "w", "b"], "y", attributes)],
            vec![weight("w", &[4, 1, 5, 5]), weight("b", &[4])],
            17,
        );
        let (out, count) = rewritten(&original).unwrap();
        assert_eq!(count, 1);
        let graph = out.graph.as_ref().unwrap();
        assert_defined_before_use(graph, &["x", "w", "b"]);
        assert_eq!(op_counts(&out, ["Conv", "Pad", "Mul"]), [0, 1, 25]);
        // Chains of 7, 7, 7 and 4 taps (6 + 6 + 6 + 3 adds), three adds joining them, one for
        // the bias.
        assert_eq!(op_counts(&out, ["Add"]), [25]);
        let chain_ends: Vec<_> = graph
            .node
            .iter()
            .filter(|n| n.output[0].starts_with("y.halo_depthwise.chains.sum"))
            .map(|n| n.input[1].as_str())
            .collect();
        let sum = |tap: &str| format!("y.halo_depthwise.{tap}.sum");
        // Taps 0-6 end at (1, 1), 7-13 at (2, 3), 14-20 at (4, 0), 21-24 at (4, 4).
        assert_eq!(chain_ends, [sum("tap2_3"), sum("tap4_0"), sum("tap4_4")]);
        assert_eq!(constant(graph, "y.halo_depthwise.tap0_0.ends"), [-4, -4]);
        assert_eq!(constant(graph, "y.halo_depthwise.pads"), [0, 0, 2, 2, 0, 0, 2, 2]);
    }

    fn narrowing_attributes() -> Vec<AttributeProto> {
        vec![ints("pads", &[1, 1, 1, 1]), ints("kernel_shape", &[3, 3])]
    }

    #[test]
    fn a_narrowing_3x3_conv_becomes_one_1x1_conv_to_nine_channel_groups_shifted_and_summed() {
        let original = model(
            vec![conv(&["x", "w", "b"], "y", narrowing_attributes())],
            vec![weight("w", &[4, 8, 3, 3]), weight("b", &[4])],
            17,
        );
        let out = rewritten_once(&original);
        let graph = out.graph.as_ref().unwrap();
        assert_eq!(op_counts(&out, ["Transpose", "Conv", "Pad", "Mul"]), [1, 1, 1, 0]);
        // Eight adds between the nine windows, one for the bias.
        assert_eq!(op_counts(&out, ["Slice", "Add"]), [9, 9]);
        // The filter is reordered tap-major, [3, 3, 4, 8], and flattened to 36 1×1 filters.
        let transpose = graph.node.iter().find(|n| n.op_type() == "Transpose").unwrap();
        assert_eq!(
            (transpose.input[0].as_str(), transpose.attribute[0].ints.as_slice()),
            ("w", [2, 3, 0, 1].as_slice())
        );
        assert_eq!(constant(graph, "y.halo_narrowing.per_tap_shape"), [-1, 8, 1, 1]);
        let conv = graph.node.iter().find(|n| n.op_type() == "Conv").unwrap();
        assert!(conv.attribute.is_empty(), "a 1x1 convolution: {:?}", conv.attribute);
        assert_eq!(conv.input, ["x", "y.halo_narrowing.per_tap_filter"]);
        // Tap (i, j) reads output channels 4 (3i + j) .. 4 (3i + j) + 4 of the padded products,
        // shifted by (i, j).
        assert_eq!(constant(graph, "y.halo_narrowing.tap0_0.starts"), [0, 0, 0]);
        assert_eq!(constant(graph, "y.halo_narrowing.tap0_0.ends"), [4, -2, -2]);
        assert_eq!(constant(graph, "y.halo_narrowing.tap1_2.starts"), [20, 1, 2]);
        assert_eq!(constant(graph, "y.halo_narrowing.tap1_2.ends"), [24, -1, i64::MAX]);
        assert_eq!(
            constant(graph, "y.halo_narrowing.tap2_2.ends"),
            [36, i64::MAX, i64::MAX]
        );
        assert_eq!(constant(graph, "y.halo_narrowing.tap2_2.axes"), [1, 2, 3]);
        assert_eq!(constant(graph, "y.halo_narrowing.pads"), [0, 0, 1, 1, 0, 0, 1, 1]);
        let last = graph.node.last().unwrap();
        assert_eq!(
            (last.op_type(), last.output.as_slice()),
            ("Add", ["y".to_string()].as_slice())
        );
    }

    fn grouped(strides: &[i64]) -> ModelProto {
        let attributes = vec![
            int("group", 4),
            ints("pads", &[1, 1, 1, 1]),
            ints("kernel_shape", &[3, 3]),
            ints("strides", strides),
        ];
        let original = model(
            vec![conv(&["x", "w", "b"], "y", attributes)],
            vec![weight("w", &[8, 2, 3, 3]), weight("b", &[8])],
            17,
        );
        rewritten_once(&original)
    }

    /// The node that makes `value`.
    fn maker<'g>(graph: &'g GraphProto, value: &str) -> &'g NodeProto {
        graph.node.iter().find(|n| n.output[0] == value).unwrap()
    }

    #[test]
    fn a_grouped_3x3_conv_becomes_one_batched_matmul_over_its_windows_split_into_groups() {
        let out = grouped(&[1, 1]);
        let graph = out.graph.as_ref().unwrap();
        assert_eq!(op_counts(&out, ["Conv", "Pad", "MatMul", "Shape"]), [0, 1, 1, 1]);
        // Nine windows and the output's rows and columns from the first one's shape.
        assert_eq!(op_counts(&out, ["Slice", "Concat", "Transpose"]), [10, 2, 1]);
        assert!(!graph.node.iter().any(|n| n.output[0].contains("subsampled")));
        // Each window, [1, 8, rows, columns], becomes [4 groups, 2, rows, columns]; the nine are
        // joined tap-major along the channels and flattened to [4, 18, pixels].
        assert_eq!(constant(graph, "y.halo_grouped.per_group_shape"), [4, -1, 0, 0]);
        let columns = maker(graph, "y.halo_grouped.columns");
        assert_eq!(columns.input.len(), 9);
        assert_eq!(maker(graph, &columns.input[0]).input[0], "y.halo_grouped.tap0_0.window");
        assert_eq!(maker(graph, &columns.input[8]).input[0], "y.halo_grouped.tap2_2.window");
        assert_eq!(constant(graph, "y.halo_grouped.flat_columns_shape"), [0, 0, -1]);
        // The filter, [8, 2, 3, 3], is ordered the same way: [8, 9 taps, 2] as [4, 2, 18].
        assert_eq!(constant(graph, "y.halo_grouped.filter_taps_shape"), [0, 0, -1]);
        let transpose = maker(graph, "y.halo_grouped.taps_first");
        assert_eq!(transpose.attribute[0].ints, [0, 2, 1]);
        assert_eq!(constant(graph, "y.halo_grouped.columns_filter_shape"), [4, 2, -1]);
        assert_eq!(
            maker(graph, "y.halo_grouped.product").input,
            ["y.halo_grouped.columns_filter", "y.halo_grouped.flat_columns"]
        );
        // The product, [4, 2, pixels], is the image [1, 8, rows, columns].
        assert_eq!(
            maker(graph, "y.halo_grouped.window_shape").input,
            ["y.halo_grouped.tap0_0.window"]
        );
        assert_eq!(constant(graph, "y.halo_grouped.output_channels"), [1, 8]);
        assert_eq!(
            maker(graph, "y.halo_grouped.image").input,
            ["y.halo_grouped.product", "y.halo_grouped.output_shape"]
        );
        let last = graph.node.last().unwrap();
        assert_eq!(
            (last.op_type(), last.output.as_slice()),
            ("Add", ["y".to_string()].as_slice())
        );
    }

    #[test]
    fn a_strided_grouped_conv_strides_each_window_along_rows_and_columns() {
        let out = grouped(&[2, 2]);
        let graph = out.graph.as_ref().unwrap();
        let windows: Vec<_> = graph
            .node
            .iter()
            .filter(|n| n.op_type() == "Slice" && n.input[0] == "y.halo_grouped.padded")
            .collect();
        assert_eq!(windows.len(), 9);
        for window in windows {
            assert_eq!(constant(graph, &window.input[4]), [2, 1], "{}", window.output[0]);
        }
        // Every window's columns are subsampled before it is split into groups, and the output
        // shape comes from the first window so subsampled.
        let grouped: Vec<_> = graph
            .node
            .iter()
            .filter(|n| n.output[0].contains("grouped_window"))
            .collect();
        assert_eq!(grouped.len(), 9);
        assert!(grouped.iter().all(|n| n.input[0].contains("subsampled")));
        assert!(maker(graph, "y.halo_grouped.window_shape").input[0].contains("subsampled"));
    }

    #[test]
    fn only_convolutions_as_shifts_rewrites_narrowing_convs_and_says_which_rewrite_happened() {
        let both = model(
            vec![
                conv(&["x", "w"], "c", narrowing_attributes()),
                conv(&["c", "d"], "y", depthwise_attributes()),
            ],
            vec![weight("w", &[4, 8, 3, 3]), weight("d", &[4, 1, 3, 3])],
            17,
        );
        let (_, count, done) = rewritten_by(&both, GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!((count, done), (2, GraphRewrite::ConvolutionsAsShifts));
        let (out, count, done) = rewritten_by(&both, GraphRewrite::DepthwiseAsShifts).unwrap();
        assert_eq!((count, done), (1, GraphRewrite::DepthwiseAsShifts));
        assert_eq!(ops(&out)[0], "Conv");
        // Without a narrowing convolution the broader rewrite makes the depthwise one's graph.
        let depthwise_only = model(
            vec![conv(&["x", "d"], "y", depthwise_attributes())],
            vec![weight("d", &[4, 1, 3, 3])],
            17,
        );
        let (_, count, done) = rewritten_by(&depthwise_only, GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!((count, done), (1, GraphRewrite::DepthwiseAsShifts));
    }

    #[test]
    fn strided_dilated_1x1_and_5x5_convolutions_are_left_alone() {
        let with = |dims: &[i64], extra: Vec<AttributeProto>| {
            let mut attributes = narrowing_attributes();
            attributes.retain(|a| extra.iter().all(|e| e.name() != a.name()));
            attributes.extend(extra);
            model(vec![conv(&["x", "w"], "y", attributes)], vec![weight("w", dims)], 17)
        };
        let unchanged = [
            ("strided narrowing", with(&[4, 8, 3, 3], vec![ints("strides", &[2, 2])])),
            ("strided dense", with(&[8, 8, 3, 3], vec![ints("strides", &[1, 2])])),
            (
                "grouped, stride 3",
                with(&[4, 4, 3, 3], vec![int("group", 2), ints("strides", &[3, 3])]),
            ),
            (
                "grouped 1x1",
                with(
                    &[4, 4, 1, 1],
                    vec![
                        int("group", 2),
                        ints("pads", &[0, 0, 0, 0]),
                        ints("kernel_shape", &[1, 1]),
                    ],
                ),
            ),
            (
                "groups not dividing the outputs",
                with(&[6, 4, 3, 3], vec![int("group", 4)]),
            ),
            ("dilated", with(&[4, 8, 3, 3], vec![ints("dilations", &[2, 2])])),
            (
                "1x1",
                with(
                    &[4, 8, 1, 1],
                    vec![ints("pads", &[0, 0, 0, 0]), ints("kernel_shape", &[1, 1])],
                ),
            ),
            (
                "5x5",
                with(
                    &[4, 8, 5, 5],
                    vec![ints("pads", &[2, 2, 2, 2]), ints("kernel_shape", &[5, 5])],
                ),
            ),
        ];
        for (what, original) in unchanged {
            assert!(
                rewritten_by(&original, GraphRewrite::ConvolutionsAsShifts).is_none(),
                "{what}"
            );
        }
        // Exactly half as many outputs is narrowing; one more output channel is dense.
        let form = |dims: &[i64]| {
            let (out, _, _) = rewritten_by(&with(dims, vec![]), GraphRewrite::ConvolutionsAsShifts).unwrap();
            let last = out.graph.unwrap().node.pop().unwrap();
            (
                last.op_type().to_string(),
                last.name().split('.').nth(1).unwrap().to_string(),
            )
        };
        assert_eq!(form(&[4, 8, 3, 3]), ("Add".to_string(), "halo_narrowing".to_string()));
        assert_eq!(form(&[5, 9, 3, 3]), ("Conv".to_string(), "halo_windows".to_string()));
    }

    /// With halo's kernels, unit-stride convolutions of one group that are not narrowing stay
    /// convolutions (their bias added after them, a form the kernels' spec matches), and so do
    /// depthwise ones with a bias and a stride the spec matches; narrowing ones, and depthwise
    /// ones without a bias or of uneven strides, are still rewritten.
    #[test]
    fn convolutions_halos_kernels_take_keep_their_form_and_the_rest_is_rewritten() {
        let attributes = || vec![ints("pads", &[1, 1, 1, 1]), ints("kernel_shape", &[3, 3])];
        // The graph's operations after the rewrite (the model's own when nothing was replaced).
        let ops_with_kernels = |model: &ModelProto| -> Vec<String> {
            let rewritten = rewrite(
                &model.encode_to_vec(),
                GraphRewrite::ConvolutionsAsShifts,
                KernelUse::HaloKernels,
            );
            let graph = match rewritten {
                Some(rewritten) => ModelProto::decode(rewritten.bytes.as_slice()).unwrap().graph.unwrap(),
                None => model.graph.clone().unwrap(),
            };
            graph
                .node
                .iter()
                .map(|n| n.name().to_string() + "/" + n.op_type())
                .collect()
        };
        let dense = ops_with_kernels(&one_conv(&[5, 9, 3, 3], true, attributes()));
        let (first, last) = (dense.first().unwrap(), dense.last().unwrap());
        assert!(first.ends_with("/Conv") && last.ends_with("/Add"), "{dense:?}");
        assert!(dense.iter().all(|op| op.contains("halo_bias")), "{dense:?}");
        let narrowing = ops_with_kernels(&one_conv(&[4, 8, 3, 3], true, attributes()));
        assert!(
            narrowing.iter().any(|op| op.contains("halo_narrowing")),
            "{narrowing:?}"
        );
        let depthwise = |inputs: &[&str], strides: &[i64]| {
            let mut attributes = depthwise_attributes();
            attributes.retain(|attribute| attribute.name() != "strides");
            attributes.push(ints("strides", strides));
            let weights = vec![weight("w", &[4, 1, 3, 3]), weight("b", &[4])];
            ops_with_kernels(&model(vec![conv(inputs, "y", attributes)], weights, 17))
        };
        for strides in [[1, 1], [2, 2]] {
            assert_eq!(depthwise(&["x", "w", "b"], &strides), ["/Conv"], "{strides:?}");
        }
        for (inputs, strides) in [(&["x", "w"][..], [1, 1]), (&["x", "w", "b"], [1, 2])] {
            let ops = depthwise(inputs, &strides);
            assert!(
                ops.iter().any(|op| op.contains("halo_depthwise")),
                "{inputs:?} {strides:?}: {ops:?}"
            );
        }
        // Grouped ones of strides 1 and 2 stay convolutions, their bias separated (one without
        // a bias as it is); of uneven strides they are still the rewrite's batched matmul.
        let grouped = |bias: bool, strides: &[i64]| {
            let mut attributes = attributes();
            attributes.extend([int("group", 2), ints("strides", strides)]);
            ops_with_kernels(&one_conv(&[4, 3, 3, 3], bias, attributes))
        };
        for strides in [[1, 1], [2, 2]] {
            let ops = grouped(true, &strides);
            let (first, last) = (ops.first().unwrap(), ops.last().unwrap());
            assert!(
                first.ends_with("/Conv") && last.ends_with("/Add"),
                "{strides:?}: {ops:?}"
            );
            assert!(ops.iter().all(|op| op.contains("halo_bias")), "{strides:?}: {ops:?}");
        }
        assert_eq!(grouped(false, &[2, 2]), ["/Conv"]);
        for bias in [false, true] {
            let ops = grouped(bias, &[1, 2]);
            assert!(ops.iter().any(|op| op.contains("halo_grouped")), "{bias}: {ops:?}");
        }
    }

    /// A model of one `Conv` from `x` to `y` with filter `w` of `dims`, bias `b` when asked.
    fn one_conv(dims: &[i64], bias: bool, attributes: Vec<AttributeProto>) -> ModelProto {
        let inputs: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        let filter = TensorProto {
            name: Some("w".into()),
            dims: dims.to_vec(),
            data_type: Some(DataType::Float as i32),
            ..TensorProto::default()
        };
        model(vec![conv(inputs, "y", attributes)], vec![filter, weight("b", &[1])], 17)
    }

    /// Mostly valid attribute values, sometimes malformed ones.
    fn attribute_values(valid: impl Strategy<Value = Vec<i64>> + 'static) -> BoxedStrategy<Option<Vec<i64>>> {
        prop_oneof![
            2 => Just(None),
            3 => valid.prop_map(Some),
            1 => proptest::collection::vec(-1i64..4, 0..6).prop_map(Some),
        ]
        .boxed()
    }

    proptest! {
        #[test]
        fn any_convolution_is_left_alone_or_replaced_by_a_well_formed_graph(
            outputs in prop_oneof![4 => 1i64..40, 1 => -1i64..1],
            inputs in prop_oneof![Just(1i64), -1i64..40],
            sides in prop_oneof![3 => (1i64..4, 1i64..4), 1 => (-1i64..5, -1i64..5)],
            group in prop_oneof![3 => Just(None), 2 => Just(Some(1i64)), 1 => (-1i64..5).prop_map(Some)],
            bias in any::<bool>(),
            pads in attribute_values(proptest::collection::vec(0i64..3, 4)),
            strides in attribute_values(proptest::collection::vec(1i64..3, 2)),
            dilations in attribute_values(proptest::collection::vec(1i64..2, 2)),
        ) {
            let dims = [outputs, inputs, sides.0, sides.1];
            // No group given: one filter per channel (depthwise when `inputs` is 1).
            let mut attributes = vec![int("group", group.unwrap_or(outputs))];
            for (name, values) in [("pads", pads), ("strides", strides), ("dilations", dilations)] {
                attributes.extend(values.map(|v| ints(name, &v)));
            }
            let original = one_conv(&dims, bias, attributes);
            for asked in GraphRewrite::ALL {
                let Some((out, count, done)) = rewritten_by(&original, asked) else {
                    continue;
                };
                prop_assert_eq!(count, 1);
                prop_assert!(asked == GraphRewrite::ConvolutionsAsShifts || done == asked);
                let graph = out.graph.as_ref().unwrap();
                assert_defined_before_use(graph, &["x", "w", "b"]);
                prop_assert!(!ops(&out).is_empty());
                prop_assert_eq!(&graph.node.last().unwrap().output, &vec!["y".to_string()]);
                // Only the replaced node's value keeps its name; nothing else is called `y`.
                let named_y = graph.node.iter().filter(|n| n.output.iter().any(|o| o == "y")).count();
                prop_assert_eq!(named_y, 1);
            }
        }
    }

    proptest! {
        #[test]
        fn any_max_pool_is_left_alone_or_replaced_by_a_well_formed_graph(
            kernel in attribute_values(proptest::collection::vec(1i64..4, 2)),
            extreme in prop_oneof![3 => Just(None), 1 => proptest::sample::select(vec![i64::MIN, -1, 0, i64::MAX]).prop_map(Some)],
            pads in attribute_values(proptest::collection::vec(0i64..2, 4)),
            strides in attribute_values(proptest::collection::vec(1i64..4, 2)),
            dilations in attribute_values(proptest::collection::vec(1i64..3, 2)),
            ceil_mode in prop_oneof![Just(None), (-1i64..3).prop_map(Some)],
            indices in any::<bool>(),
        ) {
            let mut attributes = Vec::new();
            let kernel = kernel.map(|mut k| {
                if let (Some(value), Some(first)) = (extreme, k.first_mut()) {
                    *first = value;
                }
                k
            });
            for (name, values) in [("kernel_shape", kernel), ("pads", pads), ("strides", strides), ("dilations", dilations)] {
                attributes.extend(values.map(|v| ints(name, &v)));
            }
            attributes.extend(ceil_mode.map(|mode| int("ceil_mode", mode)));
            let mut original = max_pool(attributes);
            if indices {
                original.graph.as_mut().unwrap().node[0].output.push("indices".into());
            }
            let Some((out, count, done)) = rewritten_by(&original, GraphRewrite::ConvolutionsAsShifts) else {
                return Ok(());
            };
            prop_assert_eq!((count, done), (1, GraphRewrite::ConvolutionsAsShifts));
            prop_assert!(!indices);
            let graph = out.graph.as_ref().unwrap();
            assert_defined_before_use(graph, &["x"]);
            prop_assert_eq!(&graph.node.last().unwrap().output, &vec!["y".to_string()]);
            let maxima = graph.node.iter().filter(|n| n.op_type() == "Max").count();
            prop_assert_eq!(maxima, 1);
        }
    }

    #[test]
    fn extreme_filter_dimensions_from_the_file_are_refused_or_rewritten_without_overflow() {
        let extremes = [i64::MIN, -1, 0, 1, 2, 3, i64::MAX / 9, i64::MAX / 2, i64::MAX];
        for outputs in extremes {
            for inputs in extremes {
                for side in [i64::MIN, 0, 3, i64::MAX] {
                    let dims = [outputs, inputs, side, side];
                    let with_group = |group| {
                        let attributes = vec![ints("pads", &[1, 1, 1, 1]), int("group", group)];
                        // Dimensions only: a tensor of this size could never be written out.
                        let tensor = TensorProto {
                            name: Some("w".into()),
                            dims: dims.to_vec(),
                            data_type: Some(DataType::Float as i32),
                            ..TensorProto::default()
                        };
                        model(vec![conv(&["x", "w"], "y", attributes)], vec![tensor], 17)
                    };
                    for group in [1, outputs] {
                        let rewritten = rewritten_by(&with_group(group), GraphRewrite::ConvolutionsAsShifts);
                        let sane = (1..=3).contains(&side) && outputs >= 1 && inputs >= 1;
                        assert!(rewritten.is_none() || sane, "{dims:?}, group {group}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_dense_3x3_conv_becomes_a_1x1_conv_over_its_nine_windows_concatenated() {
        let original = model(
            vec![
                conv(&["x", "w", "b"], "y", narrowing_attributes()),
                node("Relu", &["y"], "z"),
            ],
            vec![weight("w", &[8, 6, 3, 3]), weight("b", &[8])],
            17,
        );
        let out = rewritten_once(&original);
        let graph = out.graph.as_ref().unwrap();
        assert_eq!(
            op_counts(&out, ["Pad", "Slice", "Concat", "Conv", "Add"]),
            [1, 9, 1, 1, 1]
        );
        let concat = graph.node.iter().find(|n| n.op_type() == "Concat").unwrap();
        assert_eq!(concat.attribute[0].i(), 1, "along the channels");
        let windows: Vec<String> = taps(Sliding {
            kernel: [3, 3],
            strides: [1, 1],
        })
        .map(|[i, j]| format!("y.halo_windows.tap{i}_{j}.window"))
        .collect();
        assert_eq!(concat.input, windows, "tap-major, row by row");
        assert_eq!(constant(graph, "y.halo_windows.tap1_2.starts"), [1, 2]);
        assert_eq!(constant(graph, "y.halo_windows.tap1_2.ends"), [-1, i64::MAX]);
        // The filter is reordered to [8, 3, 3, 6], so its columns follow the windows' channels.
        let transpose = graph.node.iter().find(|n| n.op_type() == "Transpose").unwrap();
        assert_eq!(transpose.attribute[0].ints, [0, 2, 3, 1]);
        assert_eq!(constant(graph, "y.halo_windows.columns_filter_shape"), [8, -1, 1, 1]);
        // The 1×1 convolution has no bias: an Add after it does, and is the convolution's value.
        let conv = graph.node.iter().find(|n| n.op_type() == "Conv").unwrap();
        assert!(conv.attribute.is_empty(), "a 1x1 convolution: {:?}", conv.attribute);
        assert_eq!(conv.input.len(), 2);
        let add = &graph.node[graph.node.len() - 2];
        assert_eq!(
            (add.op_type(), add.output.as_slice()),
            ("Add", ["y".to_string()].as_slice())
        );
        assert_eq!(add.input[0], conv.output[0]);
    }

    #[test]
    fn convolutions_left_to_iree_add_their_bias_after_them() {
        let biased = |dims: &[i64], attributes: Vec<AttributeProto>| {
            model(
                vec![conv(&["x", "w", "b"], "y", attributes), node("Relu", &["y"], "z")],
                vec![weight("w", dims), weight("b", &dims[..1])],
                17,
            )
        };
        let pointwise = vec![ints("kernel_shape", &[1, 1]), ints("strides", &[2, 2])];
        let out = rewritten_once(&biased(&[4, 8, 1, 1], pointwise.clone()));
        let graph = out.graph.as_ref().unwrap();
        let ops: Vec<_> = graph.node.iter().map(|n| n.op_type()).collect();
        assert_eq!(ops, ["Conv", "Constant", "Reshape", "Add", "Relu"]);
        let conv = &graph.node[0];
        assert_eq!(conv.input, ["x", "w"]);
        assert_eq!(conv.attribute, pointwise, "the convolution keeps its attributes");
        assert_eq!(constant(graph, &graph.node[2].input[1]), [1, -1, 1, 1]);
        assert_eq!(graph.node[2].input[0], "b");
        assert_eq!(
            graph.node[3].input,
            [conv.output[0].as_str(), graph.node[2].output[0].as_str()]
        );
        assert_eq!(graph.node[3].output, ["y"]);
        // A 1-D convolution's bias is shaped for one spatial axis.
        let out = rewritten_once(&biased(&[4, 8, 1], vec![]));
        let graph = out.graph.as_ref().unwrap();
        assert_eq!(constant(graph, &graph.node[2].input[1]), [1, -1, 1]);
        // Grouped convolutions have theirs separated too (halo's grouped kernel matchers take
        // that form); depthwise ones, filters computed in the graph, and the rewrites that only
        // touch depthwise convolutions leave the bias where it is.
        let grouped = rewritten_once(&biased(&[4, 4, 1, 1], vec![int("group", 2)]));
        let ops: Vec<_> = grouped
            .graph
            .as_ref()
            .unwrap()
            .node
            .iter()
            .map(|n| n.op_type())
            .collect();
        assert_eq!(ops, ["Conv", "Constant", "Reshape", "Add", "Relu"]);
        let depthwise = biased(&[4, 1, 7, 7], vec![int("group", 4)]);
        assert!(rewritten_by(&depthwise, GraphRewrite::ConvolutionsAsShifts).is_none());
        let mut computed = biased(&[4, 8, 1, 1], vec![]);
        computed.graph.as_mut().unwrap().initializer.retain(|t| t.name() != "w");
        assert!(rewritten_by(&computed, GraphRewrite::ConvolutionsAsShifts).is_none());
        assert!(rewritten_by(&biased(&[4, 8, 1, 1], vec![]), GraphRewrite::DepthwiseAsShifts).is_none());
    }

    /// `original`'s one convolution rewritten with `strides`: the rewritten graph, and the
    /// steps of each window of the padded input, tap by tap.
    fn strided(strides: &[i64]) -> (ModelProto, Vec<Option<Vec<i64>>>) {
        let mut attributes = depthwise_attributes();
        attributes.retain(|a| a.name() != "strides");
        attributes.push(ints("strides", strides));
        let original = model(
            vec![conv(&["x", "w", "b"], "y", attributes)],
            vec![weight("w", &[4, 1, 3, 3]), weight("b", &[4])],
            17,
        );
        let (out, count) = rewritten(&original).unwrap();
        assert_eq!(count, 1);
        let graph = out.graph.as_ref().unwrap();
        let window_steps = graph
            .node
            .iter()
            .filter(|n| n.op_type() == "Slice" && n.input[0] == "y.halo_depthwise.padded")
            .map(|n| n.input.get(4).map(|steps| constant(graph, steps).to_vec()))
            .collect();
        (out, window_steps)
    }

    #[test]
    fn a_stride_2_conv_takes_every_other_row_in_its_windows_and_every_other_column_of_the_sum() {
        let (out, window_steps) = strided(&[2, 2]);
        assert_eq!(window_steps, vec![Some(vec![2, 1]); 9]);
        let graph = out.graph.as_ref().unwrap();
        let last = graph.node.len() - 1;
        assert_eq!(
            (graph.node[last].op_type(), graph.node[last].output[0].as_str()),
            ("Add", "y")
        );
        let subsample = graph
            .node
            .iter()
            .find(|n| n.output[0] == "y.halo_depthwise.subsampled")
            .unwrap();
        assert_eq!(subsample.op_type(), "Slice");
        assert_eq!(subsample.input[0], "y.halo_depthwise.chains.sum");
        assert_eq!(constant(graph, &subsample.input[3]), [3], "columns only");
        assert_eq!(constant(graph, &subsample.input[4]), [2]);
        assert_defined_before_use(graph, &["x", "w", "b"]);
    }

    fn max_pool(attributes: Vec<AttributeProto>) -> ModelProto {
        let mut pool = node("MaxPool", &["x"], "y");
        pool.attribute = attributes;
        model(vec![pool], Vec::new(), 17)
    }

    #[test]
    fn an_unpadded_3x3_stride_2_max_pool_is_the_max_of_nine_row_strided_windows_column_subsampled() {
        let original = max_pool(vec![ints("kernel_shape", &[3, 3]), ints("strides", &[2, 2])]);
        let (out, count, done) = rewritten_by(&original, GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!((count, done), (1, GraphRewrite::ConvolutionsAsShifts));
        let graph = out.graph.as_ref().unwrap();
        assert_defined_before_use(graph, &["x"]);
        assert_eq!(op_counts(&out, ["MaxPool", "Slice", "Max"]), [0, 10, 1]);
        let max = graph.node.iter().find(|n| n.op_type() == "Max").unwrap();
        let windows: Vec<String> = taps(Sliding {
            kernel: [3, 3],
            strides: [2, 2],
        })
        .map(|[i, j]| format!("y.halo_max_pool.tap{i}_{j}.window"))
        .collect();
        assert_eq!(max.input, windows);
        let window = graph.node.iter().find(|n| n.output[0] == windows[5]).unwrap();
        assert_eq!(window.input[0], "x", "the input itself, unpadded");
        assert_eq!(constant(graph, &window.input[1]), [1, 2]);
        assert_eq!(constant(graph, &window.input[2]), [-1, i64::MAX]);
        assert_eq!(constant(graph, &window.input[4]), [2, 1], "every other row");
        let last = graph.node.last().unwrap();
        assert_eq!((last.op_type(), last.output[0].as_str()), ("Slice", "y"));
        assert_eq!(last.input[0], max.output[0]);
        assert_eq!(constant(graph, &last.input[3]), [3], "columns only");
        assert_eq!(constant(graph, &last.input[4]), [2]);
        // The depthwise rewrite alone leaves pools to IREE.
        assert!(rewritten(&original).is_none());
    }

    #[test]
    fn a_unit_stride_max_pool_is_the_max_of_its_windows_alone() {
        let original = max_pool(vec![ints("kernel_shape", &[2, 2]), ints("pads", &[0, 0, 0, 0])]);
        let out = rewritten_by(&original, GraphRewrite::ConvolutionsAsShifts).unwrap().0;
        assert_eq!(op_counts(&out, ["Slice", "Max"]), [4, 1]);
        let graph = out.graph.as_ref().unwrap();
        assert_eq!(graph.node.last().unwrap().output[0], "y");
        assert!(graph
            .node
            .iter()
            .filter(|n| n.op_type() == "Slice")
            .all(|n| n.input.len() == 4));
    }

    #[test]
    fn a_padded_max_pool_of_a_relu_pools_its_input_padded_with_zeros() {
        let with_pads = |pads: &[i64]| {
            let mut pool = node("MaxPool", &["r"], "y");
            pool.attribute = vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[2, 2]),
                ints("pads", pads),
            ];
            model(vec![node("Relu", &["x"], "r"), pool], Vec::new(), 17)
        };
        let (out, count, _) = rewritten_by(&with_pads(&[1, 1, 1, 1]), GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!(count, 1);
        let graph = out.graph.as_ref().unwrap();
        assert_defined_before_use(graph, &["x"]);
        let pad = graph.node.iter().find(|n| n.op_type() == "Pad").unwrap();
        assert_eq!(pad.input[0], "r");
        assert_eq!(pad.input.len(), 2, "the default pad value: zero");
        assert_eq!(constant(graph, &pad.input[1]), [0, 0, 1, 1, 0, 0, 1, 1]);
        let windows = graph
            .node
            .iter()
            .filter(|n| n.op_type() == "Slice" && n.input[0] == pad.output[0]);
        assert_eq!(windows.count(), 9);
        // A pad as wide as the window would leave windows of padding alone: zero is not -inf.
        assert!(rewritten_by(&with_pads(&[0, 0, 3, 0]), GraphRewrite::ConvolutionsAsShifts).is_none());
        assert!(rewritten_by(&with_pads(&[1, 1, 1]), GraphRewrite::ConvolutionsAsShifts).is_none());
    }

    #[test]
    fn a_padded_max_pool_of_joined_relus_or_of_their_pool_pools_them_padded_with_zeros() {
        let padded_pool = |input: &str, output: &str| {
            let mut pool = node("MaxPool", &[input], output);
            pool.attribute = vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])];
            pool
        };
        // GoogLeNet's modules: branches' Relus joined, the join pooled, that pool pooled again.
        let joined = |second: NodeProto| {
            model(
                vec![
                    node("Relu", &["x"], "a"),
                    second,
                    node("Concat", &["a", "b"], "j"),
                    padded_pool("j", "p"),
                    padded_pool("p", "y"),
                ],
                Vec::new(),
                17,
            )
        };
        let (out, count, _) =
            rewritten_by(&joined(node("Relu", &["x"], "b")), GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!(count, 2, "both pools");
        let graph = out.graph.as_ref().unwrap();
        assert_defined_before_use(graph, &["x"]);
        let pads: Vec<_> = graph.node.iter().filter(|n| n.op_type() == "Pad").collect();
        assert_eq!(pads.iter().map(|p| p.input[0].as_str()).collect::<Vec<_>>(), ["j", "p"]);
        assert!(pads.iter().all(|p| p.input.len() == 2), "zero padding");
        // A branch that may be negative (here a Neg) leaves both pools as they are.
        assert!(rewritten_by(&joined(node("Neg", &["x"], "b")), GraphRewrite::ConvolutionsAsShifts).is_none());
    }

    #[test]
    fn padded_rounded_up_dilated_indexed_large_and_1x1_max_pools_are_left_alone() {
        let with = |extra: Vec<AttributeProto>| {
            let mut attributes = vec![ints("kernel_shape", &[3, 3]), ints("strides", &[2, 2])];
            attributes.retain(|a| extra.iter().all(|e| e.name() != a.name()));
            attributes.extend(extra);
            max_pool(attributes)
        };
        let mut indexed = with(Vec::new());
        indexed.graph.as_mut().unwrap().node[0].output.push("indices".into());
        let unchanged = [
            (
                "padded, of a value that may be negative",
                with(vec![ints("pads", &[1, 1, 1, 1])]),
            ),
            (
                "same padding",
                with(vec![AttributeProto {
                    name: Some("auto_pad".into()),
                    r#type: Some(AttributeType::String as i32),
                    s: Some(b"SAME_UPPER".to_vec()),
                    ..AttributeProto::default()
                }]),
            ),
            ("ceil mode", with(vec![int("ceil_mode", 1)])),
            ("dilated", with(vec![ints("dilations", &[2, 2])])),
            ("indices", indexed),
            ("5x5", with(vec![ints("kernel_shape", &[5, 5])])),
            ("1x1", with(vec![ints("kernel_shape", &[1, 1])])),
            ("stride 3", with(vec![ints("strides", &[3, 3])])),
            ("3-D", with(vec![ints("kernel_shape", &[3, 3, 3])])),
            ("no kernel", max_pool(Vec::new())),
        ];
        for (what, original) in unchanged {
            assert!(
                rewritten_by(&original, GraphRewrite::ConvolutionsAsShifts).is_none(),
                "{what}"
            );
        }
    }

    /// A 1×1 convolution of `x` (filter `w`, bias `b` when asked) to `c`, pooled by a 2×2 stride-2
    /// average pool to `y`.
    fn conv_then_average_pool(bias: bool, conv_attributes: Vec<AttributeProto>, filter: &[i64]) -> ModelProto {
        let inputs: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        let mut pool = node("AveragePool", &["c"], "y");
        pool.attribute = vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])];
        model(
            vec![conv(inputs, "c", conv_attributes), pool],
            vec![weight("w", filter), weight("b", &[8])],
            17,
        )
    }

    #[test]
    fn an_average_pool_after_a_1x1_conv_runs_before_it() {
        let original = conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1]);
        let (out, count, done) = rewritten_by(&original, GraphRewrite::ConvolutionsAsShifts).unwrap();
        assert_eq!((count, done), (1, GraphRewrite::ConvolutionsAsShifts));
        let graph = out.graph.as_ref().unwrap();
        assert_defined_before_use(graph, &["x", "w", "b"]);
        assert_eq!(ops(&out), ["AveragePool", "Conv"]);
        let (pool, conv) = (&graph.node[0], &graph.node[1]);
        assert_eq!(pool.input, ["x"]);
        assert_eq!(pool.attribute, original.graph.as_ref().unwrap().node[1].attribute);
        assert_eq!(conv.input, [pool.output[0].as_str(), "w"]);
        assert_eq!(conv.output, ["y"]);
        // With a bias, the moved convolution adds it after itself, as the others do.
        let (out, _, _) = rewritten_by(
            &conv_then_average_pool(true, Vec::new(), &[8, 16, 1, 1]),
            GraphRewrite::ConvolutionsAsShifts,
        )
        .unwrap();
        assert_eq!(ops(&out), ["AveragePool", "Conv", "Constant", "Reshape", "Add"]);
        assert_eq!(out.graph.as_ref().unwrap().node.last().unwrap().output, ["y"]);
        // The depthwise rewrite alone leaves both in place.
        assert!(rewritten(&original).is_none());
    }

    #[test]
    fn pools_of_other_convolutions_or_of_values_read_elsewhere_stay_after_them() {
        let pool_moved = |model: &ModelProto| {
            rewritten_by(model, GraphRewrite::ConvolutionsAsShifts)
                .is_some_and(|(out, _, _)| ops(&out).first() == Some(&"AveragePool"))
        };
        let mut read_twice = conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1]);
        read_twice.graph.as_mut().unwrap().node.push(node("Relu", &["c"], "r"));
        let mut graph_output = conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1]);
        graph_output.graph.as_mut().unwrap().output.push(ValueInfoProto {
            name: Some("c".into()),
            ..ValueInfoProto::default()
        });
        let mut padded_pool = conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1]);
        padded_pool.graph.as_mut().unwrap().node[1]
            .attribute
            .push(ints("pads", &[1, 1, 1, 1]));
        let mut rounded_up = conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1]);
        rounded_up.graph.as_mut().unwrap().node[1]
            .attribute
            .push(int("ceil_mode", 1));
        let mut with_subgraph = conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1]);
        let mut branch = node("If", &["cond"], "z");
        branch.attribute.push(AttributeProto {
            name: Some("then_branch".into()),
            r#type: Some(AttributeType::Graph as i32),
            g: Some(GraphProto::default()),
            ..AttributeProto::default()
        });
        with_subgraph.graph.as_mut().unwrap().node.push(branch);
        let unchanged = [
            ("read twice", read_twice),
            ("a graph output", graph_output),
            ("padded pool", padded_pool),
            ("rounded-up pool", rounded_up),
            ("subgraphs", with_subgraph),
            ("3x3 filter", conv_then_average_pool(false, Vec::new(), &[8, 16, 3, 3])),
            (
                "strided",
                conv_then_average_pool(false, vec![ints("strides", &[2, 2])], &[8, 16, 1, 1]),
            ),
            (
                "padded conv",
                conv_then_average_pool(false, vec![ints("pads", &[1, 1, 1, 1])], &[8, 16, 1, 1]),
            ),
            (
                "grouped",
                conv_then_average_pool(false, vec![int("group", 2)], &[8, 8, 1, 1]),
            ),
        ];
        for (what, original) in unchanged {
            assert!(!pool_moved(&original), "{what}");
        }
        assert!(pool_moved(&conv_then_average_pool(false, Vec::new(), &[8, 16, 1, 1])));
    }

    #[test]
    fn a_conv_strided_only_along_rows_needs_no_subsample_and_one_along_columns_no_row_steps() {
        let subsamples = |model: &ModelProto| {
            let graph = model.graph.as_ref().unwrap();
            graph.node.iter().any(|n| n.output[0].ends_with("subsampled"))
        };
        let (rows_only, window_steps) = strided(&[2, 1]);
        assert_eq!(window_steps, vec![Some(vec![2, 1]); 9]);
        assert!(!subsamples(&rows_only));
        let (columns_only, window_steps) = strided(&[1, 2]);
        assert_eq!(window_steps, vec![None; 9]);
        assert!(subsamples(&columns_only));
    }

    #[test]
    fn without_pads_or_bias_the_last_tap_sum_is_the_output() {
        let attributes = vec![int("group", 4)];
        let original = model(
            vec![conv(&["x", "w"], "y", attributes)],
            vec![weight("w", &[4, 1, 2, 2])],
            13,
        );
        let (out, count) = rewritten(&original).unwrap();
        assert_eq!(count, 1);
        let ops = ops(&out);
        assert!(!ops.contains(&"Pad"), "{ops:?}");
        assert_eq!(ops.iter().filter(|op| **op == "Mul").count(), 4);
        assert_eq!(
            ops.iter().filter(|op| **op == "Add").count(),
            3,
            "one chain of four taps"
        );
        let last = out.graph.as_ref().unwrap().node.last().unwrap();
        assert_eq!(
            (last.op_type(), last.output.as_slice()),
            ("Add", ["y".to_string()].as_slice())
        );
    }

    #[test]
    fn other_convolutions_and_unsuitable_models_are_left_alone() {
        let with = |extra: AttributeProto| {
            let mut attributes = depthwise_attributes();
            attributes.retain(|a| a.name() != extra.name());
            attributes.push(extra);
            model(
                vec![conv(&["x", "w", "b"], "y", attributes)],
                vec![weight("w", &[4, 1, 3, 3]), weight("b", &[4])],
                17,
            )
        };
        let unchanged = [
            ("stride 3", with(ints("strides", &[3, 3]))),
            ("dilated", with(ints("dilations", &[2, 2]))),
            (
                "7x7",
                model(
                    vec![conv(&["x", "w"], "y", vec![int("group", 4)])],
                    vec![weight("w", &[4, 1, 7, 7])],
                    17,
                ),
            ),
            ("grouped but not depthwise", with(int("group", 2))),
            (
                "same-padded",
                with(AttributeProto {
                    name: Some("auto_pad".into()),
                    s: Some(b"SAME_UPPER".to_vec()),
                    ..AttributeProto::default()
                }),
            ),
            (
                "regular",
                model(
                    vec![conv(&["x", "w"], "y", vec![])],
                    vec![weight("w", &[4, 3, 3, 3])],
                    17,
                ),
            ),
            (
                "weight computed in the graph",
                model(vec![conv(&["x", "w"], "y", depthwise_attributes())], vec![], 17),
            ),
            (
                "opset 10",
                model(
                    vec![conv(&["x", "w"], "y", depthwise_attributes())],
                    vec![weight("w", &[4, 1, 3, 3])],
                    10,
                ),
            ),
        ];
        for (what, original) in unchanged {
            assert!(rewritten(&original).is_none(), "{what}");
        }
        let mut external = with(int("group", 4));
        external.graph.as_mut().unwrap().initializer[0].data_location = Some(EXTERNAL_DATA);
        assert!(rewritten(&external).is_none(), "external data");
        assert!(rewrite(
            b"\xff\xff not a model",
            GraphRewrite::DepthwiseAsShifts,
            KernelUse::Portable
        )
        .is_none());
        let plain = with(int("group", 4));
        assert!(rewrite(&plain.encode_to_vec(), GraphRewrite::None, KernelUse::Portable).is_none());
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for rewrite in GraphRewrite::ALL {
            assert_eq!(GraphRewrite::from_name(rewrite.name()).unwrap(), rewrite);
        }
        let error = GraphRewrite::from_name("fuse-everything").unwrap_err().to_string();
        assert!(
            error.contains("'fuse-everything'") && error.contains("depthwise-as-shifts"),
            "{error}"
        );
    }

    #[test]
    fn new_names_never_collide_with_the_graphs() {
        let taken = "y.halo_depthwise.axes";
        let original = model(
            vec![
                node("Identity", &["x"], taken),
                conv(&[taken, "w"], "y", depthwise_attributes()),
            ],
            vec![weight("w", &[4, 1, 3, 3])],
            17,
        );
        let (out, _) = rewritten(&original).unwrap();
        let outputs: Vec<&str> = out
            .graph
            .as_ref()
            .unwrap()
            .node
            .iter()
            .map(|n| n.output[0].as_str())
            .collect();
        assert_eq!(outputs.iter().filter(|o| **o == taken).count(), 1);
        assert!(outputs.contains(&"y.halo_depthwise.axes.1"), "{outputs:?}");
    }
}
