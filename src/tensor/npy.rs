//! `.npy` reading and writing through `npyz`.
//!
//! Supported: C-order arrays of `|b1`, `i1/u1/i2/u2/i4/u4/i8/u8` and `f2/f4/f8` in either byte order
//! (converted to native order on read, written in native order). bfloat16 has no numpy type
//! character: it is written as raw 2-byte records `|V2` (little-endian bits, what `ml_dtypes`
//! produces), and a `V2` file is read back as bfloat16. Fortran-order files and structured dtypes
//! are refused with an error naming the header field.

use super::{default_cpu_allocator, DType, Element, Shape, Tensor, TensorError};
use crate::alloc::AllocatorRef;
use npyz::{FixedSizeBytes, NpyFile, NpyHeader, Order, TypeChar, WriterBuilder};
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

const READER: &str = "<reader>";

/// Longest `.npy` header accepted. NumPy writes headers of a few hundred bytes and by default
/// refuses to read any longer than 10,000; the length field itself can claim up to 4 GiB, which
/// `npyz` would allocate before reading a byte of it.
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// Reads the header after checking its declared length (at most [`MAX_HEADER_BYTES`], and at
/// most `available` bytes when the stream length is known).
fn read_header<R: Read>(
    mut reader: R,
    label: &str,
    available: Option<u64>,
) -> Result<NpyHeader, TensorError> {
    // Magic (6 bytes), version (2), header length (2 bytes in version 1, 4 in versions 2 and 3).
    let mut pre = [0u8; 12];
    reader
        .read_exact(&mut pre[..8])
        .map_err(|e| TensorError::npy(label, format!("header: {e}")))?;
    let mut n = 8;
    if &pre[..6] == b"\x93NUMPY" {
        let width = if pre[6] == 1 { 2 } else { 4 };
        reader
            .read_exact(&mut pre[8..8 + width])
            .map_err(|e| TensorError::npy(label, format!("header: {e}")))?;
        n += width;
        let declared = pre[8..8 + width]
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        let limit = available.map_or(MAX_HEADER_BYTES, |a| a.min(MAX_HEADER_BYTES));
        if declared > limit {
            return Err(TensorError::npy(
                label,
                format!(
                    "header length field says {declared} bytes; expected at most {limit} (the \
                     file is corrupt or not a .npy file)"
                ),
            ));
        }
    }
    NpyHeader::from_reader(&mut (&pre[..n]).chain(reader))
        .map_err(|e| TensorError::npy(label, format!("header: {}", one_line(&e.to_string()))))
}

/// The parser's multi-line report (a caret diagram under the header text) as one line: its
/// first line, the position (`--> line:column`) and what was expected (`= expected ...`).
fn one_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut out = lines.next().unwrap_or("invalid header").to_string();
    for l in lines {
        if let Some(pos) = l.strip_prefix("-->") {
            out.push_str(&format!(" at {}", pos.trim()));
        } else if let Some(what) = l.strip_prefix('=') {
            out.push_str(&format!(" ({})", what.trim()));
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}
const WRITER: &str = "<writer>";

/// The dtype and shape a parsed header describes.
fn interpret(header: &NpyHeader, label: &str) -> Result<(DType, Shape), TensorError> {
    if header.order() == Order::Fortran {
        return Err(TensorError::npy(
            label,
            "fortran_order is True; only C-order arrays are supported (save with np.ascontiguousarray)",
        ));
    }
    let ts = match header.dtype() {
        npyz::DType::Plain(ts) => ts,
        other => {
            return Err(TensorError::npy(
                label,
                format!(
                    "descr {} is a structured or sub-array dtype; expected a plain numeric or bool type",
                    other.descr()
                ),
            ))
        }
    };
    let size = ts.size_field();
    let dtype = match (ts.type_char(), size) {
        (TypeChar::Bool, 1) => DType::Bool,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::RawData, 2) => DType::BF16,
        _ => {
            return Err(TensorError::npy(
                label,
                format!(
                    "descr '{ts}' is not supported; expected one of |b1, i1/u1/i2/u2/i4/u4/i8/u8, f2/f4/f8, |V2 (bfloat16)"
                ),
            ))
        }
    };
    let mut dims = Vec::with_capacity(header.shape().len());
    for &d in header.shape() {
        dims.push(usize::try_from(d).map_err(|_| {
            TensorError::npy(
                label,
                format!(
                    "dimension {d} of shape {:?} does not fit in usize",
                    header.shape()
                ),
            )
        })?);
    }
    Ok((dtype, Shape::new(&dims)?))
}

