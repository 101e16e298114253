//! The `.tflite` writer: serializes the IR with `flatbuffers::FlatBufferBuilder`, field by field
//! with the same slots the reader uses. Buffers marked `external` are written after the
//! flatbuffer and referenced through `offset`/`size` (the >2 GiB layout).

use flatbuffers::{FlatBufferBuilder, WIPOffset};
use rust_alloc::vec::Vec;

use super::schema::{
    buffer, metadata, model, opcode, operator, quant, signature, subgraph, tensor, tensor_map,
};
use crate::model::{Model, ModelError, Operator, SparseIndexVector, Sparsity, Subgraph, TensorDef};

/// Largest flatbuffer the builder can produce (its offsets are signed 32-bit in practice).
const MAX_FLATBUFFER: usize = (1 << 31) - (1 << 20);

/// Serializes `model` to `.tflite` bytes. Writing then reading gives back an equal [`Model`]
/// (options kept only as `BuiltinOptions::Other` are written as empty tables of that type).
pub fn write_model(m: &Model) -> Result<Vec<u8>, ModelError> {
    let inline: usize = (0..m.buffers.len())
        .filter(|&i| !m.buffers[i].external)
        .map(|i| m.buffer_data(i).len())
        .sum();
    let custom: usize = m
        .subgraphs
        .iter()
        .flat_map(|s| s.operators.iter())
        .map(|o| o.custom_options.len())
        .sum();
    if inline.saturating_add(custom) > MAX_FLATBUFFER {
        return Err(ModelError::Write(format!(
            "{} bytes of inline buffer data and custom options exceed the 2 GiB flatbuffer limit; mark large buffers external",
            inline + custom
        )));
    }
    let has_external = m.buffers.iter().any(|b| b.external && b.data.is_some());
    // First pass with placeholder offsets; external offset/size fields are always written (fixed
    // width), so the second pass with the real offsets has the same length.
    let placeholder = vec![0u64; m.buffers.len()];
    let first = build(m, &placeholder)?;
    if !has_external {
        return Ok(first);
    }
    let base = first.len().next_multiple_of(16);
    let mut offsets = vec![0u64; m.buffers.len()];
    let mut pos = base;
    for (i, b) in m.buffers.iter().enumerate() {
        if b.external && b.data.is_some() {
            pos = pos.next_multiple_of(16);
            offsets[i] = pos as u64;
            pos += m.buffer_data(i).len();
        }
    }
    let mut out = build(m, &offsets)?;
    if out.len() != first.len() {
        return Err(ModelError::Write(format!(
            "flatbuffer size changed between passes ({} vs {} bytes)",
            first.len(),
            out.len()
        )));
    }
    for (i, b) in m.buffers.iter().enumerate() {
        if b.external && b.data.is_some() {
            out.resize(offsets[i] as usize, 0);
            out.extend_from_slice(m.buffer_data(i));
        }
    }
    Ok(out)
}

