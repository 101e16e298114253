//! A small, bounds-checked reader for the FlexBuffers maps the Signal ops keep in their custom
//! options: a root map whose values are integers, booleans, floats or integer vectors.
//!
//! Every read is checked against the buffer: a truncated, corrupted or hostile buffer is an
//! `Err` naming what was wrong, never a panic or an out-of-bounds read. Nothing here allocates
//! in proportion to a size read from the buffer (integer vectors are capped by the buffer
//! length, since each element occupies at least one byte of it).
//!
//! Format facts used (FlexBuffers, as written by `flexbuffers::Builder`):
//! - the last byte is the root's byte width, the byte before it the root's packed type
//!   (`type << 2 | bit width code`, code `0..=3` for 1, 2, 4, 8 bytes), and the root value sits
//!   just before those two bytes;
//! - an offset-typed value (map, vector, string, indirect scalar) stores an unsigned distance
//!   back from its own position to its target; the packed type's width code is the width of the
//!   target's elements;
//! - a map's elements are preceded by (walking back one element width each) its size, the byte
//!   width of its keys vector and the offset to that keys vector; after the elements come one
//!   packed-type byte per element. Keys are offsets to NUL-terminated strings, sorted.
//! - a typed vector (`VECTOR_INT`, ...) is preceded by its size and has no type bytes; fixed
//!   typed vectors (`VECTOR_INT2..4`) have no size at all.

use rust_alloc::{string::String, string::ToString, vec::Vec};

/// FlexBuffers value types this reader distinguishes (schema numbers).
mod ty {
    pub const NULL: u8 = 0;
    pub const INT: u8 = 1;
    pub const UINT: u8 = 2;
    pub const FLOAT: u8 = 3;
    pub const INDIRECT_INT: u8 = 6;
    pub const INDIRECT_UINT: u8 = 7;
    pub const INDIRECT_FLOAT: u8 = 8;
    pub const MAP: u8 = 9;
    pub const VECTOR: u8 = 10;
    pub const VECTOR_INT: u8 = 11;
    pub const VECTOR_UINT: u8 = 12;
    pub const VECTOR_INT2: u8 = 16;
    pub const VECTOR_UINT2: u8 = 17;
    pub const VECTOR_INT3: u8 = 19;
    pub const VECTOR_UINT3: u8 = 20;
    pub const VECTOR_INT4: u8 = 22;
    pub const VECTOR_UINT4: u8 = 23;
    pub const BOOL: u8 = 26;
    pub const VECTOR_BOOL: u8 = 36;
}

/// Reads an unsigned little-endian integer of `width` (1, 2, 4 or 8) bytes at `pos`.
fn read_u64(buf: &[u8], pos: usize, width: usize) -> Result<u64, String> {
    let end = pos
        .checked_add(width)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| {
            format!(
                "read of {width} bytes at {pos} past the end ({} bytes)",
                buf.len()
            )
        })?;
    let b = &buf[pos..end];
    Ok(match width {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_le_bytes([b[0], b[1]])),
        4 => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        8 => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        w => return Err(format!("byte width {w} is not 1, 2, 4 or 8")),
    })
}

/// Reads a signed little-endian integer of `width` bytes at `pos`, sign-extended.
fn read_i64(buf: &[u8], pos: usize, width: usize) -> Result<i64, String> {
    let u = read_u64(buf, pos, width)?;
    Ok(match width {
        1 => i64::from(u as u8 as i8),
        2 => i64::from(u as u16 as i16),
        4 => i64::from(u as u32 as i32),
        _ => u as i64,
    })
}

/// Reads a float of `width` (4 or 8) bytes at `pos`.
fn read_f64(buf: &[u8], pos: usize, width: usize) -> Result<f64, String> {
    match width {
        4 => Ok(f64::from(f32::from_bits(read_u64(buf, pos, 4)? as u32))),
        8 => Ok(f64::from_bits(read_u64(buf, pos, 8)?)),
        w => Err(format!("float of byte width {w}")),
    }
}

