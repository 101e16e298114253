//! Buffers from MiniMalloc's CSV: a header row naming the columns, then one buffer per row.

use super::{BufferRequirement, PlanError};
use rust_alloc::{string::String, vec::Vec};

/// Parses the CSV that MiniMalloc's tools read and write: a header with the columns `id`,
/// `lower`, `upper`, `size` (in any order; optional `alignment`), then one row per buffer.
/// `upper` is exclusive: a buffer with `lower,upper = 3,5` is live at steps 3 and 4. The `id`
/// becomes the buffer's name. Blank lines are skipped. Any malformed row, a missing or unknown
/// column, or `upper <= lower` is an error naming the line, the column and the value.
pub fn records_from_csv(text: &str) -> Result<Vec<BufferRequirement>, PlanError> {
    let err = |line: usize, msg: String| PlanError::Records(format!("CSV line {line}: {msg}"));
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(k, l)| (k + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((hline, header)) = lines.next() else {
        return Err(err(
            1,
            "empty; expected a header `id,lower,upper,size`".into(),
        ));
    };
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| names.iter().position(|&n| n == name);
    for (k, n) in names.iter().enumerate() {
        if !matches!(*n, "id" | "lower" | "upper" | "size" | "alignment") {
            return Err(err(
                hline,
                format!("unknown column {n:?}; expected id, lower, upper, size and optionally alignment"),
            ));
        }
        if names[..k].contains(n) {
            return Err(err(hline, format!("column {n:?} appears twice")));
        }
    }
    let [id, lower, upper, size] = ["id", "lower", "upper", "size"].map(col);
    let (Some(id), Some(lower), Some(upper), Some(size)) = (id, lower, upper, size) else {
        return Err(err(
            hline,
            format!("header {header:?} lacks a column; expected id, lower, upper, size"),
        ));
    };
    let alignment = col("alignment");
    let mut out = Vec::new();
    for (line, row) in lines {
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        if fields.len() != names.len() {
            return Err(err(
                line,
                format!(
                    "{} fields; expected {} (as in the header)",
                    fields.len(),
                    names.len()
                ),
            ));
        }
        let number = |c: usize| -> Result<usize, PlanError> {
            fields[c].parse::<usize>().map_err(|_| {
                err(
                    line,
                    format!("{} {:?} is not a non-negative integer", names[c], fields[c]),
                )
            })
        };
        let (lo, hi, bytes) = (number(lower)?, number(upper)?, number(size)?);
        if hi <= lo {
            return Err(err(
                line,
                format!("upper {hi} is not above lower {lo}; expected lower < upper (upper is exclusive)"),
            ));
        }
        let mut b = BufferRequirement::new(bytes, lo, hi - 1).with_name(String::from(fields[id]));
        if let Some(a) = alignment {
            b.alignment = number(a)?;
        }
        out.push(b);
    }
    Ok(out)
}
