//! Changes made to an ONNX graph before it is imported, where IREE 3.13 compiles an operator to
//! much slower code than an equivalent form of it.
//!
//! The one rewrite so far is for depthwise convolutions (one 3×3 filter per channel, as
//! MobileNet and ShuffleNet have): IREE turns ONNX's NCHW depthwise `Conv` into code that runs at
//! scalar speed (iree-org/iree#10635), with or without im2col or a channels-last layout. The same
//! sum written as shifted slices of the padded input, each scaled per channel, becomes
//! elementwise dispatches that IREE fuses and vectorizes along the image rows. On a 2-core AMD
//! EPYC (AVX2; `iree-benchmark-module`, one operator, `fast-o3` flags) that took 32×112×112 from
//! 7.2 to 0.55 ms, 192×28×28 from 2.3 to 0.61 ms and 576×14×14 from 1.4 to 0.61 ms; the full
//! MobileNet-v2 went from 23.5 to 17.5 ms per call. A stride-2 convolution is the stride-1 sum
//! subsampled (see [`MAX_STRIDE`]): strided windows would not vectorize.

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
    /// Depthwise convolutions with filters up to 3×3 and strides up to 2 become sums of
    /// per-channel-scaled shifted slices of their padded input (subsampled when strided).
    DepthwiseAsShifts,
}

impl GraphRewrite {
    /// Every rewrite, in the order the CLI lists them.
    pub const ALL: [GraphRewrite; 2] = [GraphRewrite::None, GraphRewrite::DepthwiseAsShifts];

    /// The name reports and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            GraphRewrite::None => "none",
            GraphRewrite::DepthwiseAsShifts => "depthwise-as-shifts",
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
}

