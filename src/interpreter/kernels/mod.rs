//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of `interpreter::reference` in invoke (a dtype switch). Each file
//! returns its registration (`register_<op>(set)`, TFLM's `Register_ADD()`); [`BUILTINS`] and
//! [`CUSTOMS`] list them all once, and the resolver builds its table from them.
//!
//! Ops with a faster variant (ADD/SUB, CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL,
//! TRANSPOSE_CONV, MEAN, SOFTMAX, GELU, HARD_SWISH, PRELU) take the [`KernelSet`] at
//! registration: their kernel value carries it, prepare validates the node the same way in both
//! sets and records in the op data which arithmetic invoke runs (and requests the scratch that
//! arithmetic needs), so the two sets differ only in the call invoke makes.

use super::kernel::{KernelSet, Registration};
use super::signal;
use crate::model::BuiltinOp;

pub mod abs;
pub mod add;
mod add_common;
pub mod assign_variable;
pub mod average_pool;
pub mod batch_matmul;
pub(crate) mod binary_common;
pub mod call_once;
pub mod cast;
mod comparison_common;
pub mod concatenation;
mod control_flow_common;
pub mod conv;
mod conv_few_pixels;
pub mod densify;
pub mod depth_to_space;
pub mod depthwise_conv;
pub mod dequantize;
pub mod div;
pub mod dynamic_update_slice;
pub mod exp;
pub mod fully_connected;
pub mod fully_connected_sparse;
pub mod gather;
pub mod gelu;
pub mod greater;
pub mod hard_swish;
mod hybrid;
pub mod if_then_else;
pub mod layer_norm;
pub mod leaky_relu;
pub mod less;
pub mod logical_and;
pub mod logistic;
pub mod max_pool;
pub mod maximum_minimum;
pub mod mean;
mod movement_common;
pub mod mul;
pub mod neg;
pub mod pack;
pub mod pad;
mod pool_common;
pub mod prelu;
mod quant_params;
pub mod quantize;
pub mod read_variable;
pub mod reduce_max;
pub mod reduce_prod;
pub mod relu;
pub mod reshape;
pub mod resize_bilinear;
pub mod resize_nearest_neighbor;
mod resource_common;
pub mod rsqrt;
pub mod shape;
pub mod slice;
pub mod softmax;
pub mod split;
pub mod sqrt;
pub mod squared_difference;
pub mod strided_slice;
pub mod sub;
pub mod sum;
pub mod svdf;
pub mod swish;
pub mod transpose;
pub mod transpose_conv;
pub mod transpose_conv_bias;
mod unary_common;
pub mod unidirectional_sequence_lstm;
pub mod unpack;
pub mod var_handle;
pub mod while_loop;

/// A builtin op's registration function: its kernel in a kernel set (TFLM's `Register_ADD()`).
pub type RegisterBuiltin = fn(KernelSet) -> Registration;

/// A custom op's registration function.
pub type RegisterCustom = fn() -> Registration;

