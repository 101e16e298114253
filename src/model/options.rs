//! Builtin operator options (the `BuiltinOptions` union of the TFLite schema) for the operators
//! this crate describes; every other options table is kept as its union type id.

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
    /// `DepthToSpaceOptions`.
    pub const DEPTH_TO_SPACE: u8 = 94;
    /// `DensifyOptions`.
    pub const DENSIFY: u8 = 99;
    /// `BatchMatMulOptions`.
    pub const BATCH_MATMUL: u8 = 101;
    /// `GeluOptions`.
    pub const GELU: u8 = 116;
    /// Highest union type id of the `BuiltinOptions` union in the schema (`RightShiftOptions`).
    pub const MAX_KNOWN: u8 = 126;
}

/// Decoded builtin options of an operator.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // field names are the schema's field names
pub enum BuiltinOptions {
    /// No options table.
    None,
    /// `Conv2DOptions`.
    Conv2D {
        padding: Padding,
        stride_w: i32,
        stride_h: i32,
        activation: Activation,
        dilation_w: i32,
        dilation_h: i32,
    },
    /// `DepthwiseConv2DOptions`.
    DepthwiseConv2D {
        padding: Padding,
        stride_w: i32,
        stride_h: i32,
        depth_multiplier: i32,
        activation: Activation,
        dilation_w: i32,
        dilation_h: i32,
    },
    /// `Pool2DOptions` (AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D).
    Pool2D {
        padding: Padding,
        stride_w: i32,
        stride_h: i32,
        filter_w: i32,
        filter_h: i32,
        activation: Activation,
    },
    /// `SVDFOptions`.
    Svdf {
        rank: i32,
        activation: Activation,
        asymmetric_quantize_inputs: bool,
    },
    /// `FullyConnectedOptions`.
    FullyConnected {
        activation: Activation,
        weights_format: i8,
        keep_num_dims: bool,
        asymmetric_quantize_inputs: bool,
    },
    /// `SoftmaxOptions`.
    Softmax { beta: f32 },
    /// `ConcatenationOptions`.
    Concatenation { axis: i32, activation: Activation },
    /// `AddOptions`.
    Add {
        activation: Activation,
        pot_scale_int16: bool,
    },
    /// `SubOptions`.
    Sub {
        activation: Activation,
        pot_scale_int16: bool,
    },
    /// `MulOptions`.
    Mul { activation: Activation },
    /// `DivOptions`.
    Div { activation: Activation },
    /// `ReshapeOptions` (`new_shape` absent = `None`).
    Reshape { new_shape: Option<Vec<i32>> },
    /// `SqueezeOptions`.
    Squeeze { squeeze_dims: Vec<i32> },
    /// `ReducerOptions` (MEAN, SUM, REDUCE_MAX, ...).
    Reducer { keep_dims: bool },
    /// `StridedSliceOptions`.
    StridedSlice {
        begin_mask: i32,
        end_mask: i32,
        ellipsis_mask: i32,
        new_axis_mask: i32,
        shrink_axis_mask: i32,
        offset: bool,
    },
    /// `CastOptions` (raw `TensorType` bytes).
    Cast { in_data_type: i8, out_data_type: i8 },
    /// `ResizeBilinearOptions`.
    ResizeBilinear {
        align_corners: bool,
        half_pixel_centers: bool,
    },
    /// `UnidirectionalSequenceLSTMOptions`.
    UnidirectionalSequenceLstm {
        activation: Activation,
        cell_clip: f32,
        proj_clip: f32,
        time_major: bool,
        asymmetric_quantize_inputs: bool,
        diagonal_recurrent_tensors: bool,
    },
    /// `DepthToSpaceOptions`.
    DepthToSpace { block_size: i32 },
    /// `SpaceToDepthOptions`.
    SpaceToDepth { block_size: i32 },
    /// `LeakyReluOptions`.
    LeakyRelu { alpha: f32 },
    /// `GatherOptions`.
    Gather { axis: i32, batch_dims: i32 },
    /// `PackOptions`.
    Pack { values_count: i32, axis: i32 },
    /// `SplitOptions`.
    Split { num_splits: i32 },
    /// `SplitVOptions`.
    SplitV { num_splits: i32 },
    /// `UnpackOptions`.
    Unpack { num: i32, axis: i32 },
    /// `ResizeNearestNeighborOptions`.
    ResizeNearestNeighbor {
        align_corners: bool,
        half_pixel_centers: bool,
    },
    /// `TransposeConvOptions`.
    TransposeConv {
        padding: Padding,
        stride_w: i32,
        stride_h: i32,
        activation: Activation,
    },
    /// `ShapeOptions` (raw `TensorType` byte of the output).
    Shape { out_type: i8 },
    /// `BatchMatMulOptions`.
    BatchMatMul {
        adj_x: bool,
        adj_y: bool,
        asymmetric_quantize_inputs: bool,
    },
    /// `GeluOptions`.
    Gelu { approximate: bool },
    /// Any other options table (including the field-less ones: PadOptions, TransposeOptions,
    /// DequantizeOptions, QuantizeOptions, HardSwishOptions, MaximumMinimumOptions, ...), kept as
    /// its union type id; its fields are not decoded and a writer emits an empty table.
    Other { type_id: u8 },
}