fn fill<T: Element + npyz::Deserialize, R: Read>(
    file: NpyFile<R>,
    tensor: &mut Tensor,
    label: &str,
) -> Result<(), TensorError> {
    let data = file
        .data::<T>()
        .map_err(|e| TensorError::npy(label, format!("dtype: {e}")))?;
    let dst = tensor.as_mut_slice::<T>()?;
    let expected = dst.len();
    let mut n = 0usize;
    for (d, v) in dst.iter_mut().zip(data) {
        *d = v.map_err(|e| {
            TensorError::npy(label, format!("reading element {n} of {expected}: {e}"))
        })?;
        n += 1;
    }
    if n != expected {
        return Err(TensorError::npy(
            label,
            format!("data ends after {n} of {expected} elements"),
        ));
    }
    Ok(())
}

fn fill_bf16<R: Read>(
    file: NpyFile<R>,
    tensor: &mut Tensor,
    label: &str,
) -> Result<(), TensorError> {
    let data = file
        .data::<FixedSizeBytes<2>>()
        .map_err(|e| TensorError::npy(label, format!("dtype: {e}")))?;
    let dst = tensor.as_mut_slice::<half::bf16>()?;
    let expected = dst.len();
    let mut n = 0usize;
    for (d, v) in dst.iter_mut().zip(data) {
        let v = v.map_err(|e| {
            TensorError::npy(label, format!("reading element {n} of {expected}: {e}"))
        })?;
        *d = half::bf16::from_bits(u16::from_le_bytes(v.0));
        n += 1;
    }
    if n != expected {
        return Err(TensorError::npy(
            label,
            format!("data ends after {n} of {expected} elements"),
        ));
    }
    Ok(())
}

/// Decodes the data of `file` (elements of `T`) into `dst`, the native-order bytes of exactly
/// `dst.len() / size_of::<T>()` elements.
fn fill_bytes<T: Element + npyz::Deserialize, R: Read>(
    file: NpyFile<R>,
    dst: &mut [u8],
    label: &str,
) -> Result<(), TensorError> {
    let size = core::mem::size_of::<T>();
    let data = file
        .data::<T>()
        .map_err(|e| TensorError::npy(label, format!("dtype: {e}")))?;
    let expected = dst.len() / size;
    let mut n = 0usize;
    for (chunk, v) in dst.chunks_exact_mut(size).zip(data) {
        let v = v.map_err(|e| {
            TensorError::npy(label, format!("reading element {n} of {expected}: {e}"))
        })?;
        // SAFETY: `chunk` is `size_of::<T>()` writable bytes; the write is unaligned and `T`
        // is a plain numeric or bool value (any `T` value is valid to store).
        unsafe { core::ptr::write_unaligned(chunk.as_mut_ptr().cast::<T>(), v) };
        n += 1;
    }
    if n != expected {
        return Err(TensorError::npy(
            label,
            format!("data ends after {n} of {expected} elements"),
        ));
    }
    Ok(())
}

/// A `.npy` file whose header has been read and checked: its dtype and shape are known, its
/// data not read yet. [`read_into`](Self::read_into) decodes the data straight into memory the
/// caller already has (an interpreter's input tensor), so no second copy of a large input is
/// ever made.
pub struct NpyFileReader {
    label: String,
    reader: BufReader<std::fs::File>,
    header: NpyHeader,
    dtype: DType,
    shape: Shape,
}

