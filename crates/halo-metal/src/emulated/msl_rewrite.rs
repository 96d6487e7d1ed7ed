//! The few textual changes that let C++ for OpenCL compile SPIRV-Cross's MSL for the host:
//! - Metal's function-style vector construction (`float4(a, b, c, d)`, `uint2(x)`) becomes
//!   OpenCL's vector literal (`(float4)(a, b, c, d)`), which means the same;
//! - floating-point literals without a suffix (`0.5`) get `f`: Metal has no `double`, so its
//!   unsuffixed literals are `float`, where C++ would compute in `double`;
//! - a kernel's `threadgroup` variables, which C++ for OpenCL allows only in real kernels, become
//!   reference parameters of the kernel ([`ThreadgroupVariable`]): the entry that runs the
//!   threadgroup's threads owns their storage, so every thread of one threadgroup sees the same
//!   variable and each threadgroup its own;
//! - in a kernel's body, a barrier after each top-level statement that touches a binding and
//!   is followed by more ([`simd_lockstep_points`]): a GPU runs a simd-group's threads in
//!   lockstep, and IREE's kernels rely on it when a threadgroup is one simd-group (a
//!   convolution zeroes its outputs in one loop and accumulates into them, from other threads,
//!   in the next, with no barrier between);
//! - the runtime array of each struct a binding points to (`float _m0[1];`) becomes a
//!   `halo_binding_array<float>`, whose elements are checked against the dispatch's bindings
//!   ([`checked_binding_arrays`]).

/// A `threadgroup` variable moved out of a kernel's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadgroupVariable {
    /// Its element type.
    pub type_name: String,
    /// Its name.
    pub name: String,
    /// Its array dimensions as written (`[64]`), or empty.
    pub dimensions: String,
}

/// The vector types Metal constructs with function syntax.
const VECTOR_TYPES: [&str; 10] = [
    "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float", "half",
];

/// `source` with vector constructions rewritten.
pub fn vector_literals(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len() + source.len() / 16);
    let mut i = 0;
    while i < bytes.len() {
        if let Some(len) = vector_constructor_at(source, i) {
            out.push('(');
            out.push_str(&source[i..i + len]);
            out.push(')');
            i += len;
            continue;
        }
        let c = source[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// `source` with each boolean vector declared with a value (`bool4 x = a < b;`) declared `auto`:
/// a comparison of vectors gives lane masks as wide as their elements, which no one type of
/// C++ for OpenCL holds for every element width.
pub fn bool_vector_declarations(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        let rest = &line[indent..];
        let declared = ["bool2 ", "bool3 ", "bool4 "].iter().find_map(|t| rest.strip_prefix(t));
        match declared.filter(|d| d.split_once(" = ").is_some_and(|(name, _)| is_identifier(name))) {
            Some(declaration) => {
                out.push_str(&line[..indent]);
                out.push_str("auto ");
                out.push_str(declaration);
            }
            None => out.push_str(line),
        }
    }
    out
}

fn is_identifier(text: &str) -> bool {
    text.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `source` with every unsuffixed floating-point literal made a `float` one.
pub fn float_literals(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len() + source.len() / 32);
    let mut i = 0;
    while i < bytes.len() {
        let starts_number = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b'.'));
        if !starts_number {
            let c = source[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let end = number_end(bytes, i);
        let literal = &source[i..end];
        out.push_str(literal);
        let floating = literal.contains(['.', 'e', 'E']) && !literal.starts_with("0x");
        let suffixed = bytes.get(end).is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
        if floating && !suffixed {
            out.push('f');
        }
        i = end;
    }
    out
}

/// Where the decimal literal starting at `start` ends: digits, a point, digits, an exponent.
fn number_end(bytes: &[u8], start: usize) -> usize {
    let digits = |mut at: usize| {
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        at
    };
    if bytes[start..].starts_with(b"0x") || bytes[start..].starts_with(b"0X") {
        let mut at = start + 2;
        while bytes.get(at).is_some_and(u8::is_ascii_hexdigit) {
            at += 1;
        }
        return at;
    }
    let mut at = digits(start);
    if bytes.get(at) == Some(&b'.') {
        at = digits(at + 1);
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(at + 1), Some(b'+' | b'-')));
        if bytes.get(at + 1 + sign).is_some_and(u8::is_ascii_digit) {
            at = digits(at + 1 + sign);
        }
    }
    at
}

/// The length of a vector type name at `at` that starts a function-style construction
/// (`float4(`), preceded by no identifier character.
fn vector_constructor_at(source: &str, at: usize) -> Option<usize> {
    let before = source[..at].chars().next_back();
    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let rest = &source[at..];
    VECTOR_TYPES.iter().find_map(|element| {
        let after = rest.strip_prefix(element)?;
        let width = after.chars().next().filter(|c| matches!(c, '2' | '3' | '4'))?;
        after[1..].starts_with('(').then_some(element.len() + width.len_utf8())
    })
}