fn build(m: &Model, external_offsets: &[u64]) -> Result<Vec<u8>, ModelError> {
    let mut fbb = FlatBufferBuilder::with_capacity(1024);

    let buffers: Vec<_> = (0..m.buffers.len())
        .map(|i| {
            let b = &m.buffers[i];
            let data =
                (!b.external && b.data.is_some()).then(|| fbb.create_vector(m.buffer_data(i)));
            let t = fbb.start_table();
            if let Some(d) = data {
                fbb.push_slot_always(buffer::DATA, d);
            }
            if b.external && b.data.is_some() {
                fbb.push_slot_always::<u64>(buffer::OFFSET, external_offsets[i]);
                fbb.push_slot_always::<u64>(buffer::SIZE, m.buffer_data(i).len() as u64);
            }
            fbb.end_table(t)
        })
        .collect();
    let buffers = fbb.create_vector(&buffers);

    let codes: Vec<_> = m
        .operator_codes
        .iter()
        .map(|c| {
            let custom = c.custom_code.as_deref().map(|s| fbb.create_string(s));
            let t = fbb.start_table();
            fbb.push_slot::<i8>(
                opcode::DEPRECATED_BUILTIN_CODE,
                c.deprecated_builtin_code,
                0,
            );
            if let Some(s) = custom {
                fbb.push_slot_always(opcode::CUSTOM_CODE, s);
            }
            fbb.push_slot::<i32>(opcode::VERSION, c.version, 1);
            fbb.push_slot::<i32>(opcode::BUILTIN_CODE, c.builtin.0, 0);
            fbb.end_table(t)
        })
        .collect();
    let codes = fbb.create_vector(&codes);

    let subgraphs: Vec<_> = m
        .subgraphs
        .iter()
        .map(|s| write_subgraph(&mut fbb, s))
        .collect();
    let subgraphs = fbb.create_vector(&subgraphs);

    let metas: Vec<_> = m
        .metadata
        .iter()
        .map(|md| {
            let name = fbb.create_string(&md.name);
            let t = fbb.start_table();
            fbb.push_slot_always(metadata::NAME, name);
            fbb.push_slot::<u32>(metadata::BUFFER, md.buffer, 0);
            fbb.end_table(t)
        })
        .collect();
    let metas = (!metas.is_empty()).then(|| fbb.create_vector(&metas));

    let sigs: Vec<_> = m
        .signatures
        .iter()
        .map(|s| {
            let mut maps = |list: &[crate::model::SignatureTensor]| {
                let items: Vec<_> = list
                    .iter()
                    .map(|st| {
                        let name = fbb.create_string(&st.name);
                        let t = fbb.start_table();
                        fbb.push_slot_always(tensor_map::NAME, name);
                        fbb.push_slot::<u32>(tensor_map::TENSOR_INDEX, st.tensor_index, 0);
                        fbb.end_table(t)
                    })
                    .collect();
                fbb.create_vector(&items)
            };
            let inputs = maps(&s.inputs);
            let outputs = maps(&s.outputs);
            let key = fbb.create_string(&s.key);
            let t = fbb.start_table();
            fbb.push_slot_always(signature::INPUTS, inputs);
            fbb.push_slot_always(signature::OUTPUTS, outputs);
            fbb.push_slot_always(signature::SIGNATURE_KEY, key);
            fbb.push_slot::<u32>(signature::SUBGRAPH_INDEX, s.subgraph_index, 0);
            fbb.end_table(t)
        })
        .collect();
    let sigs = (!sigs.is_empty()).then(|| fbb.create_vector(&sigs));

    let description = m.description.as_deref().map(|d| fbb.create_string(d));
    let root = fbb.start_table();
    fbb.push_slot::<u32>(model::VERSION, m.version, 0);
    fbb.push_slot_always(model::OPERATOR_CODES, codes);
    fbb.push_slot_always(model::SUBGRAPHS, subgraphs);
    if let Some(d) = description {
        fbb.push_slot_always(model::DESCRIPTION, d);
    }
    fbb.push_slot_always(model::BUFFERS, buffers);
    if let Some(md) = metas {
        fbb.push_slot_always(model::METADATA, md);
    }
    if let Some(s) = sigs {
        fbb.push_slot_always(model::SIGNATURE_DEFS, s);
    }
    let root = fbb.end_table(root);
    fbb.finish(root, Some("TFL3"));
    Ok(fbb.finished_data().to_vec())
}

fn write_subgraph<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    s: &Subgraph,
) -> WIPOffset<flatbuffers::TableFinishedWIPOffset> {
    let tensors: Vec<_> = s.tensors.iter().map(|t| write_tensor(fbb, t)).collect();
    let tensors = fbb.create_vector(&tensors);
    let inputs = fbb.create_vector(&s.inputs);
    let outputs = fbb.create_vector(&s.outputs);
    let ops: Vec<_> = s.operators.iter().map(|o| write_operator(fbb, o)).collect();
    let ops = fbb.create_vector(&ops);
    let name = s.name.as_deref().map(|n| fbb.create_string(n));
    let t = fbb.start_table();
    fbb.push_slot_always(subgraph::TENSORS, tensors);
    fbb.push_slot_always(subgraph::INPUTS, inputs);
    fbb.push_slot_always(subgraph::OUTPUTS, outputs);
    fbb.push_slot_always(subgraph::OPERATORS, ops);
    if let Some(n) = name {
        fbb.push_slot_always(subgraph::NAME, n);
    }
    fbb.end_table(t)
}