/// Rewrites ONNX model `bytes`; `None` when the rewrite changes nothing: no node qualifies, the
/// model does not decode (the importer will say why), its operator set predates the node forms
/// the rewrite writes (opset 11), or its weights live in external files, which a rewritten copy
/// elsewhere could not find.
pub(crate) fn rewrite(bytes: &[u8], rewrite: GraphRewrite) -> Option<Rewritten> {
    if rewrite == GraphRewrite::None {
        return None;
    }
    let mut model = ModelProto::decode(bytes).ok()?;
    if default_opset(&model).is_none_or(|version| version < MIN_OPSET) || has_external_data(&model) {
        return None;
    }
    let graph = model.graph.as_mut()?;
    let nodes = decompose_depthwise(graph);
    (nodes > 0).then(|| Rewritten {
        bytes: model.encode_to_vec(),
        nodes,
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

/// The largest stride rewritten. A stride-2 convolution is computed at stride 1 and subsampled:
/// four times the arithmetic, but vectorized. On MobileNet-v2's shapes (halo benchmark-module,
/// one operator) that took 96×112×112 from 4.2 to 2.2 ms and 144×56×56 from 0.85 to 0.4 ms,
/// 192×28×28 stayed at 0.45 ms and 576×14×14 went from 0.26 to 0.35 ms; whole programs of 40
/// calls (paired runs, whole process): MobileNet-v2 0.96× the time of the stride-1-only rewrite,
/// ShuffleNet v2 1.00×.
const MAX_STRIDE: i64 = 2;

/// A depthwise convolution the rewrite can replace.
struct Depthwise<'a> {
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

impl<'a> Depthwise<'a> {
    /// `node` as a depthwise convolution with unit dilations and strides of at most 2, when it is one whose
    /// filter `weights` shows to have one input channel per group and one group per channel.
    fn of(node: &'a NodeProto, weights: &HashMap<&str, &[i64]>) -> Option<Depthwise<'a>> {
        if node.op_type() != "Conv" || !matches!(node.domain(), "" | "ai.onnx") || node.output.len() != 1 {
            return None;
        }
        let input = node.input.first().filter(|name| !name.is_empty())?;
        let weight = node.input.get(1)?;
        let &[channels, 1, height, width] = *weights.get(weight.as_str())? else {
            return None;
        };
        let ints = |name: &str| {
            node.attribute
                .iter()
                .find(|a| a.name() == name)
                .map(|a| a.ints.as_slice())
        };
        let int = |name: &str| node.attribute.iter().find(|a| a.name() == name).map(|a| a.i());
        let all_ones = |values: Option<&[i64]>| values.is_none_or(|v| v.len() == 2 && v.iter().all(|&x| x == 1));
        let strides = match ints("strides") {
            None => [1, 1],
            Some(&[rows, columns]) if [rows, columns].iter().all(|s| (1..=MAX_STRIDE).contains(s)) => [rows, columns],
            Some(_) => return None,
        };
        let auto_pad = node.attribute.iter().find(|a| a.name() == "auto_pad").map(|a| a.s());
        let pads = match ints("pads") {
            None => [0; 4],
            Some(&[top, left, bottom, right]) if [top, left, bottom, right].iter().all(|&p| p >= 0) => {
                [top, left, bottom, right]
            }
            Some(_) => return None,
        };
        let plain = channels > 1
            && (1..=MAX_KERNEL_SIDE).contains(&height)
            && (1..=MAX_KERNEL_SIDE).contains(&width)
            && int("group") == Some(channels)
            && all_ones(ints("dilations"))
            && auto_pad.is_none_or(|mode| mode == b"NOTSET")
            && ints("kernel_shape").is_none_or(|k| k == [height, width]);
        plain.then(|| Depthwise {
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

/// Replaces every qualifying depthwise convolution of `graph` (not of its subgraphs) in place;
/// returns how many.
fn decompose_depthwise(graph: &mut GraphProto) -> usize {
    let weights: HashMap<&str, &[i64]> = graph
        .initializer
        .iter()
        .map(|tensor| (tensor.name(), tensor.dims.as_slice()))
        .collect();
    let mut names = NameSource::of(graph);
    let mut replaced = 0;
    let mut nodes = Vec::with_capacity(graph.node.len());
    for node in &graph.node {
        match Depthwise::of(node, &weights) {
            Some(conv) => {
                nodes.extend(shifted_sum(&conv, &mut names));
                replaced += 1;
            }
            None => nodes.push(node.clone()),
        }
    }
    graph.node = nodes;
    replaced
}

/// The nodes computing `conv`: y = bias + Σ over taps (i, j) of w[:, 0, i, j] · pad(x)[:, :, i.., j..].
fn shifted_sum(conv: &Depthwise, names: &mut NameSource) -> Vec<NodeProto> {
    let mut out = NodeWriter {
        nodes: Vec::new(),
        names,
        prefix: format!("{}.halo_depthwise", conv.output),
    };
    let [top, left, bottom, right] = conv.pads;
    let padded = if conv.pads == [0; 4] {
        conv.input.to_string()
    } else {
        let pads = out.constant("pads", &[0, 0, top, left, 0, 0, bottom, right]);
        out.node("Pad", &[conv.input, &pads], "padded")
    };
    let axes = out.constant("axes", &[2, 3]);
    let per_channel = out.constant("per_channel_shape", &[1, -1, 1, 1]);
    let [height, width] = conv.kernel;
    let mut sum: Option<String> = None;
    for i in 0..height {
        for j in 0..width {
            let tap = format!("tap{i}_{j}");
            let starts = out.constant(&format!("{tap}.starts"), &[i, j]);
            // The window of tap (i, j) stops `height - 1 - i` rows before the padded input's end.
            let ends = [end_before(height - 1 - i), end_before(width - 1 - j)];
            let ends = out.constant(&format!("{tap}.ends"), &ends);
            let window = out.node("Slice", &[&padded, &starts, &ends, &axes], &format!("{tap}.window"));
            let filter_ends = out.constant(&format!("{tap}.filter_ends"), &[i + 1, j + 1]);
            let filter = out.node(
                "Slice",
                &[conv.weight, &starts, &filter_ends, &axes],
                &format!("{tap}.filter"),
            );
            let scale = out.node("Reshape", &[&filter, &per_channel], &format!("{tap}.scale"));
            let product = out.node("Mul", &[&window, &scale], &format!("{tap}.product"));
            sum = Some(match sum {
                None => product,
                Some(previous) => out.node("Add", &[&previous, &product], &format!("{tap}.sum")),
            });
        }
    }
    let mut sum = sum.unwrap_or_default();
    if conv.strides != [1, 1] {
        // The strided convolution is every stride-th value of the unit-stride one: computed in
        // full, the windows stay contiguous rows that vectorize (strided windows do not).
        let starts = out.constant("subsample.starts", &[0, 0]);
        let ends = out.constant("subsample.ends", &[i64::MAX, i64::MAX]);
        let steps = out.constant("subsample.steps", &conv.strides);
        sum = out.node("Slice", &[&sum, &starts, &ends, &axes, &steps], "subsampled");
    }
    if let Some(bias) = conv.bias {
        let bias = out.node("Reshape", &[bias, &per_channel], "bias");
        out.node("Add", &[&sum, &bias], "output");
    }
    // The last node computes the convolution's value, under the convolution's output name.
    if let Some(last) = out.nodes.last_mut() {
        last.output = vec![conv.output.to_string()];
    }
    out.nodes
}

/// Appends nodes whose values get fresh names under one prefix.
struct NodeWriter<'a> {
    nodes: Vec<NodeProto>,
    names: &'a mut NameSource,
    prefix: String,
}

impl NodeWriter<'_> {
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
        let output = self.node("Constant", &[], part);
        let tensor = TensorProto {
            dims: vec![values.len() as i64],
            data_type: Some(DataType::Int64 as i32),
            int64_data: values.to_vec(),
            ..TensorProto::default()
        };
        if let Some(node) = self.nodes.last_mut() {
            node.attribute = vec![AttributeProto {
                name: Some("value".into()),
                r#type: Some(AttributeType::Tensor as i32),
                t: Some(tensor),
                ..AttributeProto::default()
            }];
        }
        output
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

    fn ints(name: &str, values: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Ints as i32),
            ints: values.to_vec(),
            ..AttributeProto::default()
        }
    }

    fn int(name: &str, value: i64) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(value),
            ..AttributeProto::default()
        }
    }

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
        rewrite(&model.encode_to_vec(), GraphRewrite::DepthwiseAsShifts)
            .map(|r| (ModelProto::decode(r.bytes.as_slice()).unwrap(), r.nodes))
    }

    fn ops(model: &ModelProto) -> Vec<&str> {
        model.graph.as_ref().unwrap().node.iter().map(|n| n.op_type()).collect()
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
        // Every value is defined once, and defined before it is used.
        let mut defined: HashSet<&str> = ["x", "w", "b"].into();
        for n in &graph.node {
            for input in &n.input {
                assert!(defined.contains(input.as_str()), "{input} used before it is defined");
            }
            for output in &n.output {
                assert!(defined.insert(output), "{output} defined twice");
            }
        }
        // The bottom-right tap's window runs to the end of both axes; the top-left one stops
        // two rows and two columns short.
        let constant = |name: &str| {
            let node = graph.node.iter().find(|n| n.output[0] == name).unwrap();
            node.attribute[0].t.as_ref().unwrap().int64_data.clone()
        };
        assert_eq!(constant("c.halo_depthwise.tap0_0.ends"), [-2, -2]);
        assert_eq!(constant("c.halo_depthwise.tap2_2.ends"), [i64::MAX, i64::MAX]);
        assert_eq!(constant("c.halo_depthwise.tap1_2.ends"), [-1, i64::MAX]);
        assert_eq!(constant("c.halo_depthwise.pads"), [0, 0, 1, 1, 0, 0, 1, 1]);
    }

    #[test]
    fn a_stride_2_conv_is_the_unit_stride_sum_subsampled_then_biased() {
        let mut attributes = depthwise_attributes();
        attributes.retain(|a| a.name() != "strides");
        attributes.push(ints("strides", &[2, 1]));
        let original = model(
            vec![conv(&["x", "w", "b"], "y", attributes)],
            vec![weight("w", &[4, 1, 3, 3]), weight("b", &[4])],
            17,
        );
        let (out, count) = rewritten(&original).unwrap();
        assert_eq!(count, 1);
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
        assert_eq!(subsample.input[0], "y.halo_depthwise.tap2_2.sum");
        let steps = graph.node.iter().find(|n| n.output[0] == subsample.input[4]).unwrap();
        assert_eq!(steps.attribute[0].t.as_ref().unwrap().int64_data, [2, 1]);
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
                "5x5",
                model(
                    vec![conv(&["x", "w"], "y", vec![int("group", 4)])],
                    vec![weight("w", &[4, 1, 5, 5])],
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
        assert!(rewrite(b"\xff\xff not a model", GraphRewrite::DepthwiseAsShifts).is_none());
        let plain = with(int("group", 4));
        assert!(rewrite(&plain.encode_to_vec(), GraphRewrite::None).is_none());
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