/// Moves the `threadgroup` declarations at the top level of kernel `entry_point`'s body into
/// its parameter list; returns the rewritten source and the variables moved, in order.
pub fn hoist_threadgroup_variables(source: &str, entry_point: &str) -> (String, Vec<ThreadgroupVariable>) {
    let header = format!("kernel void {entry_point}(");
    let Some(start) = source.find(&header) else {
        return (source.to_string(), Vec::new());
    };
    let Some(body) = source[start..].find("\n{\n").map(|at| start + at + 3) else {
        return (source.to_string(), Vec::new());
    };
    let mut variables = Vec::new();
    let mut kept = String::new();
    let mut end = body;
    for line in source[body..].split_inclusive('\n') {
        if line.starts_with('}') {
            break;
        }
        end += line.len();
        match parse_declaration(line) {
            Some(variable) => variables.push(variable),
            None => kept.push_str(line),
        }
    }
    if variables.is_empty() {
        return (source.to_string(), variables);
    }
    let params_end = source[start..body].rfind(')').map_or(body, |at| start + at);
    let extra: String = variables
        .iter()
        .map(|v| {
            if v.dimensions.is_empty() {
                format!(", threadgroup {}& {}", v.type_name, v.name)
            } else {
                format!(", threadgroup {} (&{}){}", v.type_name, v.name, v.dimensions)
            }
        })
        .collect();
    let rewritten = format!(
        "{}{extra}{}{kept}{}",
        &source[..params_end],
        &source[params_end..body],
        &source[end..]
    );
    (rewritten, variables)
}

/// `source` with the runtime arrays of the structs that argument buffers point to made checked
/// arrays: every `T name[1];` member of a struct named by a `device T*` member with an
/// `[[id(n)]]` attribute.
pub fn checked_binding_arrays(source: &str) -> String {
    let mut bound_types: Vec<&str> = source
        .lines()
        .filter_map(|line| {
            line.split_once("[[id(")?
                .0
                .split_whitespace()
                .find_map(|t| t.strip_suffix('*'))
        })
        .collect();
    bound_types.sort_unstable();
    bound_types.dedup();
    let mut out = String::with_capacity(source.len() + 64 * bound_types.len());
    let mut in_bound_struct = false;
    for line in source.split_inclusive('\n') {
        if let Some(name) = line.strip_prefix("struct ") {
            in_bound_struct = bound_types.contains(&name.trim_end());
        } else if line.starts_with("};") {
            in_bound_struct = false;
        }
        match line.trim_end().strip_suffix("[1];").filter(|_| in_bound_struct) {
            Some(member) => match member.trim_start().rsplit_once(' ') {
                Some((element, name)) => out.push_str(&format!("    halo_binding_array<{element}> {name};\n")),
                None => out.push_str(line),
            },
            None => out.push_str(line),
        }
    }
    out
}

/// Kernel `entry_point` in `source` with `halo_barrier();` after each top-level statement of its
/// body that touches memory threads share (a binding, through `spvDescriptorSet`, or one of the
/// `threadgroup` variables `shared`) and is not the body's last; and whether any was added (the
/// kernel then runs its threads in lockstep).
pub fn simd_lockstep_points(source: &str, entry_point: &str, shared: &[ThreadgroupVariable]) -> (String, bool) {
    let header = format!("kernel void {entry_point}(");
    let Some(body) = source
        .find(&header)
        .and_then(|start| source[start..].find("\n{\n").map(|at| start + at + 3))
    else {
        return (source.to_string(), false);
    };
    let bytes = source.as_bytes();
    let (mut braces, mut parens) = (0i32, 0i32);
    let mut statement_start = body;
    let mut points = Vec::new();
    let mut end = bytes.len();
    for at in body..bytes.len() {
        let statement_end = match bytes[at] {
            b'(' => {
                parens += 1;
                false
            }
            b')' => {
                parens -= 1;
                false
            }
            b'{' => {
                braces += 1;
                false
            }
            b'}' if braces == 0 => {
                end = at;
                break;
            }
            b'}' => {
                braces -= 1;
                let next = source[at + 1..].trim_start();
                braces == 0 && !next.starts_with("else") && !next.starts_with("while")
            }
            b';' => braces == 0 && parens == 0,
            _ => false,
        };
        if statement_end {
            let statement = &source[statement_start..=at];
            if statement.contains("spvDescriptorSet") || shared.iter().any(|v| statement.contains(v.name.as_str())) {
                points.push(at + 1);
            }
            statement_start = at + 1;
        }
    }
    // A barrier after the last statement orders nothing.
    let last_statement = source[..end].trim_end().len();
    points.retain(|&point| point < last_statement);
    let mut out = String::with_capacity(source.len() + 24 * points.len());
    let mut copied = 0;
    for &point in &points {
        out.push_str(&source[copied..point]);
        out.push_str("\n    halo_barrier();");
        copied = point;
    }
    out.push_str(&source[copied..]);
    (out, !points.is_empty())
}

