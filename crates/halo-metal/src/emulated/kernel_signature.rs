//! What a kernel of SPIRV-Cross's MSL takes, read from its source: which parameter is the
//! argument buffer (and which member holds which HAL binding), which the push constants, and
//! which builtin each other parameter is. The emulated device calls kernels through a wrapper
//! written from this.

use halo_hal::{Error, Result};

/// A thread's position the kernel asks for, by Metal's attribute name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `thread_position_in_threadgroup`.
    ThreadInThreadgroup,
    /// `threadgroup_position_in_grid`.
    ThreadgroupInGrid,
    /// `thread_position_in_grid`.
    ThreadInGrid,
    /// `threads_per_threadgroup`.
    ThreadsPerThreadgroup,
    /// `threadgroups_per_grid`.
    ThreadgroupsPerGrid,
    /// `thread_index_in_threadgroup` (the flattened position).
    ThreadIndexInThreadgroup,
    /// `thread_index_in_simdgroup` (the lane).
    ThreadIndexInSimdgroup,
    /// `simdgroup_index_in_threadgroup`.
    SimdgroupIndexInThreadgroup,
    /// `threads_per_simdgroup` (32, as on Apple GPUs).
    ThreadsPerSimdgroup,
}

impl Builtin {
    fn from_attribute(attribute: &str) -> Option<Self> {
        Some(match attribute {
            "thread_position_in_threadgroup" => Builtin::ThreadInThreadgroup,
            "threadgroup_position_in_grid" => Builtin::ThreadgroupInGrid,
            "thread_position_in_grid" => Builtin::ThreadInGrid,
            "threads_per_threadgroup" => Builtin::ThreadsPerThreadgroup,
            "threadgroups_per_grid" => Builtin::ThreadgroupsPerGrid,
            "thread_index_in_threadgroup" => Builtin::ThreadIndexInThreadgroup,
            "thread_index_in_simdgroup" => Builtin::ThreadIndexInSimdgroup,
            "simdgroup_index_in_threadgroup" => Builtin::SimdgroupIndexInThreadgroup,
            "threads_per_simdgroup" => Builtin::ThreadsPerSimdgroup,
            _ => return None,
        })
    }
}

/// One parameter of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// The argument buffer: a struct (`type_name`) of one pointer member per binding.
    ArgumentBuffer {
        /// The struct's name.
        type_name: String,
        /// Its members as (name, HAL binding ordinal from `[[id(n)]]`), in declaration order.
        members: Vec<(String, u32)>,
    },
    /// The push constants: a struct (`type_name`) over the 32-bit constants.
    PushConstants {
        /// The struct's name.
        type_name: String,
    },
    /// A builtin position.
    Builtin(Builtin),
}

/// The parameters of kernel `entry_point` in `source`, in order.
///
/// # Errors
/// `InvalidArgument` when the source has no such kernel or a parameter cannot be read;
/// `Unimplemented` naming a builtin the emulated device does not provide.
pub fn read(source: &str, entry_point: &str) -> Result<Vec<Param>> {
    let start = format!("kernel void {entry_point}(");
    let at = source
        .find(&start)
        .ok_or_else(|| Error::invalid_argument(format!("the MSL has no kernel '{entry_point}'")))?
        + start.len();
    let end = closing_paren(&source[at..])
        .ok_or_else(|| Error::invalid_argument(format!("kernel '{entry_point}': its parameter list does not end")))?;
    split_top_level(&source[at..at + end])
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .map(|param| read_param(source, entry_point, param.trim()))
        .collect()
}

/// Which of x, y and z kernel `entry_point` tells its threads apart by: a dimension none of its
/// positions (`thread_position_in_threadgroup`, `thread_position_in_grid`) is read in, and no
/// flattened index or simd-group builtin, makes threads that differ only there do the same work.
/// On a GPU such duplicates run in lockstep and their identical writes land as one; the emulated
/// device runs one of them. All three when the kernel cannot be read.
pub fn used_thread_dimensions(source: &str, entry_point: &str) -> [bool; 3] {
    const ALL: [bool; 3] = [true; 3];
    let start = format!("kernel void {entry_point}(");
    let Some(at) = source.find(&start).map(|at| at + start.len()) else {
        return ALL;
    };
    let Some(end) = closing_paren(&source[at..]) else {
        return ALL;
    };
    let body_start = at + end;
    let body = source[body_start..]
        .find("\n}\n")
        .map_or(&source[body_start..], |close| &source[body_start..body_start + close]);
    let mut used = [false; 3];
    for param in split_top_level(&source[at..at + end]) {
        let Some((declaration, attribute)) = param.split_once("[[") else {
            continue;
        };
        let attribute = attribute.trim().trim_end_matches("]]").trim();
        match attribute {
            "thread_position_in_threadgroup" | "thread_position_in_grid" => {
                let Some(name) = declaration.split_whitespace().last() else {
                    return ALL;
                };
                for (dimension, component) in ["x", "y", "z"].iter().enumerate() {
                    used[dimension] |= body.contains(&format!("{name}.{component}"));
                }
                // The position used whole, or through a swizzle of several components.
                let identifier = |c: char| c.is_alphanumeric() || c == '_';
                let whole = body.match_indices(name).any(|(i, _)| {
                    let after = &body[i + name.len()..];
                    let word = !body[..i].ends_with(identifier) && !after.starts_with(identifier);
                    let component = after.strip_prefix('.').and_then(|a| a.chars().next());
                    let next = after.strip_prefix('.').and_then(|a| a.chars().nth(1));
                    word && !matches!((component, next), (Some('x' | 'y' | 'z'), Some(c)) if !identifier(c))
                });
                if whole {
                    return ALL;
                }
            }
            "threadgroup_position_in_grid" | "threads_per_threadgroup" | "threadgroups_per_grid" => {}
            buffer if buffer.starts_with("buffer(") => {}
            _ => return ALL,
        }
    }
    if source.contains("simd_") {
        return ALL;
    }
    used
}

