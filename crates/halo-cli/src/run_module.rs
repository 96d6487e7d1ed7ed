//! `halo run-module`: load bytecode modules, call one function, print its results the way
//! `iree-run-module` does.

use clap::Args;
use halo_hal::element_text::format_g;
use halo_hal::{Error, Result, ResultExt};
use halo_vm::cconv::Signature;
use halo_vm::ref_types::{ElementType, List};
use halo_vm::{BytecodeModule, Context, Value};
use std::sync::Arc;

/// Flags of `run-module`.
#[derive(Args, Debug, Clone)]
pub struct RunModuleArgs {
    /// A `.vmfb` to load; repeat for several (later ones may import earlier ones).
    #[arg(long, required = true)]
    pub module: Vec<String>,
    /// Function to call (`name` or `module.name`).
    #[arg(long)]
    pub function: String,
    /// An input value (`5`, `i32=5`, `f64=2.5`), one per argument in order.
    #[arg(long, allow_hyphen_values = true)]
    pub input: Vec<String>,
    /// Device URI; only used by modules that import the `hal` module.
    #[arg(long, default_value = crate::registry::DEFAULT_DEVICE)]
    pub device: String,
}

/// Runs the function and prints `EXEC @name` and one `result[i]: ...` line per result.
pub fn run(args: &RunModuleArgs) -> Result<()> {
    let mut context = Context::new();
    for path in &args.module {
        let module = BytecodeModule::from_file(std::path::Path::new(path))
            .with_context(|| format!("loading module '{path}'"))?;
        context.add_bytecode(Arc::new(module))?;
    }
    let (instance, ordinal) = context.lookup(&args.function)?;
    let cconv = instance
        .module()
        .function_signature(ordinal)
        .and_then(|s| s.calling_convention)
        .ok_or_else(|| Error::failed_precondition(format!("function '{}' has no calling convention", args.function)))?
        .to_string();
    let signature = Signature::parse(&cconv)?;
    let kinds = signature.flatten_arguments(&[])?;
    if kinds.len() != args.input.len() {
        return Err(Error::invalid_argument(format!(
            "function '{}' takes {} inputs ({cconv}) but {} were given",
            args.function,
            kinds.len(),
            args.input.len()
        )));
    }
    let inputs = kinds
        .iter()
        .zip(&args.input)
        .enumerate()
        .map(|(index, (kind, text))| {
            parse_input(*kind, text).with_context(|| format!("parsing input {index} '{text}'"))
        })
        .collect::<Result<Vec<_>>>()?;
    let results = context.invoke(&args.function, &inputs)?;
    println!("EXEC @{}", args.function);
    for (index, value) in results.iter().enumerate() {
        println!("result[{index}]: {}", format_value(value));
    }
    Ok(())
}

/// Parses one scalar input for an argument of cconv kind `kind` (`i`, `I`, `f`, `F`).
pub fn parse_input(kind: char, text: &str) -> Result<Value> {
    let (declared, value) = match text.split_once('=') {
        Some((ty, value)) => (Some(ty), value),
        None => (None, text),
    };
    let expected = match kind {
        'i' => "i32",
        'I' => "i64",
        'f' => "f32",
        'F' => "f64",
        _ => {
            return Err(Error::unimplemented(
                "reference inputs need the hal module (buffer views)",
            ))
        }
    };
    if let Some(declared) = declared {
        if declared != expected {
            return Err(Error::invalid_argument(format!(
                "input is {declared} but the function takes {expected}"
            )));
        }
    }
    let bad = || Error::invalid_argument(format!("'{value}' is not a valid {expected}"));
    Ok(match kind {
        'i' => Value::I32(
            value
                .parse::<i32>()
                .or_else(|_| value.parse::<u32>().map(|v| v as i32))
                .map_err(|_| bad())?,
        ),
        'I' => Value::I64(
            value
                .parse::<i64>()
                .or_else(|_| value.parse::<u64>().map(|v| v as i64))
                .map_err(|_| bad())?,
        ),
        'f' => Value::F32(value.parse::<f32>().map_err(|_| bad())?),
        _ => Value::F64(value.parse::<f64>().map_err(|_| bad())?),
    })
}

/// Formats a result as `iree-run-module` prints it (`i32=5`, `f32=0.5`, `f64=1e+308`); lists
/// print their items as `child_list[i]: ...` lines followed by a blank line.
pub fn format_value(value: &Value) -> String {
    format_typed(value, None)
}

fn format_typed(value: &Value, element_type: Option<&ElementType>) -> String {
    match value {
        Value::I32(v) => match element_type {
            Some(ElementType::I8) => format!("i8={v}"),
            Some(ElementType::I16) => format!("i16={v}"),
            _ => format!("i32={v}"),
        },
        Value::I64(v) => format!("i64={v}"),
        Value::F32(v) => format!("f32={}", format_g(*v as f64).to_lowercase()),
        Value::F64(v) => format!("f64={}", format_g(*v).to_lowercase()),
        Value::Ref(None) => "(null)".to_string(),
        Value::Ref(Some(r)) => match r.downcast::<List>() {
            Some(list) => {
                let mut text = String::from("vm.list\n");
                for (index, item) in list.to_vec().iter().enumerate() {
                    text.push_str(&format!(
                        "child_list[{index}]: {}\n",
                        format_typed(item, Some(list.element_type()))
                    ));
                }
                text
            }
            None => format!("{}\n(no printer)", r.type_name()),
        },
    }
}
