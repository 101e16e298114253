//! Hand-written accessors for the subset of the TFLite schema (`schema.fbs`, file identifier
//! `TFL3`) this crate reads, over the `flatbuffers` crate's `Table` / `Verifier` machinery.
//!
//! Every table type has a [`Verifiable`] implementation listing exactly the fields (slot and
//! type) that the reader later accesses through [`T`]; the reader only touches a table after
//! [`verified_root`] verified the whole tree, which is what makes the unchecked `Table::get`
//! calls in [`T`] sound.

use super::table::{slot, T};
use flatbuffers::{ForwardsUOffset, InvalidFlatbuffer, Table, Vector, Verifiable, Verifier};

/// `Model` fields.
pub(crate) mod model {
    use super::slot;
    pub const VERSION: u16 = slot(0);
    pub const OPERATOR_CODES: u16 = slot(1);
    pub const SUBGRAPHS: u16 = slot(2);
    pub const DESCRIPTION: u16 = slot(3);
    pub const BUFFERS: u16 = slot(4);
    pub const METADATA_BUFFER: u16 = slot(5);
    pub const METADATA: u16 = slot(6);
    pub const SIGNATURE_DEFS: u16 = slot(7);
}

/// `OperatorCode` fields.
pub(crate) mod opcode {
    use super::slot;
    pub const DEPRECATED_BUILTIN_CODE: u16 = slot(0);
    pub const CUSTOM_CODE: u16 = slot(1);
    pub const VERSION: u16 = slot(2);
    pub const BUILTIN_CODE: u16 = slot(3);
}

/// `SubGraph` fields.
pub(crate) mod subgraph {
    use super::slot;
    pub const TENSORS: u16 = slot(0);
    pub const INPUTS: u16 = slot(1);
    pub const OUTPUTS: u16 = slot(2);
    pub const OPERATORS: u16 = slot(3);
    pub const NAME: u16 = slot(4);
}

/// `Tensor` fields.
pub(crate) mod tensor {
    use super::slot;
    pub const SHAPE: u16 = slot(0);
    pub const TYPE: u16 = slot(1);
    pub const BUFFER: u16 = slot(2);
    pub const NAME: u16 = slot(3);
    pub const QUANTIZATION: u16 = slot(4);
    pub const IS_VARIABLE: u16 = slot(5);
    pub const SPARSITY: u16 = slot(6);
    pub const SHAPE_SIGNATURE: u16 = slot(7);
    pub const HAS_RANK: u16 = slot(8);
}

/// `QuantizationParameters` fields.
pub(crate) mod quant {
    use super::slot;
    pub const MIN: u16 = slot(0);
    pub const MAX: u16 = slot(1);
    pub const SCALE: u16 = slot(2);
    pub const ZERO_POINT: u16 = slot(3);
    pub const DETAILS_TYPE: u16 = slot(4);
    pub const DETAILS: u16 = slot(5);
    pub const QUANTIZED_DIMENSION: u16 = slot(6);
}

/// `Operator` fields.
pub(crate) mod operator {
    use super::slot;
    pub const OPCODE_INDEX: u16 = slot(0);
    pub const INPUTS: u16 = slot(1);
    pub const OUTPUTS: u16 = slot(2);
    pub const BUILTIN_OPTIONS_TYPE: u16 = slot(3);
    pub const BUILTIN_OPTIONS: u16 = slot(4);
    pub const CUSTOM_OPTIONS: u16 = slot(5);
    pub const CUSTOM_OPTIONS_FORMAT: u16 = slot(6);
    pub const MUTATING_VARIABLE_INPUTS: u16 = slot(7);
    pub const INTERMEDIATES: u16 = slot(8);
    pub const LARGE_CUSTOM_OPTIONS_OFFSET: u16 = slot(9);
    pub const LARGE_CUSTOM_OPTIONS_SIZE: u16 = slot(10);
    pub const BUILTIN_OPTIONS_2_TYPE: u16 = slot(11);
    pub const BUILTIN_OPTIONS_2: u16 = slot(12);
}

/// `Buffer` fields.
pub(crate) mod buffer {
    use super::slot;
    pub const DATA: u16 = slot(0);
    pub const OFFSET: u16 = slot(1);
    pub const SIZE: u16 = slot(2);
}

/// `Metadata` fields.
pub(crate) mod metadata {
    use super::slot;
    pub const NAME: u16 = slot(0);
    pub const BUFFER: u16 = slot(1);
}

/// `TensorMap` fields.
pub(crate) mod tensor_map {
    use super::slot;
    pub const NAME: u16 = slot(0);
    pub const TENSOR_INDEX: u16 = slot(1);
}