/// Follows the offset stored at `pos` (`width` bytes) back to its target.
fn follow(buf: &[u8], pos: usize, width: usize) -> Result<usize, String> {
    let off = read_u64(buf, pos, width)?;
    usize::try_from(off)
        .ok()
        .and_then(|o| pos.checked_sub(o))
        .ok_or_else(|| format!("offset {off} at {pos} points before the buffer start"))
}

/// Byte width from a packed type's width code.
fn width_of(packed: u8) -> usize {
    1 << (packed & 3)
}

/// One value inside a map (or the root): where it is stored and how.
#[derive(Clone, Copy, Debug)]
pub struct FlexValue<'a> {
    buf: &'a [u8],
    /// Position of the stored (inline) value.
    pos: usize,
    /// Byte width of the slot holding it (the parent's element width).
    parent_width: usize,
    /// Value type.
    kind: u8,
    /// Byte width of the target for offset-typed values.
    target_width: usize,
}

impl<'a> FlexValue<'a> {
    fn new(buf: &'a [u8], pos: usize, parent_width: usize, packed: u8) -> Self {
        FlexValue {
            buf,
            pos,
            parent_width,
            kind: packed >> 2,
            target_width: width_of(packed),
        }
    }

    /// The FlexBuffers type number of the value.
    pub fn kind(&self) -> u8 {
        self.kind
    }

    /// The value as an integer (int, uint, bool, indirect int or uint); other types are errors.
    pub fn as_i64(&self) -> Result<i64, String> {
        match self.kind {
            ty::INT => read_i64(self.buf, self.pos, self.parent_width),
            ty::UINT | ty::BOOL => {
                let u = read_u64(self.buf, self.pos, self.parent_width)?;
                i64::try_from(u).map_err(|_| format!("unsigned value {u} does not fit i64"))
            }
            ty::INDIRECT_INT => {
                let t = follow(self.buf, self.pos, self.parent_width)?;
                read_i64(self.buf, t, self.target_width)
            }
            ty::INDIRECT_UINT => {
                let t = follow(self.buf, self.pos, self.parent_width)?;
                let u = read_u64(self.buf, t, self.target_width)?;
                i64::try_from(u).map_err(|_| format!("unsigned value {u} does not fit i64"))
            }
            k => Err(format!("value of FlexBuffers type {k} is not an integer")),
        }
    }

    /// The value as a boolean (bool, or an integer: non-zero is true).
    pub fn as_bool(&self) -> Result<bool, String> {
        Ok(self.as_i64()? != 0)
    }

