//! Builtin operator options (the `BuiltinOptions` union of the TFLite schema) for the operators
//! this crate describes; every other options table is kept as its union type id.

use crate::tensor::DType;
use rust_alloc::string::String;
use rust_alloc::vec::Vec;

/// `Padding` enum of the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// `SAME` (0).
    Same,
    /// `VALID` (1).
    Valid,
    /// A value the schema does not define, kept as read.
    Unknown(i8),
}

impl Padding {
    /// From the raw schema byte.
    pub fn from_raw(v: i8) -> Self {
        match v {
            0 => Padding::Same,
            1 => Padding::Valid,
            other => Padding::Unknown(other),
        }
    }
    /// The raw schema byte.
    pub fn raw(self) -> i8 {
        match self {
            Padding::Same => 0,
            Padding::Valid => 1,
            Padding::Unknown(v) => v,
        }
    }
}

/// `ActivationFunctionType` enum of the schema (fused activation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `NONE` (0).
    None,
    /// `RELU` (1).
    Relu,
    /// `RELU_N1_TO_1` (2).
    ReluN1To1,
    /// `RELU6` (3).
    Relu6,
    /// `TANH` (4).
    Tanh,
    /// `SIGN_BIT` (5).
    SignBit,
    /// A value the schema does not define, kept as read.
    Unknown(i8),
}

impl Activation {
    /// From the raw schema byte.
    pub fn from_raw(v: i8) -> Self {
        match v {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => Activation::ReluN1To1,
            3 => Activation::Relu6,
            4 => Activation::Tanh,
            5 => Activation::SignBit,
            other => Activation::Unknown(other),
        }
    }
    /// The raw schema byte.
    pub fn raw(self) -> i8 {
        match self {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::ReluN1To1 => 2,
            Activation::Relu6 => 3,
            Activation::Tanh => 4,
            Activation::SignBit => 5,
            Activation::Unknown(v) => v,
        }
    }
}

/// Union type ids of the `BuiltinOptions` union (position in the schema's union list, 1-based;
/// 0 is `NONE`).
pub mod union_id {
    /// `Conv2DOptions`.
    pub const CONV_2D: u8 = 1;
    /// `DepthwiseConv2DOptions`.
    pub const DEPTHWISE_CONV_2D: u8 = 2;
    /// `Pool2DOptions`.
    pub const POOL_2D: u8 = 5;
    /// `SVDFOptions`.
    pub const SVDF: u8 = 6;
    /// `FullyConnectedOptions`.
    pub const FULLY_CONNECTED: u8 = 8;
    /// `SoftmaxOptions`.
    pub const SOFTMAX: u8 = 9;
    /// `ConcatenationOptions`.
    pub const CONCATENATION: u8 = 10;
    /// `AddOptions`.
    pub const ADD: u8 = 11;
    /// `ResizeBilinearOptions`.
    pub const RESIZE_BILINEAR: u8 = 15;
    /// `ReshapeOptions`.
    pub const RESHAPE: u8 = 17;
    /// `SpaceToDepthOptions`.
    pub const SPACE_TO_DEPTH: u8 = 19;
    /// `MulOptions`.
    pub const MUL: u8 = 21;
    /// `PadOptions`.
    pub const PAD: u8 = 22;
    /// `GatherOptions`.
    pub const GATHER: u8 = 23;
    /// `TransposeOptions`.
    pub const TRANSPOSE: u8 = 26;
    /// `ReducerOptions` (MEAN, SUM, REDUCE_MAX, ...).
    pub const REDUCER: u8 = 27;
    /// `SubOptions`.
    pub const SUB: u8 = 28;
    /// `DivOptions`.
    pub const DIV: u8 = 29;
    /// `SqueezeOptions`.
    pub const SQUEEZE: u8 = 30;
    /// `StridedSliceOptions`.
    pub const STRIDED_SLICE: u8 = 32;
    /// `SplitOptions`.
    pub const SPLIT: u8 = 35;
    /// `CastOptions`.
    pub const CAST: u8 = 37;
    /// `DequantizeOptions`.
    pub const DEQUANTIZE: u8 = 38;
    /// `MaximumMinimumOptions`.
    pub const MAXIMUM_MINIMUM: u8 = 39;
    /// `TransposeConvOptions`.
    pub const TRANSPOSE_CONV: u8 = 49;
    /// `ExpandDimsOptions`.
    pub const EXPAND_DIMS: u8 = 52;
    /// `ShapeOptions`.
    pub const SHAPE: u8 = 55;
    /// `PackOptions`.
    pub const PACK: u8 = 59;
    /// `UnpackOptions`.
    pub const UNPACK: u8 = 64;
    /// `UnidirectionalSequenceLSTMOptions`.
    pub const UNIDIRECTIONAL_SEQUENCE_LSTM: u8 = 71;
    /// `ResizeNearestNeighborOptions`.
    pub const RESIZE_NEAREST_NEIGHBOR: u8 = 74;
    /// `LeakyReluOptions`.
    pub const LEAKY_RELU: u8 = 75;
    /// `SplitVOptions`.
    pub const SPLIT_V: u8 = 79;
    /// `QuantizeOptions`.
    pub const QUANTIZE: u8 = 89;
    /// `HardSwishOptions`.
    pub const HARD_SWISH: u8 = 91;
    /// `IfOptions`.
    pub const IF: u8 = 92;
    /// `WhileOptions`.
    pub const WHILE: u8 = 93;
    /// `DepthToSpaceOptions`.
    pub const DEPTH_TO_SPACE: u8 = 94;
    /// `DensifyOptions`.
    pub const DENSIFY: u8 = 99;
    /// `BatchMatMulOptions`.
    pub const BATCH_MATMUL: u8 = 101;
    /// `CallOnceOptions`.
    pub const CALL_ONCE: u8 = 103;
    /// `VarHandleOptions`.
    pub const VAR_HANDLE: u8 = 111;
    /// `GeluOptions`.
    pub const GELU: u8 = 116;
    /// Highest union type id of the `BuiltinOptions` union in the schema (`RightShiftOptions`).
    pub const MAX_KNOWN: u8 = 126;
}