fn write_tensor<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    t: &TensorDef,
) -> WIPOffset<flatbuffers::TableFinishedWIPOffset> {
    let shape = fbb.create_vector(&t.shape);
    let name = fbb.create_string(&t.name);
    let sig = t.shape_signature.as_ref().map(|s| fbb.create_vector(s));
    let has_quantization =
        t.quantization.is_some() || t.calibration.is_some() || t.custom_quantization;
    let q = has_quantization.then(|| {
        let calibration = t.calibration.as_ref();
        let min = calibration.map(|c| fbb.create_vector(&c.min));
        let max = calibration.map(|c| fbb.create_vector(&c.max));
        let affine = t.quantization.as_ref();
        let scale = affine.map(|q| fbb.create_vector(q.scales()));
        let zp = affine.map(|q| fbb.create_vector(q.zero_points()));
        let details = t.custom_quantization.then(|| {
            let d = fbb.start_table();
            fbb.end_table(d)
        });
        let qt = fbb.start_table();
        if let (Some(min), Some(max)) = (min, max) {
            fbb.push_slot_always(quant::MIN, min);
            fbb.push_slot_always(quant::MAX, max);
        }
        if let (Some(scale), Some(zp)) = (scale, zp) {
            fbb.push_slot_always(quant::SCALE, scale);
            fbb.push_slot_always(quant::ZERO_POINT, zp);
        }
        if let Some(d) = details {
            fbb.push_slot_always::<u8>(quant::DETAILS_TYPE, 1);
            fbb.push_slot_always(quant::DETAILS, d);
        }
        // The dimension was read from an `i32` field (or set by a caller); a larger one cannot
        // name a dimension of any tensor and is written as the largest the field holds.
        let dimension = affine.map_or(0, |q| {
            i32::try_from(q.quantized_dimension()).unwrap_or(i32::MAX)
        });
        fbb.push_slot::<i32>(quant::QUANTIZED_DIMENSION, dimension, 0);
        fbb.end_table(qt)
    });
    let sparsity = match &t.sparsity {
        Some(sp) => Some(write_sparsity(fbb, sp)),
        None => t.is_sparse.then(|| {
            let s = fbb.start_table();
            fbb.end_table(s)
        }),
    };
    let tt = fbb.start_table();
    fbb.push_slot_always(tensor::SHAPE, shape);
    fbb.push_slot::<i8>(tensor::TYPE, super::dtype_to_schema(t.dtype), 0);
    fbb.push_slot::<u32>(tensor::BUFFER, t.buffer, 0);
    fbb.push_slot_always(tensor::NAME, name);
    if let Some(q) = q {
        fbb.push_slot_always(tensor::QUANTIZATION, q);
    }
    fbb.push_slot::<bool>(tensor::IS_VARIABLE, t.is_variable, false);
    if let Some(s) = sparsity {
        fbb.push_slot_always(tensor::SPARSITY, s);
    }
    if let Some(s) = sig {
        fbb.push_slot_always(tensor::SHAPE_SIGNATURE, s);
    }
    fbb.push_slot::<bool>(tensor::HAS_RANK, t.has_rank, false);
    fbb.end_table(tt)
}

/// A `SparseIndexVector` union value: (type id, table).
fn write_index_vector(
    fbb: &mut FlatBufferBuilder<'_>,
    v: &SparseIndexVector,
) -> (u8, WIPOffset<flatbuffers::TableFinishedWIPOffset>) {
    use super::schema::sparsity as sp;
    macro_rules! table {
        ($ty:expr, $x:expr) => {{
            let values = fbb.create_vector($x);
            let t = fbb.start_table();
            fbb.push_slot_always(sp::VALUES, values);
            ($ty, fbb.end_table(t))
        }};
    }
    match v {
        SparseIndexVector::Int32(x) => table!(sp::INT32_VECTOR, x),
        SparseIndexVector::Uint16(x) => table!(sp::UINT16_VECTOR, x),
        SparseIndexVector::Uint8(x) => table!(sp::UINT8_VECTOR, x),
    }
}