    /// The value as a float (float, indirect float, or an integer).
    pub fn as_f64(&self) -> Result<f64, String> {
        match self.kind {
            ty::FLOAT => read_f64(self.buf, self.pos, self.parent_width),
            ty::INDIRECT_FLOAT => {
                let t = follow(self.buf, self.pos, self.parent_width)?;
                read_f64(self.buf, t, self.target_width)
            }
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as a vector of integers: typed int/uint/bool vectors, fixed-length int
    /// vectors, or an untyped vector whose elements are all integers.
    pub fn as_int_vec(&self) -> Result<Vec<i64>, String> {
        let (signed, fixed_len) = match self.kind {
            ty::VECTOR_INT => (true, None),
            ty::VECTOR_UINT | ty::VECTOR_BOOL => (false, None),
            ty::VECTOR_INT2 => (true, Some(2)),
            ty::VECTOR_UINT2 => (false, Some(2)),
            ty::VECTOR_INT3 => (true, Some(3)),
            ty::VECTOR_UINT3 => (false, Some(3)),
            ty::VECTOR_INT4 => (true, Some(4)),
            ty::VECTOR_UINT4 => (false, Some(4)),
            ty::VECTOR => {
                let start = follow(self.buf, self.pos, self.parent_width)?;
                let w = self.target_width;
                let len = vector_len(self.buf, start, w)?;
                let types = checked_range(self.buf, start, len, w)?;
                let mut out = Vec::with_capacity(len);
                for i in 0..len {
                    let packed = *self
                        .buf
                        .get(types + i)
                        .ok_or_else(|| "vector type bytes past the end".to_string())?;
                    out.push(FlexValue::new(self.buf, start + i * w, w, packed).as_i64()?);
                }
                return Ok(out);
            }
            k => {
                return Err(format!(
                    "value of FlexBuffers type {k} is not an integer vector"
                ))
            }
        };
        let start = follow(self.buf, self.pos, self.parent_width)?;
        let w = self.target_width;
        let len = match fixed_len {
            Some(n) => n,
            None => vector_len(self.buf, start, w)?,
        };
        checked_range(self.buf, start, len, w)?;
        (0..len)
            .map(|i| {
                if signed {
                    read_i64(self.buf, start + i * w, w)
                } else {
                    let u = read_u64(self.buf, start + i * w, w)?;
                    i64::try_from(u).map_err(|_| format!("unsigned value {u} does not fit i64"))
                }
            })
            .collect()
    }
}

/// The length stored just before a vector starting at `start` (element width `w`).
fn vector_len(buf: &[u8], start: usize, w: usize) -> Result<usize, String> {
    let at = start
        .checked_sub(w)
        .ok_or_else(|| format!("vector at {start} has no room for its size"))?;
    let len = read_u64(buf, at, w)?;
    usize::try_from(len)
        .ok()
        .filter(|&l| l <= buf.len())
        .ok_or_else(|| {
            format!(
                "vector size {len} is larger than the buffer ({} bytes)",
                buf.len()
            )
        })
}

/// Checks that `len` elements of `w` bytes from `start` lie in `buf`; returns their end.
fn checked_range(buf: &[u8], start: usize, len: usize, w: usize) -> Result<usize, String> {
    len.checked_mul(w)
        .and_then(|b| start.checked_add(b))
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| {
            format!(
                "{len} elements of {w} bytes at {start} run past the end ({} bytes)",
                buf.len()
            )
        })
}

/// A FlexBuffers map (the root of a custom-options buffer).
#[derive(Clone, Copy, Debug)]
pub struct FlexMap<'a> {
    buf: &'a [u8],
    /// Start of the value elements.
    start: usize,
    /// Element byte width.
    width: usize,
    /// Number of entries.
    len: usize,
    /// Start of the keys vector's elements.
    keys: usize,
    /// Byte width of the keys vector's elements.
    keys_width: usize,
}

impl<'a> FlexMap<'a> {
    /// Reads the root of `buf`, which must be a map.
    pub fn from_root(buf: &'a [u8]) -> Result<Self, String> {
        let n = buf.len();
        if n < 3 {
            return Err(format!(
                "buffer of {n} bytes is too short for a FlexBuffers root"
            ));
        }
        let root_width = usize::from(buf[n - 1]);
        if !matches!(root_width, 1 | 2 | 4 | 8) {
            return Err(format!("root byte width {root_width} is not 1, 2, 4 or 8"));
        }
        let packed = buf[n - 2];
        let pos = (n - 2)
            .checked_sub(root_width)
            .ok_or_else(|| format!("buffer of {n} bytes is too short for its root"))?;
        let root = FlexValue::new(buf, pos, root_width, packed);
        if root.kind != ty::MAP {
            return Err(format!(
                "root is of FlexBuffers type {}, not a map",
                root.kind
            ));
        }
        Self::from_value(&root)
    }

