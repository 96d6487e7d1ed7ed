//! The little of SPIR-V the driver reads itself: the header and an entry point's workgroup size.

use halo_hal::{Error, Result};

/// First word of every SPIR-V module.
pub(crate) const MAGIC: u32 = 0x0723_0203;

const OP_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const EXECUTION_MODE_LOCAL_SIZE: u32 = 17;
/// Words in the module header before the first instruction.
pub(super) const HEADER_WORDS: usize = 5;

/// The instructions of a module: (opcode, operands).
pub(super) fn instructions(words: &[u32]) -> impl Iterator<Item = Result<(u32, &[u32])>> {
    let mut at = HEADER_WORDS;
    std::iter::from_fn(move || {
        let word = *words.get(at)?;
        let (count, opcode) = ((word >> 16) as usize, word & 0xffff);
        if count == 0 || at + count > words.len() {
            at = words.len();
            return Some(Err(Error::invalid_argument(format!(
                "SPIR-V instruction at word {} has length {count}, past the module's {} words",
                at,
                words.len()
            ))));
        }
        let operands = &words[at + 1..at + count];
        at += count;
        Some(Ok((opcode, operands)))
    })
}

/// Decodes a SPIR-V literal string starting at `words`.
fn literal_string(words: &[u32]) -> Vec<u8> {
    words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take_while(|b| *b != 0)
        .collect()
}

/// The `LocalSize` of `entry_point`, or `None` when the module sets it another way (e.g. from
/// specialization constants).
///
/// # Errors
/// `InvalidArgument` for a module without the SPIR-V header or with a malformed instruction.
pub(crate) fn workgroup_size(words: &[u32], entry_point: &str) -> Result<Option<[u32; 3]>> {
    if words.len() < HEADER_WORDS || words[0] != MAGIC {
        return Err(Error::invalid_argument(
            "shader module is not SPIR-V (bad magic number)",
        ));
    }
    let mut entry_id = None;
    for instruction in instructions(words) {
        let (opcode, operands) = instruction?;
        match opcode {
            OP_ENTRY_POINT if operands.len() >= 3 && literal_string(&operands[2..]) == entry_point.as_bytes() => {
                entry_id = Some(operands[1]);
            }
            OP_EXECUTION_MODE
                if operands.len() >= 5 && Some(operands[0]) == entry_id && operands[1] == EXECUTION_MODE_LOCAL_SIZE =>
            {
                return Ok(Some([operands[2], operands[3], operands[4]]));
            }
            _ => {}
        }
    }
    Ok(None)
}