/// Every builtin op the crate runs, with the function that makes its registration, in op-name
/// order: the one list [`OpResolver::with_kernel_set`](super::OpResolver::with_kernel_set)
/// builds its table from.
pub const BUILTINS: &[(BuiltinOp, RegisterBuiltin)] = &[
    (BuiltinOp::ABS, abs::register_abs),
    (BuiltinOp::ADD, add::register_add),
    (
        BuiltinOp::ASSIGN_VARIABLE,
        assign_variable::register_assign_variable,
    ),
    (
        BuiltinOp::AVERAGE_POOL_2D,
        average_pool::register_average_pool_2d,
    ),
    (BuiltinOp::BATCH_MATMUL, batch_matmul::register_batch_matmul),
    (BuiltinOp::CALL_ONCE, call_once::register_call_once),
    (BuiltinOp::CAST, cast::register_cast),
    (
        BuiltinOp::CONCATENATION,
        concatenation::register_concatenation,
    ),
    (BuiltinOp::CONV_2D, conv::register_conv_2d),
    (BuiltinOp::DENSIFY, densify::register_densify),
    (
        BuiltinOp::DEPTHWISE_CONV_2D,
        depthwise_conv::register_depthwise_conv_2d,
    ),
    (
        BuiltinOp::DEPTH_TO_SPACE,
        depth_to_space::register_depth_to_space,
    ),
    (BuiltinOp::DEQUANTIZE, dequantize::register_dequantize),
    (BuiltinOp::DIV, div::register_div),
    (
        BuiltinOp::DYNAMIC_UPDATE_SLICE,
        dynamic_update_slice::register_dynamic_update_slice,
    ),
    (BuiltinOp::EXP, exp::register_exp),
    (BuiltinOp::EXPAND_DIMS, reshape::register_expand_dims),
    (
        BuiltinOp::FULLY_CONNECTED,
        fully_connected_sparse::register_fully_connected,
    ),
    (BuiltinOp::GATHER, gather::register_gather),
    (BuiltinOp::GELU, gelu::register_gelu),
    (BuiltinOp::GREATER, greater::register_greater),
    (BuiltinOp::HARD_SWISH, hard_swish::register_hard_swish),
    (BuiltinOp::IF, if_then_else::register_if),
    (BuiltinOp::LEAKY_RELU, leaky_relu::register_leaky_relu),
    (BuiltinOp::LESS, less::register_less),
    (BuiltinOp::LOGICAL_AND, logical_and::register_logical_and),
    (BuiltinOp::LOGISTIC, logistic::register_logistic),
    (BuiltinOp::MAXIMUM, maximum_minimum::register_maximum),
    (BuiltinOp::MAX_POOL_2D, max_pool::register_max_pool_2d),
    (BuiltinOp::MEAN, mean::register_mean),
    (BuiltinOp::MINIMUM, maximum_minimum::register_minimum),
    (BuiltinOp::MUL, mul::register_mul),
    (BuiltinOp::NEG, neg::register_neg),
    (BuiltinOp::PACK, pack::register_pack),
    (BuiltinOp::PAD, pad::register_pad),
    (BuiltinOp::PADV2, pad::register_padv2),
    (BuiltinOp::PRELU, prelu::register_prelu),
    (BuiltinOp::QUANTIZE, quantize::register_quantize),
    (
        BuiltinOp::READ_VARIABLE,
        read_variable::register_read_variable,
    ),
    (BuiltinOp::REDUCE_MAX, reduce_max::register_reduce_max),
    (BuiltinOp::REDUCE_PROD, reduce_prod::register_reduce_prod),
    (BuiltinOp::RELU, relu::register_relu),
    (BuiltinOp::RELU6, relu::register_relu6),
    (BuiltinOp::RELU_N1_TO_1, relu::register_relu_n1_to_1),
    (BuiltinOp::RESHAPE, reshape::register_reshape),
    (
        BuiltinOp::RESIZE_BILINEAR,
        resize_bilinear::register_resize_bilinear,
    ),
    (
        BuiltinOp::RESIZE_NEAREST_NEIGHBOR,
        resize_nearest_neighbor::register_resize_nearest_neighbor,
    ),
    (BuiltinOp::RSQRT, rsqrt::register_rsqrt),
    (BuiltinOp::SHAPE, shape::register_shape),
    (BuiltinOp::SLICE, slice::register_slice),
    (BuiltinOp::SOFTMAX, softmax::register_softmax),
    (
        BuiltinOp::SPACE_TO_DEPTH,
        depth_to_space::register_space_to_depth,
    ),
    (BuiltinOp::SPLIT, split::register_split),
    (BuiltinOp::SPLIT_V, split::register_split_v),
    (BuiltinOp::SQRT, sqrt::register_sqrt),
    (
        BuiltinOp::SQUARED_DIFFERENCE,
        squared_difference::register_squared_difference,
    ),
    (BuiltinOp::SQUEEZE, reshape::register_squeeze),
    (
        BuiltinOp::STRIDED_SLICE,
        strided_slice::register_strided_slice,
    ),
    (BuiltinOp::SUB, sub::register_sub),
    (BuiltinOp::SUM, sum::register_sum),
    (BuiltinOp::SVDF, svdf::register_svdf),
    (BuiltinOp::TANH, logistic::register_tanh),
    (BuiltinOp::TRANSPOSE, transpose::register_transpose),
    (
        BuiltinOp::TRANSPOSE_CONV,
        transpose_conv::register_transpose_conv,
    ),
    (
        BuiltinOp::UNIDIRECTIONAL_SEQUENCE_LSTM,
        unidirectional_sequence_lstm::register_unidirectional_sequence_lstm,
    ),
    (BuiltinOp::UNPACK, unpack::register_unpack),
    (BuiltinOp::VAR_HANDLE, var_handle::register_var_handle),
    (BuiltinOp::WHILE, while_loop::register_while),
];

/// Every custom op the crate runs (MediaPipe's transposed convolution and TFLM's Signal
/// library), by custom name.
pub const CUSTOMS: &[(&str, RegisterCustom)] = &[
    (
        transpose_conv_bias::NAME,
        transpose_conv_bias::register_convolution_2d_transpose_bias,
    ),
    ("SignalEnergy", signal::energy::register_energy),
    (
        "SignalFftAutoScale",
        signal::fft_auto_scale::register_fft_auto_scale,
    ),
    (
        "SignalFilterBank",
        signal::filter_bank::register_filter_bank,
    ),
    (
        "SignalFilterBankLog",
        signal::filter_bank_log::register_filter_bank_log,
    ),
    (
        "SignalFilterBankSpectralSubtraction",
        signal::filter_bank_spectral_subtraction::register_filter_bank_spectral_subtraction,
    ),
    (
        "SignalFilterBankSquareRoot",
        signal::filter_bank_square_root::register_filter_bank_square_root,
    ),
    ("SignalPCAN", signal::pcan::register_pcan),
    ("SignalRfft", signal::rfft::register_rfft),
    ("SignalWindow", signal::window::register_window),
];