/// Where the parenthesis opened just before `text` closes.
fn closing_paren(text: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` split at commas outside parentheses, brackets and angle brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '<' => depth += 1,
            ')' | ']' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[from..]);
    parts
}

fn read_param(source: &str, entry_point: &str, param: &str) -> Result<Param> {
    let bad = || Error::invalid_argument(format!("kernel '{entry_point}': cannot read parameter '{param}'"));
    let (declaration, attribute) = param.split_once("[[").ok_or_else(bad)?;
    let attribute = attribute.trim_end().strip_suffix("]]").ok_or_else(bad)?.trim();
    if let Some(index) = attribute.strip_prefix("buffer(").and_then(|a| a.strip_suffix(')')) {
        // `constant T& name`: the struct is T.
        let type_name = declaration
            .split_whitespace()
            .find_map(|word| word.strip_suffix('&'))
            .filter(|t| !t.is_empty())
            .ok_or_else(bad)?
            .to_string();
        return Ok(match index.trim() {
            "0" => Param::ArgumentBuffer {
                members: argument_buffer_members(source, &type_name)?,
                type_name,
            },
            _ => Param::PushConstants { type_name },
        });
    }
    Builtin::from_attribute(attribute).map(Param::Builtin).ok_or_else(|| {
        Error::unimplemented(format!(
            "kernel '{entry_point}' takes the builtin [[{attribute}]], which the emulated Metal device does not provide yet"
        ))
    })
}

/// The members of struct `type_name` with their `[[id(n)]]`.
fn argument_buffer_members(source: &str, type_name: &str) -> Result<Vec<(String, u32)>> {
    let bad = || Error::invalid_argument(format!("the MSL's argument buffer struct '{type_name}' cannot be read"));
    let start = format!("struct {type_name}\n{{");
    let at = source.find(&start).ok_or_else(bad)? + start.len();
    let body = &source[at..at + source[at..].find('}').ok_or_else(bad)?];
    body.split(';')
        .map(str::trim)
        .filter(|member| !member.is_empty())
        .map(|member| {
            let (declaration, id) = member.split_once("[[id(").ok_or_else(bad)?;
            let id = id.strip_suffix(")]]").and_then(|n| n.parse().ok()).ok_or_else(bad)?;
            let name = declaration.split_whitespace().last().ok_or_else(bad)?;
            Ok((name.to_string(), id))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "struct _6\n{\n    uint _m0[3];\n};\n\nstruct spvDescriptorSetBuffer0\n{\n    device _11* in_ [[id(0)]];\n    device _11* out_ [[id(1)]];\n};\n\nkernel void scale(constant spvDescriptorSetBuffer0& spvDescriptorSet0 [[buffer(0)]], constant _6& _push_constant_var_ [[buffer(3)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]], uint3 l [[thread_position_in_threadgroup]])\n{\n}\n";

    #[test]
    fn parameters_are_read_in_order() {
        let params = read(SOURCE, "scale").unwrap();
        assert_eq!(
            params,
            [
                Param::ArgumentBuffer {
                    type_name: "spvDescriptorSetBuffer0".into(),
                    members: vec![("in_".into(), 0), ("out_".into(), 1)],
                },
                Param::PushConstants { type_name: "_6".into() },
                Param::Builtin(Builtin::ThreadgroupInGrid),
                Param::Builtin(Builtin::ThreadInThreadgroup),
            ]
        );
    }

    #[test]
    fn dimensions_no_position_is_read_in_are_found() {
        let source = "kernel void k(constant A& s [[buffer(0)]], uint3 l [[thread_position_in_threadgroup]], uint3 g \
                      [[threadgroup_position_in_grid]])\n{\n    s.x[l.x + g.y] = 0;\n}\n";
        assert_eq!(used_thread_dimensions(source, "k"), [true, false, false]);
        let grid = source
            .replace("thread_position_in_threadgroup", "thread_position_in_grid")
            .replace("l.x", "l.z");
        assert_eq!(used_thread_dimensions(&grid, "k"), [false, false, true]);
        let whole = source.replace("l.x", "f(l)");
        assert_eq!(used_thread_dimensions(&whole, "k"), [true; 3]);
        let swizzled = source.replace("l.x", "l.xy.x");
        assert_eq!(used_thread_dimensions(&swizzled, "k"), [true; 3]);
        let flattened = source.replace("thread_position_in_threadgroup", "thread_index_in_threadgroup");
        assert_eq!(used_thread_dimensions(&flattened, "k"), [true; 3]);
        assert_eq!(used_thread_dimensions(source, "absent"), [true; 3]);
    }

    #[test]
    fn a_missing_kernel_or_an_unknown_builtin_is_named() {
        let error = read(SOURCE, "other").unwrap_err();
        assert!(error.message().contains("no kernel 'other'"), "{error}");
        let quad = SOURCE.replace("thread_position_in_threadgroup", "thread_index_in_quadgroup");
        let error = read(&quad, "scale").unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::Unimplemented);
        assert!(error.message().contains("[[thread_index_in_quadgroup]]"), "{error}");
        let error = read("kernel void k(int x", "k").unwrap_err();
        assert!(error.message().contains("does not end"), "{error}");
    }
}