impl NpyFileReader {
    /// Opens `path` (a regular file) and reads its header; the data it promises must fit in the
    /// file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TensorError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        let (file, len) =
            crate::fileio::open_regular(path).map_err(|e| TensorError::npy(&label, e))?;
        let mut reader = BufReader::new(file);
        let header = read_header(&mut reader, &label, Some(len))?;
        let pos = reader
            .stream_position()
            .map_err(|e| TensorError::npy(&label, e))?;
        let (dtype, shape) = interpret(&header, &label)?;
        let bytes = shape.byte_size(dtype)?;
        let avail = len.saturating_sub(pos);
        if bytes as u64 > avail {
            return Err(TensorError::npy(
                &label,
                format!(
                    "header promises {bytes} data bytes ({dtype} {shape}) but only {avail} bytes follow the header"
                ),
            ));
        }
        Ok(Self {
            label,
            reader,
            header,
            dtype,
            shape,
        })
    }

    /// The element type of the data.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape of the data.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Bytes of the decoded data.
    pub fn byte_size(&self) -> usize {
        // Checked against the file length in `open`.
        self.shape.byte_size(self.dtype).unwrap_or(0)
    }

    /// Decodes the data into `dst`: native-order elements of [`dtype`](Self::dtype), exactly
    /// [`byte_size`](Self::byte_size) bytes (else an error, nothing read).
    pub fn read_into(self, dst: &mut [u8]) -> Result<(), TensorError> {
        let label = self.label.as_str();
        if dst.len() != self.byte_size() {
            return Err(TensorError::npy(
                label,
                format!(
                    "holds {} bytes ({} {}), the destination {}",
                    self.byte_size(),
                    self.dtype,
                    self.shape,
                    dst.len()
                ),
            ));
        }
        // Data already in native byte order (little-endian or byte-sized elements on a
        // little-endian machine) is read as is, without decoding element by element.
        let native = cfg!(target_endian = "little")
            && match self.header.dtype() {
                npyz::DType::Plain(ts) => {
                    matches!(ts.to_string().as_bytes().first(), Some(b'<' | b'|'))
                }
                _ => false,
            };
        if native && self.dtype != DType::Bool {
            let mut reader = self.reader;
            return reader
                .read_exact(dst)
                .map_err(|e| TensorError::npy(label, format!("data: {e}")));
        }
        let file = NpyFile::with_header(self.header, self.reader);
        type R = BufReader<std::fs::File>;
        match self.dtype {
            DType::F32 => fill_bytes::<f32, R>(file, dst, label),
            DType::F16 => fill_bytes::<half::f16, R>(file, dst, label),
            DType::BF16 => {
                let data = file
                    .data::<FixedSizeBytes<2>>()
                    .map_err(|e| TensorError::npy(label, format!("dtype: {e}")))?;
                let expected = dst.len() / 2;
                let mut n = 0usize;
                for (chunk, v) in dst.chunks_exact_mut(2).zip(data) {
                    let v = v.map_err(|e| {
                        TensorError::npy(label, format!("reading element {n} of {expected}: {e}"))
                    })?;
                    chunk.copy_from_slice(&u16::from_le_bytes(v.0).to_ne_bytes());
                    n += 1;
                }
                if n != expected {
                    return Err(TensorError::npy(
                        label,
                        format!("data ends after {n} of {expected} elements"),
                    ));
                }
                Ok(())
            }
            DType::F64 => fill_bytes::<f64, R>(file, dst, label),
            DType::I8 => fill_bytes::<i8, R>(file, dst, label),
            DType::U8 => fill_bytes::<u8, R>(file, dst, label),
            DType::I16 => fill_bytes::<i16, R>(file, dst, label),
            DType::U16 => fill_bytes::<u16, R>(file, dst, label),
            DType::I32 => fill_bytes::<i32, R>(file, dst, label),
            DType::U32 => fill_bytes::<u32, R>(file, dst, label),
            DType::I64 => fill_bytes::<i64, R>(file, dst, label),
            DType::U64 => fill_bytes::<u64, R>(file, dst, label),
            DType::Bool => fill_bytes::<bool, R>(file, dst, label),
            other => Err(unsupported(other, label)),
        }
    }
}