    fn from_value(v: &FlexValue<'a>) -> Result<Self, String> {
        let buf = v.buf;
        let start = follow(buf, v.pos, v.parent_width)?;
        let width = v.target_width;
        let len = vector_len(buf, start, width)?;
        // Elements, then one type byte per element.
        checked_range(buf, start, len, width)?
            .checked_add(len)
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| format!("map of {len} entries runs past the end"))?;
        let keys_at = start
            .checked_sub(3 * width)
            .ok_or_else(|| format!("map at {start} has no room for its keys header"))?;
        let keys = follow(buf, keys_at, width)?;
        let keys_width = usize::try_from(read_u64(buf, keys_at + width, width)?)
            .ok()
            .filter(|w| matches!(w, 1 | 2 | 4 | 8))
            .ok_or_else(|| "map keys byte width is not 1, 2, 4 or 8".to_string())?;
        let keys_len = vector_len(buf, keys, keys_width)?;
        if keys_len != len {
            return Err(format!("map has {len} values but {keys_len} keys"));
        }
        checked_range(buf, keys, len, keys_width)?;
        Ok(FlexMap {
            buf,
            start,
            width,
            len,
            keys,
            keys_width,
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Key `i` as bytes (without its NUL).
    pub fn key(&self, i: usize) -> Result<&'a [u8], String> {
        if i >= self.len {
            return Err(format!("key {i} of a map of {}", self.len));
        }
        let at = follow(self.buf, self.keys + i * self.keys_width, self.keys_width)?;
        let rest = &self.buf[at..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("key {i} is not NUL-terminated"))?;
        Ok(&rest[..end])
    }

    /// Value `i`.
    pub fn value(&self, i: usize) -> Result<FlexValue<'a>, String> {
        if i >= self.len {
            return Err(format!("value {i} of a map of {}", self.len));
        }
        let types = self.start + self.len * self.width;
        let packed = *self
            .buf
            .get(types + i)
            .ok_or_else(|| "map type bytes past the end".to_string())?;
        Ok(FlexValue::new(
            self.buf,
            self.start + i * self.width,
            self.width,
            packed,
        ))
    }

    /// The value under `key`, `None` when absent.
    pub fn get(&self, key: &str) -> Result<Option<FlexValue<'a>>, String> {
        for i in 0..self.len {
            if self.key(i)? == key.as_bytes() {
                return self.value(i).map(Some);
            }
        }
        Ok(None)
    }

    /// Whether the value under `key` is present and not null.
    pub fn contains(&self, key: &str) -> Result<bool, String> {
        Ok(self.get(key)?.is_some_and(|v| v.kind != ty::NULL))
    }
}

/// Reads the options of `op` from `bytes`: the root map.
pub(crate) fn options_map<'a>(op: &str, bytes: &'a [u8]) -> Result<FlexMap<'a>, String> {
    FlexMap::from_root(bytes)
        .map_err(|e| format!("{op}: custom options are not a FlexBuffers map: {e}"))
}

/// Integer option `key` of `op`, required, in `range`.
pub(crate) fn int_option(
    op: &str,
    map: &FlexMap<'_>,
    key: &str,
    range: core::ops::RangeInclusive<i64>,
) -> Result<i32, String> {
    let v = map
        .get(key)
        .map_err(|e| format!("{op}: option `{key}`: {e}"))?
        .ok_or_else(|| format!("{op}: option `{key}` is missing"))?;
    let x = v
        .as_i64()
        .map_err(|e| format!("{op}: option `{key}`: {e}"))?;
    if !range.contains(&x) || i32::try_from(x).is_err() {
        return Err(format!(
            "{op}: option `{key}` is {x}, expected {}..={}",
            range.start(),
            range.end()
        ));
    }
    Ok(x as i32)
}