/// The builtin options tables this crate decodes: the one declaration of each table's fields,
/// with the schema's field number (vtable slot `4 + 2 * n`) and default (0, `false`, `0.0`, the
/// enum's zero value, or an empty / absent vector unless `= value` says otherwise).
///
/// The [`BuiltinOptions`] enum, the `.tflite` verifier, decoder and writer are all generated from
/// this list, so adding an op's options is one entry here. Callers pass a macro that receives the
/// whole list; each entry reads
/// `Variant = UNION_ID { field_number name: Type [= default], ... }`.
macro_rules! builtin_options_table {
    ($callback:ident) => {
        $callback! {
            /// `Conv2DOptions`.
            Conv2D = CONV_2D {
                0 padding: Padding,
                1 stride_w: i32,
                2 stride_h: i32,
                3 activation: Activation,
                4 dilation_w: i32 = 1,
                5 dilation_h: i32 = 1,
            }
            /// `DepthwiseConv2DOptions`.
            DepthwiseConv2D = DEPTHWISE_CONV_2D {
                0 padding: Padding,
                1 stride_w: i32,
                2 stride_h: i32,
                3 depth_multiplier: i32,
                4 activation: Activation,
                5 dilation_w: i32 = 1,
                6 dilation_h: i32 = 1,
            }
            /// `Pool2DOptions` (AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D).
            Pool2D = POOL_2D {
                0 padding: Padding,
                1 stride_w: i32,
                2 stride_h: i32,
                3 filter_w: i32,
                4 filter_h: i32,
                5 activation: Activation,
            }
            /// `SVDFOptions`.
            Svdf = SVDF {
                0 rank: i32,
                1 activation: Activation,
                2 asymmetric_quantize_inputs: bool,
            }
            /// `FullyConnectedOptions`.
            FullyConnected = FULLY_CONNECTED {
                0 activation: Activation,
                1 weights_format: i8,
                2 keep_num_dims: bool,
                3 asymmetric_quantize_inputs: bool,
            }
            /// `SoftmaxOptions`.
            Softmax = SOFTMAX { 0 beta: f32 }
            /// `ConcatenationOptions`.
            Concatenation = CONCATENATION { 0 axis: i32, 1 activation: Activation }
            /// `AddOptions`.
            Add = ADD { 0 activation: Activation, 1 pot_scale_int16: bool = true }
            /// `SubOptions`.
            Sub = SUB { 0 activation: Activation, 1 pot_scale_int16: bool = true }
            /// `MulOptions`.
            Mul = MUL { 0 activation: Activation }
            /// `DivOptions`.
            Div = DIV { 0 activation: Activation }
            /// `ReshapeOptions` (`new_shape` absent = `None`).
            Reshape = RESHAPE { 0 new_shape: Option<Vec<i32>> }
            /// `SqueezeOptions`.
            Squeeze = SQUEEZE { 0 squeeze_dims: Vec<i32> }
            /// `ReducerOptions` (MEAN, SUM, REDUCE_MAX, ...).
            Reducer = REDUCER { 0 keep_dims: bool }
            /// `StridedSliceOptions`.
            StridedSlice = STRIDED_SLICE {
                0 begin_mask: i32,
                1 end_mask: i32,
                2 ellipsis_mask: i32,
                3 new_axis_mask: i32,
                4 shrink_axis_mask: i32,
                5 offset: bool,
            }
            /// `CastOptions`.
            Cast = CAST { 0 in_data_type: DType, 1 out_data_type: DType }
            /// `ResizeBilinearOptions` (fields 0 and 1, `new_height` / `new_width`, are deprecated).
            ResizeBilinear = RESIZE_BILINEAR { 2 align_corners: bool, 3 half_pixel_centers: bool }
            /// `UnidirectionalSequenceLSTMOptions`.
            UnidirectionalSequenceLstm = UNIDIRECTIONAL_SEQUENCE_LSTM {
                0 activation: Activation,
                1 cell_clip: f32,
                2 proj_clip: f32,
                3 time_major: bool,
                4 asymmetric_quantize_inputs: bool,
                5 diagonal_recurrent_tensors: bool,
            }
            /// `DepthToSpaceOptions`.
            DepthToSpace = DEPTH_TO_SPACE { 0 block_size: i32 }
            /// `SpaceToDepthOptions`.
            SpaceToDepth = SPACE_TO_DEPTH { 0 block_size: i32 }
            /// `LeakyReluOptions`.
            LeakyRelu = LEAKY_RELU { 0 alpha: f32 }
            /// `GatherOptions`.
            Gather = GATHER { 0 axis: i32, 1 batch_dims: i32 }
            /// `PackOptions`.
            Pack = PACK { 0 values_count: i32, 1 axis: i32 }
            /// `SplitOptions`.
            Split = SPLIT { 0 num_splits: i32 }
            /// `SplitVOptions`.
            SplitV = SPLIT_V { 0 num_splits: i32 }
            /// `UnpackOptions`.
            Unpack = UNPACK { 0 num: i32, 1 axis: i32 }
            /// `ResizeNearestNeighborOptions`.
            ResizeNearestNeighbor = RESIZE_NEAREST_NEIGHBOR { 0 align_corners: bool, 1 half_pixel_centers: bool }
            /// `TransposeConvOptions`.
            TransposeConv = TRANSPOSE_CONV {
                0 padding: Padding,
                1 stride_w: i32,
                2 stride_h: i32,
                3 activation: Activation,
            }
            /// `ShapeOptions`: the output's dtype.
            Shape = SHAPE { 0 out_type: DType }
            /// `BatchMatMulOptions`.
            BatchMatMul = BATCH_MATMUL {
                0 adj_x: bool,
                1 adj_y: bool,
                2 asymmetric_quantize_inputs: bool,
            }
            /// `GeluOptions`.
            Gelu = GELU { 0 approximate: bool }
            /// `IfOptions`: the subgraphs of the two branches.
            If = IF { 0 then_subgraph_index: i32, 1 else_subgraph_index: i32 }
            /// `WhileOptions`: the condition and body subgraphs.
            While = WHILE { 0 cond_subgraph_index: i32, 1 body_subgraph_index: i32 }
            /// `CallOnceOptions`: the subgraph run once, at the first invoke.
            CallOnce = CALL_ONCE { 0 init_subgraph_index: i32 }
            /// `VarHandleOptions`: the resource variable a VAR_HANDLE names.
            VarHandle = VAR_HANDLE { 0 container: String, 1 shared_name: String }
        }
    };
}
pub(crate) use builtin_options_table;