/// The error for a dtype without a `.npy` element type here (int4, complex, string, handles).
fn unsupported(dtype: DType, label: &str) -> TensorError {
    TensorError::npy(
        label,
        format!("dtype {dtype} has no .npy element type here; expected a number or bool dtype"),
    )
}

fn read_body<R: Read>(
    allocator: &AllocatorRef,
    header: NpyHeader,
    reader: R,
    label: &str,
    available: Option<u64>,
) -> Result<Tensor, TensorError> {
    let (dtype, shape) = interpret(&header, label)?;
    let bytes = shape.byte_size(dtype)?;
    if let Some(avail) = available {
        if bytes as u64 > avail {
            return Err(TensorError::npy(
                label,
                format!(
                    "header promises {bytes} data bytes ({dtype} {shape}) but only {avail} bytes follow the header"
                ),
            ));
        }
    }
    let mut t = Tensor::zeros_in(allocator, dtype, shape)?;
    let file = NpyFile::with_header(header, reader);
    match dtype {
        DType::F32 => fill::<f32, R>(file, &mut t, label)?,
        DType::F16 => fill::<half::f16, R>(file, &mut t, label)?,
        DType::BF16 => fill_bf16(file, &mut t, label)?,
        DType::F64 => fill::<f64, R>(file, &mut t, label)?,
        DType::I8 => fill::<i8, R>(file, &mut t, label)?,
        DType::U8 => fill::<u8, R>(file, &mut t, label)?,
        DType::I16 => fill::<i16, R>(file, &mut t, label)?,
        DType::U16 => fill::<u16, R>(file, &mut t, label)?,
        DType::I32 => fill::<i32, R>(file, &mut t, label)?,
        DType::U32 => fill::<u32, R>(file, &mut t, label)?,
        DType::I64 => fill::<i64, R>(file, &mut t, label)?,
        DType::U64 => fill::<u64, R>(file, &mut t, label)?,
        DType::Bool => fill::<bool, R>(file, &mut t, label)?,
        other => return Err(unsupported(other, label)),
    }
    Ok(t)
}

fn write_typed<T: Element + npyz::AutoSerialize, W: Write>(
    t: &Tensor,
    dims: &[u64],
    w: W,
) -> std::io::Result<()> {
    let data = t
        .as_slice::<T>()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    let mut out = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(dims)
        .writer(w)
        .begin_nd()?;
    out.extend(data.iter().copied())?;
    out.finish()
}

fn write_bf16<W: Write>(t: &Tensor, dims: &[u64], w: W) -> std::io::Result<()> {
    let data = t
        .as_slice::<half::bf16>()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    let ts: npyz::TypeStr = "|V2"
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{e}")))?;
    let mut out = npyz::WriteOptions::<FixedSizeBytes<2>>::new()
        .dtype(npyz::DType::Plain(ts))
        .shape(dims)
        .writer(w)
        .begin_nd()?;
    out.extend(
        data.iter()
            .map(|v| FixedSizeBytes(v.to_bits().to_le_bytes())),
    )?;
    out.finish()
}

impl Tensor {
    /// Reads a `.npy` file into a tensor on the default CPU allocator.
    pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor, TensorError> {
        Self::read_npy_in(&default_cpu_allocator()?, path)
    }

