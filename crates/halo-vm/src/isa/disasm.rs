//! Disassembly of a function's bytecode, one line per instruction, from the instruction table.

use super::decode::{decode, Immediate, Operand, RawRegister};
use super::{Bank, BLOCK_MARKER};
use std::fmt::Write;

fn register(bank: Bank, raw: RawRegister) -> String {
    if bank == Bank::Ref || raw.is_ref() {
        raw.to_string()
    } else {
        format!("%i{}", raw.0)
    }
}

fn remap(pairs: &[(RawRegister, RawRegister)]) -> String {
    let moves: Vec<String> = pairs.iter().map(|(from, to)| format!("{from}->{to}")).collect();
    format!("({})", moves.join(", "))
}

fn operand(out: &mut String, operand: &Operand<'_>) {
    let _ = match operand {
        Operand::Register(bank, raw) => write!(out, "{}", register(*bank, *raw)),
        Operand::Immediate(Immediate::I32(v)) => write!(out, "{v}"),
        Operand::Immediate(Immediate::I64(v)) => write!(out, "{v}"),
        Operand::Immediate(Immediate::F32(v)) => write!(out, "{v:?}"),
        Operand::Immediate(Immediate::F64(v)) => write!(out, "{v:?}"),
        Operand::Global(offset) => write!(out, "global[{offset}]"),
        Operand::Rodata(ordinal) => write!(out, "rodata[{ordinal}]"),
        Operand::Function(ordinal) if ordinal & super::IMPORT_ORDINAL_BIT != 0 => {
            write!(out, "import[{}]", ordinal & !super::IMPORT_ORDINAL_BIT)
        }
        Operand::Function(ordinal) => write!(out, "func[{ordinal}]"),
        Operand::Type(id) => write!(out, "type[{id}]"),
        Operand::String(bytes) => write!(out, "{:?}", String::from_utf8_lossy(bytes)),
        Operand::Count(count) => write!(out, "{count}"),
        Operand::Target(pc) => write!(out, "^{pc:08X}"),
        Operand::Remap(pairs) => write!(out, "{}", remap(pairs)),
        Operand::Cases(cases) => {
            let cases: Vec<String> = cases
                .iter()
                .map(|(pc, pairs)| format!("^{pc:08X}{}", remap(pairs)))
                .collect();
            write!(out, "[{}]", cases.join(", "))
        }
        Operand::Sizes(sizes) => {
            let sizes: Vec<String> = sizes.iter().map(u16::to_string).collect();
            write!(out, "segments[{}]", sizes.join(", "))
        }
        Operand::List(bank, registers) => {
            let registers: Vec<String> = registers
                .iter()
                .map(|r| register(bank.unwrap_or(Bank::I32), *r))
                .collect();
            write!(out, "[{}]", registers.join(", "))
        }
    };
}

/// One line per block marker and instruction: `offset  mnemonic operands`; undecodable bytes end
/// the listing with a line saying why.
pub fn disassemble(code: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pc = 0;
    while pc < code.len() {
        if code[pc] == BLOCK_MARKER {
            lines.push(format!("{pc:08X}  ^{pc:08X}:"));
            pc += 1;
            continue;
        }
        match decode(code, pc) {
            Ok(decoded) => {
                let mut line = format!("{pc:08X}    {}", decoded.def().mnemonic);
                for (index, value) in decoded.operands.iter().enumerate() {
                    line.push_str(if index == 0 { " " } else { ", " });
                    operand(&mut line, value);
                }
                lines.push(line);
                pc = decoded.next_pc;
            }
            Err(error) => {
                lines.push(format!("{pc:08X}    <{error}>"));
                break;
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_blocks_and_instructions() {
        // ^bb: add.i32 %i0, %i1 -> %i2; return [%i2] (its list aligned to 2 after a pad byte)
        let code = [0x79, 0x22, 0, 0, 1, 0, 2, 0, 0x5a, 0xFF, 1, 0, 2, 0];
        let lines = disassemble(&code);
        assert_eq!(
            lines,
            [
                "00000000  ^00000000:",
                "00000001    add.i32 %i0, %i1, %i2",
                "00000008    return [%i2]"
            ]
        );
        assert!(disassemble(&[0x79, 0xF7]).last().unwrap().contains("unknown opcode"));
    }
}