/// `    threadgroup T name[dims];` (four spaces: the kernel body's top level).
fn parse_declaration(line: &str) -> Option<ThreadgroupVariable> {
    let declaration = line.strip_prefix("    threadgroup ")?.trim_end().strip_suffix(';')?;
    let (type_name, rest) = declaration.rsplit_once(' ')?;
    let (name, dimensions) = match rest.find('[') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    (valid(name) && !type_name.contains('=')).then(|| ThreadgroupVariable {
        type_name: type_name.trim().to_string(),
        name: name.to_string(),
        dimensions: dimensions.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_constructions_become_opencl_literals() {
        assert_eq!(
            vector_literals("float4 v = float4(a, b) + uint2(x); myfloat4(y); float4 w;"),
            "float4 v = (float4)(a, b) + (uint2)(x); myfloat4(y); float4 w;"
        );
        assert_eq!(
            vector_literals("select(float4(0.0), f, isnan(float4(1.0)))"),
            "select((float4)(0.0), f, isnan((float4)(1.0)))"
        );
    }

    #[test]
    fn boolean_vectors_declared_with_a_value_become_auto() {
        assert_eq!(
            bool_vector_declarations("    bool4 _1 = a < b;\n    bool2 _2;\n    bool4 x = f(bool4(y));\n"),
            "    auto _1 = a < b;\n    bool2 _2;\n    auto x = f(bool4(y));\n"
        );
    }

    #[test]
    fn unsuffixed_floating_literals_become_float() {
        assert_eq!(
            float_literals("x = 0.0 + 1.5e-38 * y2.x + 3u + 0.5f + 2.0h + 7 + 1e5 + 0x1f + _m0[1]; a.5"),
            "x = 0.0f + 1.5e-38f * y2.x + 3u + 0.5f + 2.0h + 7 + 1e5f + 0x1f + _m0[1]; a.5"
        );
    }

    #[test]
    fn statements_touching_bindings_are_followed_by_a_lockstep_point() {
        let source = "kernel void k(constant A& spvDescriptorSet0 [[buffer(0)]])\n{\n    uint i = 3u;\n    for (;;)\n    {\n        \
                      if (i < 2u)\n        {\n            (*spvDescriptorSet0.x)._m0[i] = 0.0;\n        }\n        else\n        \
                      {\n            break;\n        }\n    }\n    if (i > 1u)\n    {\n        i = 2u;\n    }\n    else\n    {\n    \
                      }\n    (*spvDescriptorSet0.x)._m0[i] += 1.0;\n}\n";
        let (rewritten, added) = simd_lockstep_points(source, "k", &[]);
        assert!(added);
        assert_eq!(rewritten.matches("halo_barrier();").count(), 1, "{rewritten}");
        assert!(
            rewritten.contains("    }\n    halo_barrier();\n    if (i > 1u)"),
            "{rewritten}"
        );
        let elementwise = "kernel void e(constant A& spvDescriptorSet0 [[buffer(0)]])\n{\n    uint i = 3u;\n    \
                           (*spvDescriptorSet0.x)._m0[i] = 1.0;\n}\n";
        assert_eq!(
            simd_lockstep_points(elementwise, "e", &[]),
            (elementwise.to_string(), false)
        );
        assert_eq!(
            simd_lockstep_points(elementwise, "absent", &[]),
            (elementwise.to_string(), false)
        );
    }

    #[test]
    fn the_runtime_arrays_bindings_point_to_become_checked() {
        let source = "struct _7\n{\n    float4 _m0[1];\n};\n\nstruct _9\n{\n    uint _m0[1];\n};\n\nstruct spvDescriptorSetBuffer0\n{\n    device _7* a [[id(0)]];\n    const device _7* b [[id(1)]];\n};\n";
        assert_eq!(
            checked_binding_arrays(source),
            source.replace("    float4 _m0[1];", "    halo_binding_array<float4> _m0;"),
            "_9 is no binding's, so it keeps its array"
        );
    }

    #[test]
    fn threadgroup_variables_become_parameters() {
        let source = "kernel void k(uint3 t [[thread_position_in_threadgroup]])\n{\n    threadgroup _2 mem;\n    threadgroup float sums[64];\n    mem._m0[t.x] = 0.0;\n}\n\nkernel void other()\n{\n    threadgroup int z;\n}\n";
        let (rewritten, variables) = hoist_threadgroup_variables(source, "k");
        assert_eq!(
            rewritten,
            "kernel void k(uint3 t [[thread_position_in_threadgroup]], threadgroup _2& mem, threadgroup float (&sums)[64])\n{\n    mem._m0[t.x] = 0.0;\n}\n\nkernel void other()\n{\n    threadgroup int z;\n}\n"
        );
        assert_eq!(variables.len(), 2);
        assert_eq!(variables[1].dimensions, "[64]");
        let (unchanged, none) = hoist_threadgroup_variables(source, "absent");
        assert_eq!((unchanged.as_str(), none.len()), (source, 0));
    }
}