/// Defines [`BuiltinOptions`] and its `type_id` from [`builtin_options_table`].
macro_rules! define_builtin_options {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $uid:ident {
            $($id:literal $field:ident : $ty:ty $(= $default:expr)?),* $(,)?
        }
    )*) => {
        /// Decoded builtin options of an operator.
        #[derive(Clone, Debug, PartialEq)]
        #[allow(missing_docs)] // field names are the schema's field names
        pub enum BuiltinOptions {
            /// No options table.
            None,
            $(
                $(#[$doc])*
                $variant { $($field: $ty),* },
            )*
            /// Any other options table (including the field-less ones: PadOptions,
            /// TransposeOptions, DequantizeOptions, QuantizeOptions, HardSwishOptions,
            /// MaximumMinimumOptions, ...), kept as its union type id; its fields are not decoded
            /// and a writer emits an empty table.
            Other { type_id: u8 },
        }

        impl BuiltinOptions {
            /// The union type id this value is stored under (0 for `None`).
            pub fn type_id(&self) -> u8 {
                match self {
                    BuiltinOptions::None => 0,
                    $(BuiltinOptions::$variant { .. } => union_id::$uid,)*
                    BuiltinOptions::Other { type_id } => *type_id,
                }
            }
        }
    };
}

builtin_options_table!(define_builtin_options);

impl BuiltinOptions {
    /// The fused activation, for the options that carry one.
    pub fn activation(&self) -> Option<Activation> {
        match self {
            BuiltinOptions::Conv2D { activation, .. }
            | BuiltinOptions::DepthwiseConv2D { activation, .. }
            | BuiltinOptions::Pool2D { activation, .. }
            | BuiltinOptions::Svdf { activation, .. }
            | BuiltinOptions::FullyConnected { activation, .. }
            | BuiltinOptions::Concatenation { activation, .. }
            | BuiltinOptions::Add { activation, .. }
            | BuiltinOptions::Sub { activation, .. }
            | BuiltinOptions::Mul { activation }
            | BuiltinOptions::Div { activation }
            | BuiltinOptions::UnidirectionalSequenceLstm { activation, .. }
            | BuiltinOptions::TransposeConv { activation, .. } => Some(*activation),
            _ => None,
        }
    }
}