/// Boolean option `key` of `op`, required.
pub(crate) fn bool_option(op: &str, map: &FlexMap<'_>, key: &str) -> Result<bool, String> {
    map.get(key)
        .map_err(|e| format!("{op}: option `{key}`: {e}"))?
        .ok_or_else(|| format!("{op}: option `{key}` is missing"))?
        .as_bool()
        .map_err(|e| format!("{op}: option `{key}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SignalWindow's options from the shared model: `{shift: 12}`.
    const WINDOW: [u8; 16] = [115, 104, 105, 102, 116, 0, 1, 7, 1, 1, 1, 12, 4, 2, 36, 1];
    /// SignalRfft's: `{T: 7, fft_length: 512}` with 16-bit elements.
    const RFFT: [u8; 31] = [
        84, 0, 102, 102, 116, 95, 108, 101, 110, 103, 116, 104, 0, 2, 14, 13, 2, 0, 1, 0, 2, 0, 7,
        0, 0, 2, 5, 5, 6, 37, 1,
    ];

    #[test]
    fn reads_scalar_maps() {
        let m = FlexMap::from_root(&WINDOW).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m.key(0).unwrap(), b"shift");
        assert_eq!(m.get("shift").unwrap().unwrap().as_i64().unwrap(), 12);
        assert!(m.get("nope").unwrap().is_none());
        let m = FlexMap::from_root(&RFFT).unwrap();
        assert_eq!(m.get("T").unwrap().unwrap().as_i64().unwrap(), 7);
        assert_eq!(m.get("fft_length").unwrap().unwrap().as_i64().unwrap(), 512);
        assert_eq!(
            int_option("SignalRfft", &m, "fft_length", 2..=4096).unwrap(),
            512
        );
        let e = int_option("SignalRfft", &m, "fft_length", 2..=100).unwrap_err();
        assert!(
            e.contains("SignalRfft") && e.contains("fft_length") && e.contains("512"),
            "{e}"
        );
    }

    #[test]
    fn empty_map() {
        let m = FlexMap::from_root(&[0, 0, 1, 0, 0, 36, 1]).unwrap();
        assert!(m.is_empty());
    }

    #[test]
    fn int_vectors() {
        // {v: [1, -2, 300]} as a typed VECTOR_INT of 2-byte elements, built by hand:
        // "v\0" | keys vec (size 1, offset) | pad | vec size 3, elems | map header | ...
        let mut b = vec![b'v', 0];
        b.push(1); // keys size (width 1)
        b.push(3); // key offset: 3 - 3 = 0
        b.push(0); // pad to 2
        b.push(0);
        let vstart = b.len() + 2; // after size (2 bytes)
        b.extend_from_slice(&3u16.to_le_bytes());
        for v in [1i16, -2, 300] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        // map header, width 1: keys offset, keys width, size
        let keys_at = b.len();
        b.push((keys_at - 3) as u8);
        b.push(1);
        b.push(1);
        let mstart = b.len();
        b.push((mstart - vstart) as u8); // value: offset to the vector
        b.push((ty::VECTOR_INT << 2) | 1); // its packed type: 2-byte elements
        let root = b.len();
        b.push((root - mstart) as u8);
        b.push(ty::MAP << 2);
        b.push(1);
        let m = FlexMap::from_root(&b).unwrap();
        let v = m.get("v").unwrap().unwrap().as_int_vec().unwrap();
        assert_eq!(v, vec![1, -2, 300]);
    }

    /// Reads everything readable from `b`; must not panic whatever `b` holds.
    fn exercise(b: &[u8]) {
        if let Ok(m) = FlexMap::from_root(b) {
            for k in 0..m.len() {
                let _ = m.key(k);
                if let Ok(v) = m.value(k) {
                    let _ = v.as_i64();
                    let _ = v.as_f64();
                    let _ = v.as_int_vec();
                }
            }
        }
    }

    #[test]
    fn malformed_is_an_error_never_a_panic() {
        for buf in [&WINDOW[..], &RFFT[..]] {
            // Every truncation and every single-byte corruption.
            for n in 0..buf.len() {
                exercise(&buf[..n]);
            }
            for i in 0..buf.len() {
                for x in [0u8, 1, 2, 3, 0x7f, 0x80, 0xfe, 0xff, 36, 37, 38, 39, 44, 45] {
                    let mut b = buf.to_vec();
                    b[i] = x;
                    exercise(&b);
                }
            }
        }
        assert!(FlexMap::from_root(&[]).is_err());
        assert!(FlexMap::from_root(&[1, 4, 1]).is_err()); // root is an int
    }
}