/// `SignatureDef` fields.
pub(crate) mod signature {
    use super::slot;
    pub const INPUTS: u16 = slot(0);
    pub const OUTPUTS: u16 = slot(1);
    pub const SIGNATURE_KEY: u16 = slot(2);
    pub const SUBGRAPH_INDEX: u16 = slot(4);
}

/// Verifies the union value at `pos` (a uoffset to a table).
fn verify_union_table(type_id: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
    let off = v.get_uoffset(pos)? as usize;
    super::options::verify_options(type_id, v, pos.saturating_add(off))
}

macro_rules! table_type {
    ($(#[$m:meta])* $name:ident, |$tv:ident| $body:expr) => {
        $(#[$m])*
        #[derive(Clone, Copy)]
        pub(crate) struct $name;
        impl Verifiable for $name {
            fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
                let $tv = v.visit_table(pos)?;
                let tv = $body;
                tv.finish();
                Ok(())
            }
        }
    };
}

type Vt<T> = ForwardsUOffset<Vector<'static, ForwardsUOffset<T>>>;
type Vs<T> = ForwardsUOffset<Vector<'static, T>>;
type Str = ForwardsUOffset<&'static str>;

table_type!(
    /// A table whose fields are never read (sparsity, custom quantization details): only its
    /// header and vtable are verified.
    OpaqueTable, |tv| tv
);

table_type!(
    /// `Model` (root).
    ModelTable, |tv| tv
        .visit_field::<u32>("Model.version", model::VERSION, false)?
        .visit_field::<Vt<OperatorCodeTable>>("Model.operator_codes", model::OPERATOR_CODES, false)?
        .visit_field::<Vt<SubGraphTable>>("Model.subgraphs", model::SUBGRAPHS, false)?
        .visit_field::<Str>("Model.description", model::DESCRIPTION, false)?
        .visit_field::<Vt<BufferTable>>("Model.buffers", model::BUFFERS, false)?
        .visit_field::<Vs<i32>>("Model.metadata_buffer", model::METADATA_BUFFER, false)?
        .visit_field::<Vt<MetadataTable>>("Model.metadata", model::METADATA, false)?
        .visit_field::<Vt<SignatureDefTable>>("Model.signature_defs", model::SIGNATURE_DEFS, false)?
);

table_type!(
    /// `OperatorCode`.
    OperatorCodeTable, |tv| tv
        .visit_field::<i8>("OperatorCode.deprecated_builtin_code", opcode::DEPRECATED_BUILTIN_CODE, false)?
        .visit_field::<Str>("OperatorCode.custom_code", opcode::CUSTOM_CODE, false)?
        .visit_field::<i32>("OperatorCode.version", opcode::VERSION, false)?
        .visit_field::<i32>("OperatorCode.builtin_code", opcode::BUILTIN_CODE, false)?
);

table_type!(
    /// `SubGraph`.
    SubGraphTable, |tv| tv
        .visit_field::<Vt<TensorTable>>("SubGraph.tensors", subgraph::TENSORS, false)?
        .visit_field::<Vs<i32>>("SubGraph.inputs", subgraph::INPUTS, false)?
        .visit_field::<Vs<i32>>("SubGraph.outputs", subgraph::OUTPUTS, false)?
        .visit_field::<Vt<OperatorTable>>("SubGraph.operators", subgraph::OPERATORS, false)?
        .visit_field::<Str>("SubGraph.name", subgraph::NAME, false)?
);

table_type!(
    /// `Tensor`.
    TensorTable, |tv| tv
        .visit_field::<Vs<i32>>("Tensor.shape", tensor::SHAPE, false)?
        .visit_field::<i8>("Tensor.type", tensor::TYPE, false)?
        .visit_field::<u32>("Tensor.buffer", tensor::BUFFER, false)?
        .visit_field::<Str>("Tensor.name", tensor::NAME, false)?
        .visit_field::<ForwardsUOffset<QuantTable>>("Tensor.quantization", tensor::QUANTIZATION, false)?
        .visit_field::<bool>("Tensor.is_variable", tensor::IS_VARIABLE, false)?
        .visit_field::<ForwardsUOffset<SparsityTable>>("Tensor.sparsity", tensor::SPARSITY, false)?
        .visit_field::<Vs<i32>>("Tensor.shape_signature", tensor::SHAPE_SIGNATURE, false)?
        .visit_field::<bool>("Tensor.has_rank", tensor::HAS_RANK, false)?
);

/// Fields of `SparsityParameters`, `DimensionMetadata` and the index vector tables.
pub(crate) mod sparsity {
    use super::slot;
    pub const TRAVERSAL_ORDER: u16 = slot(0);
    pub const BLOCK_MAP: u16 = slot(1);
    pub const DIM_METADATA: u16 = slot(2);
    pub const FORMAT: u16 = slot(0);
    pub const DENSE_SIZE: u16 = slot(1);
    pub const ARRAY_SEGMENTS_TYPE: u16 = slot(2);
    pub const ARRAY_SEGMENTS: u16 = slot(3);
    pub const ARRAY_INDICES_TYPE: u16 = slot(4);
    pub const ARRAY_INDICES: u16 = slot(5);
    /// `values` of `Int32Vector` / `Uint16Vector` / `Uint8Vector`.
    pub const VALUES: u16 = slot(0);
    /// Union type ids of `SparseIndexVector`.
    pub const INT32_VECTOR: u8 = 1;
    pub const UINT16_VECTOR: u8 = 2;
    pub const UINT8_VECTOR: u8 = 3;
}

table_type!(
    /// `SparsityParameters`.
    SparsityTable, |tv| tv
        .visit_field::<Vs<i32>>("SparsityParameters.traversal_order", sparsity::TRAVERSAL_ORDER, false)?
        .visit_field::<Vs<i32>>("SparsityParameters.block_map", sparsity::BLOCK_MAP, false)?
        .visit_field::<Vt<DimMetadataTable>>("SparsityParameters.dim_metadata", sparsity::DIM_METADATA, false)?
);

table_type!(
    /// `DimensionMetadata`.
    DimMetadataTable, |tv| tv
        .visit_field::<i8>("DimensionMetadata.format", sparsity::FORMAT, false)?
        .visit_field::<i32>("DimensionMetadata.dense_size", sparsity::DENSE_SIZE, false)?
        .visit_union::<u8, _>(
            "DimensionMetadata.array_segments_type",
            sparsity::ARRAY_SEGMENTS_TYPE,
            "DimensionMetadata.array_segments",
            sparsity::ARRAY_SEGMENTS,
            false,
            verify_index_vector,
        )?
        .visit_union::<u8, _>(
            "DimensionMetadata.array_indices_type",
            sparsity::ARRAY_INDICES_TYPE,
            "DimensionMetadata.array_indices",
            sparsity::ARRAY_INDICES,
            false,
            verify_index_vector,
        )?
);

table_type!(
    /// `Int32Vector`.
    Int32VectorTable, |tv| tv.visit_field::<Vs<i32>>("Int32Vector.values", sparsity::VALUES, false)?
);
table_type!(
    /// `Uint16Vector`.
    Uint16VectorTable, |tv| tv.visit_field::<Vs<u16>>("Uint16Vector.values", sparsity::VALUES, false)?
);
table_type!(
    /// `Uint8Vector`.
    Uint8VectorTable, |tv| tv.visit_field::<Vs<u8>>("Uint8Vector.values", sparsity::VALUES, false)?
);

/// Verifies a `SparseIndexVector` union value of type `ty` at `pos`.
fn verify_index_vector(ty: u8, v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
    match ty {
        sparsity::INT32_VECTOR => <ForwardsUOffset<Int32VectorTable>>::run_verifier(v, pos),
        sparsity::UINT16_VECTOR => <ForwardsUOffset<Uint16VectorTable>>::run_verifier(v, pos),
        sparsity::UINT8_VECTOR => <ForwardsUOffset<Uint8VectorTable>>::run_verifier(v, pos),
        _ => <ForwardsUOffset<OpaqueTable>>::run_verifier(v, pos),
    }
}

table_type!(
    /// `QuantizationParameters`.
    QuantTable, |tv| tv
        .visit_field::<Vs<f32>>("QuantizationParameters.min", quant::MIN, false)?
        .visit_field::<Vs<f32>>("QuantizationParameters.max", quant::MAX, false)?
        .visit_field::<Vs<f32>>("QuantizationParameters.scale", quant::SCALE, false)?
        .visit_field::<Vs<i64>>("QuantizationParameters.zero_point", quant::ZERO_POINT, false)?
        .visit_union::<u8, _>(
            "QuantizationParameters.details_type",
            quant::DETAILS_TYPE,
            "QuantizationParameters.details",
            quant::DETAILS,
            false,
            |_ty, v, pos| <ForwardsUOffset<OpaqueTable>>::run_verifier(v, pos),
        )?
        .visit_field::<i32>("QuantizationParameters.quantized_dimension", quant::QUANTIZED_DIMENSION, false)?
);

table_type!(
    /// `Operator`.
    OperatorTable, |tv| tv
        .visit_field::<u32>("Operator.opcode_index", operator::OPCODE_INDEX, false)?
        .visit_field::<Vs<i32>>("Operator.inputs", operator::INPUTS, false)?
        .visit_field::<Vs<i32>>("Operator.outputs", operator::OUTPUTS, false)?
        .visit_union::<u8, _>(
            "Operator.builtin_options_type",
            operator::BUILTIN_OPTIONS_TYPE,
            "Operator.builtin_options",
            operator::BUILTIN_OPTIONS,
            false,
            verify_union_table,
        )?
        .visit_field::<Vs<u8>>("Operator.custom_options", operator::CUSTOM_OPTIONS, false)?
        .visit_field::<i8>("Operator.custom_options_format", operator::CUSTOM_OPTIONS_FORMAT, false)?
        .visit_field::<Vs<bool>>("Operator.mutating_variable_inputs", operator::MUTATING_VARIABLE_INPUTS, false)?
        .visit_field::<Vs<i32>>("Operator.intermediates", operator::INTERMEDIATES, false)?
        .visit_field::<u64>("Operator.large_custom_options_offset", operator::LARGE_CUSTOM_OPTIONS_OFFSET, false)?
        .visit_field::<u64>("Operator.large_custom_options_size", operator::LARGE_CUSTOM_OPTIONS_SIZE, false)?
        .visit_union::<u8, _>(
            "Operator.builtin_options_2_type",
            operator::BUILTIN_OPTIONS_2_TYPE,
            "Operator.builtin_options_2",
            operator::BUILTIN_OPTIONS_2,
            false,
            |_ty, v, pos| <ForwardsUOffset<OpaqueTable>>::run_verifier(v, pos),
        )?
);

table_type!(
    /// `Buffer`.
    BufferTable, |tv| tv
        .visit_field::<Vs<u8>>("Buffer.data", buffer::DATA, false)?
        .visit_field::<u64>("Buffer.offset", buffer::OFFSET, false)?
        .visit_field::<u64>("Buffer.size", buffer::SIZE, false)?
);

table_type!(
    /// `Metadata`.
    MetadataTable, |tv| tv
        .visit_field::<Str>("Metadata.name", metadata::NAME, false)?
        .visit_field::<u32>("Metadata.buffer", metadata::BUFFER, false)?
);

table_type!(
    /// `TensorMap`.
    TensorMapTable, |tv| tv
        .visit_field::<Str>("TensorMap.name", tensor_map::NAME, false)?
        .visit_field::<u32>("TensorMap.tensor_index", tensor_map::TENSOR_INDEX, false)?
);

table_type!(
    /// `SignatureDef`.
    SignatureDefTable, |tv| tv
        .visit_field::<Vt<TensorMapTable>>("SignatureDef.inputs", signature::INPUTS, false)?
        .visit_field::<Vt<TensorMapTable>>("SignatureDef.outputs", signature::OUTPUTS, false)?
        .visit_field::<Str>("SignatureDef.signature_key", signature::SIGNATURE_KEY, false)?
        .visit_field::<u32>("SignatureDef.subgraph_index", signature::SUBGRAPH_INDEX, false)?
);

/// Limits of the flatbuffer verifier for a file of `len` bytes: nesting far deeper than the
/// schema needs is rejected, and the "apparent size" (bytes reachable when shared objects are
/// counted once per reference) is capped at a small multiple of the file size, so a hostile
/// file cannot make the decoder materialize more than that.
pub(crate) fn verifier_options(len: usize) -> flatbuffers::VerifierOptions {
    flatbuffers::VerifierOptions {
        max_depth: 16,
        max_tables: len / 4 + 16,
        max_apparent_size: len.saturating_mul(8).saturating_add(1 << 16).min(1 << 31),
        ignore_missing_null_terminator: true,
    }
}

/// Verifies `bytes` as a TFLite `Model` and returns the verified root table.
pub(crate) fn verified_root(bytes: &[u8]) -> Result<T<'_>, InvalidFlatbuffer> {
    let opts = verifier_options(bytes.len());
    let mut v = Verifier::new(&opts, bytes);
    <ForwardsUOffset<ModelTable>>::run_verifier(&mut v, 0)?;
    // SAFETY: `run_verifier` above checked the root offset at 0 and the table it points to
    // (vtable in bounds, every field the reader uses), so following the root offset is sound.
    let root = unsafe { <ForwardsUOffset<Table<'_>> as flatbuffers::Follow>::follow(bytes, 0) };
    // SAFETY: `root` was verified above with this module's `Verifiable` impls.
    Ok(unsafe { T::verified(root) })
}