fn write_sparsity(
    fbb: &mut FlatBufferBuilder<'_>,
    s: &Sparsity,
) -> WIPOffset<flatbuffers::TableFinishedWIPOffset> {
    use super::schema::sparsity as sp;
    let traversal = fbb.create_vector(&s.traversal_order);
    let block_map = fbb.create_vector(&s.block_map);
    let mut dims = Vec::with_capacity(s.dim_metadata.len());
    for d in &s.dim_metadata {
        let seg = d
            .array_segments
            .as_ref()
            .map(|v| write_index_vector(fbb, v));
        let idx = d.array_indices.as_ref().map(|v| write_index_vector(fbb, v));
        let t = fbb.start_table();
        fbb.push_slot::<i8>(sp::FORMAT, d.format, 0);
        fbb.push_slot::<i32>(sp::DENSE_SIZE, d.dense_size, 0);
        if let Some((ty, v)) = seg {
            fbb.push_slot_always::<u8>(sp::ARRAY_SEGMENTS_TYPE, ty);
            fbb.push_slot_always(sp::ARRAY_SEGMENTS, v);
        }
        if let Some((ty, v)) = idx {
            fbb.push_slot_always::<u8>(sp::ARRAY_INDICES_TYPE, ty);
            fbb.push_slot_always(sp::ARRAY_INDICES, v);
        }
        dims.push(fbb.end_table(t));
    }
    let dims = fbb.create_vector(&dims);
    let t = fbb.start_table();
    fbb.push_slot_always(sp::TRAVERSAL_ORDER, traversal);
    fbb.push_slot_always(sp::BLOCK_MAP, block_map);
    fbb.push_slot_always(sp::DIM_METADATA, dims);
    fbb.end_table(t)
}

fn write_operator<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    o: &Operator,
) -> WIPOffset<flatbuffers::TableFinishedWIPOffset> {
    let inputs = fbb.create_vector(&o.inputs);
    let outputs = fbb.create_vector(&o.outputs);
    let inter = (!o.intermediates.is_empty()).then(|| fbb.create_vector(&o.intermediates));
    let custom = (!o.custom_options.is_empty()).then(|| fbb.create_byte_string(&o.custom_options));
    let mutating = (!o.mutating_variable_inputs.is_empty())
        .then(|| fbb.create_vector(&o.mutating_variable_inputs));
    let options = super::options::write_options(fbb, &o.builtin_options);
    let t = fbb.start_table();
    fbb.push_slot::<u32>(operator::OPCODE_INDEX, o.opcode_index, 0);
    fbb.push_slot_always(operator::INPUTS, inputs);
    fbb.push_slot_always(operator::OUTPUTS, outputs);
    if let Some((ty, off)) = options {
        fbb.push_slot_always::<u8>(operator::BUILTIN_OPTIONS_TYPE, ty);
        fbb.push_slot_always(operator::BUILTIN_OPTIONS, off);
    }
    if let Some(c) = custom {
        fbb.push_slot_always(operator::CUSTOM_OPTIONS, c);
    }
    if let Some(mv) = mutating {
        fbb.push_slot_always(operator::MUTATING_VARIABLE_INPUTS, mv);
    }
    if let Some(i) = inter {
        fbb.push_slot_always(operator::INTERMEDIATES, i);
    }
    #[cfg(test)]
    if let Some((offset, size)) = test_hooks::LARGE_CUSTOM_OPTIONS.get() {
        fbb.push_slot_always::<u64>(operator::LARGE_CUSTOM_OPTIONS_OFFSET, offset);
        fbb.push_slot_always::<u64>(operator::LARGE_CUSTOM_OPTIONS_SIZE, size);
    }
    fbb.end_table(t)
}

/// Lets the reader's tests write fields the IR does not model.
#[cfg(test)]
pub(crate) mod test_hooks {
    thread_local! {
        /// When set, every operator is written with these large-custom-options offset and size.
        pub(crate) static LARGE_CUSTOM_OPTIONS: core::cell::Cell<Option<(u64, u64)>> =
            const { core::cell::Cell::new(None) };
    }
}