impl BuiltinOptions {
    /// The union type id this value is stored under (0 for `None`).
    pub fn type_id(&self) -> u8 {
        use union_id as u;
        match self {
            BuiltinOptions::None => 0,
            BuiltinOptions::Conv2D { .. } => u::CONV_2D,
            BuiltinOptions::DepthwiseConv2D { .. } => u::DEPTHWISE_CONV_2D,
            BuiltinOptions::Pool2D { .. } => u::POOL_2D,
            BuiltinOptions::Svdf { .. } => u::SVDF,
            BuiltinOptions::FullyConnected { .. } => u::FULLY_CONNECTED,
            BuiltinOptions::Softmax { .. } => u::SOFTMAX,
            BuiltinOptions::Concatenation { .. } => u::CONCATENATION,
            BuiltinOptions::Add { .. } => u::ADD,
            BuiltinOptions::Sub { .. } => u::SUB,
            BuiltinOptions::Mul { .. } => u::MUL,
            BuiltinOptions::Div { .. } => u::DIV,
            BuiltinOptions::Reshape { .. } => u::RESHAPE,
            BuiltinOptions::Squeeze { .. } => u::SQUEEZE,
            BuiltinOptions::Reducer { .. } => u::REDUCER,
            BuiltinOptions::StridedSlice { .. } => u::STRIDED_SLICE,
            BuiltinOptions::Cast { .. } => u::CAST,
            BuiltinOptions::ResizeBilinear { .. } => u::RESIZE_BILINEAR,
            BuiltinOptions::UnidirectionalSequenceLstm { .. } => u::UNIDIRECTIONAL_SEQUENCE_LSTM,
            BuiltinOptions::DepthToSpace { .. } => u::DEPTH_TO_SPACE,
            BuiltinOptions::SpaceToDepth { .. } => u::SPACE_TO_DEPTH,
            BuiltinOptions::LeakyRelu { .. } => u::LEAKY_RELU,
            BuiltinOptions::Gather { .. } => u::GATHER,
            BuiltinOptions::Pack { .. } => u::PACK,
            BuiltinOptions::Split { .. } => u::SPLIT,
            BuiltinOptions::SplitV { .. } => u::SPLIT_V,
            BuiltinOptions::Unpack { .. } => u::UNPACK,
            BuiltinOptions::ResizeNearestNeighbor { .. } => u::RESIZE_NEAREST_NEIGHBOR,
            BuiltinOptions::TransposeConv { .. } => u::TRANSPOSE_CONV,
            BuiltinOptions::Shape { .. } => u::SHAPE,
            BuiltinOptions::BatchMatMul { .. } => u::BATCH_MATMUL,
            BuiltinOptions::Gelu { .. } => u::GELU,
            BuiltinOptions::Other { type_id } => *type_id,
        }
    }

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