    /// Reads a `.npy` file into a tensor whose buffer comes from `allocator`.
    ///
    /// The header's declared length and its promised data size are checked against the file
    /// length (and the header against a 1 MiB cap) before anything is allocated, so a corrupted
    /// header cannot trigger a huge allocation.
    pub fn read_npy_in(
        allocator: &AllocatorRef,
        path: impl AsRef<Path>,
    ) -> Result<Tensor, TensorError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        // Regular files only: a device or FIFO has no length to check the header against.
        let (file, len) =
            crate::fileio::open_regular(path).map_err(|e| TensorError::npy(&label, e))?;
        let mut reader = BufReader::new(file);
        let header = read_header(&mut reader, &label, Some(len))?;
        let pos = reader
            .stream_position()
            .map_err(|e| TensorError::npy(&label, e))?;
        read_body(
            allocator,
            header,
            reader,
            &label,
            Some(len.saturating_sub(pos)),
        )
    }

    /// Reads `.npy` data from any reader into a tensor whose buffer comes from `allocator`.
    ///
    /// The reader's length is unknown, so the data section is first read into a temporary vector
    /// that grows only as bytes actually arrive (a header promising more data than the stream
    /// holds is an error, never a huge allocation); it is then decoded into the tensor.
    /// [`read_npy_in`](Self::read_npy_in) avoids the temporary copy by checking the file length.
    pub fn read_npy_from_in<R: Read>(
        allocator: &AllocatorRef,
        mut reader: R,
    ) -> Result<Tensor, TensorError> {
        let header = read_header(&mut reader, READER, None)?;
        let (dtype, shape) = interpret(&header, READER)?;
        let bytes = shape.byte_size(dtype)?;
        let mut data = Vec::new();
        reader
            .take(bytes as u64)
            .read_to_end(&mut data)
            .map_err(|e| TensorError::npy(READER, format!("data: {e}")))?;
        if data.len() < bytes {
            return Err(TensorError::npy(
                READER,
                format!(
                    "data ends after {} of {bytes} bytes ({dtype} {shape})",
                    data.len()
                ),
            ));
        }
        read_body(
            allocator,
            header,
            &data[..],
            READER,
            Some(data.len() as u64),
        )
    }

    /// Writes the tensor as a `.npy` file (C order, native byte order), through a temporary
    /// file in the same directory renamed into place ([`crate::fileio::write_file_atomic`]): a
    /// symbolic link at `path` is replaced, never followed, and no half-written file is ever
    /// visible at `path`.
    pub fn write_npy(&self, path: impl AsRef<Path>) -> Result<(), TensorError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        let mut failure = None;
        crate::fileio::write_file_atomic(path, |file| {
            let mut w = BufWriter::new(file);
            if let Err(e) = self.write_npy_labeled(&mut w, &label) {
                failure = Some(e);
                return Err(std::io::Error::other("npy encoding failed"));
            }
            w.flush()
        })
        .map_err(|e| {
            failure
                .take()
                .unwrap_or_else(|| TensorError::npy(&label, e))
        })
    }

    /// Writes the tensor in `.npy` format to `writer`.
    pub fn write_npy_to<W: Write>(&self, writer: W) -> Result<(), TensorError> {
        self.write_npy_labeled(writer, WRITER)
    }

    fn write_npy_labeled<W: Write>(&self, w: W, label: &str) -> Result<(), TensorError> {
        let dims: Vec<u64> = self.dims().iter().map(|&d| d as u64).collect();
        let r = match self.dtype() {
            DType::F32 => write_typed::<f32, W>(self, &dims, w),
            DType::F16 => write_typed::<half::f16, W>(self, &dims, w),
            DType::BF16 => write_bf16(self, &dims, w),
            DType::F64 => write_typed::<f64, W>(self, &dims, w),
            DType::I8 => write_typed::<i8, W>(self, &dims, w),
            DType::U8 => write_typed::<u8, W>(self, &dims, w),
            DType::I16 => write_typed::<i16, W>(self, &dims, w),
            DType::U16 => write_typed::<u16, W>(self, &dims, w),
            DType::I32 => write_typed::<i32, W>(self, &dims, w),
            DType::U32 => write_typed::<u32, W>(self, &dims, w),
            DType::I64 => write_typed::<i64, W>(self, &dims, w),
            DType::U64 => write_typed::<u64, W>(self, &dims, w),
            DType::Bool => write_typed::<bool, W>(self, &dims, w),
            other => return Err(unsupported(other, label)),
        };
        r.map_err(|e| TensorError::npy(label, e))
    }
}
