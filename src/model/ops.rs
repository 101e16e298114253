//! Builtin operator codes of the TFLite schema (`BuiltinOperator`) and their names.

use core::fmt;

/// Names of the builtin operators, indexed by their schema code (`BuiltinOperator` enum of
/// `schema.fbs`). Codes past the end of this table are kept as [`BuiltinOp`] values and reported
/// as unknown.
const NAMES: &[&str] = &[
    "ADD",
    "AVERAGE_POOL_2D",
    "CONCATENATION",
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "DEPTH_TO_SPACE",
    "DEQUANTIZE",
    "EMBEDDING_LOOKUP",
    "FLOOR",
    "FULLY_CONNECTED",
    "HASHTABLE_LOOKUP",
    "L2_NORMALIZATION",
    "L2_POOL_2D",
    "LOCAL_RESPONSE_NORMALIZATION",
    "LOGISTIC",
    "LSH_PROJECTION",
    "LSTM",
    "MAX_POOL_2D",
    "MUL",
    "RELU",
    "RELU_N1_TO_1",
    "RELU6",
    "RESHAPE",
    "RESIZE_BILINEAR",
    "RNN",
    "SOFTMAX",
    "SPACE_TO_DEPTH",
    "SVDF",
    "TANH",
    "CONCAT_EMBEDDINGS",
    "SKIP_GRAM",
    "CALL",
    "CUSTOM",
    "EMBEDDING_LOOKUP_SPARSE",
    "PAD",
    "UNIDIRECTIONAL_SEQUENCE_RNN",
    "GATHER",
    "BATCH_TO_SPACE_ND",
    "SPACE_TO_BATCH_ND",
    "TRANSPOSE",
    "MEAN",
    "SUB",
    "DIV",
    "SQUEEZE",
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "STRIDED_SLICE",
    "BIDIRECTIONAL_SEQUENCE_RNN",
    "EXP",
    "TOPK_V2",
    "SPLIT",
    "LOG_SOFTMAX",
    "DELEGATE",
    "BIDIRECTIONAL_SEQUENCE_LSTM",
    "CAST",
    "PRELU",
    "MAXIMUM",
    "ARG_MAX",
    "MINIMUM",
    "LESS",
    "NEG",
    "PADV2",
    "GREATER",
    "GREATER_EQUAL",
    "LESS_EQUAL",
    "SELECT",
    "SLICE",
    "SIN",
    "TRANSPOSE_CONV",
    "SPARSE_TO_DENSE",
    "TILE",
    "EXPAND_DIMS",
    "EQUAL",
    "NOT_EQUAL",
    "LOG",
    "SUM",
    "SQRT",
    "RSQRT",
    "SHAPE",
    "POW",
    "ARG_MIN",
    "FAKE_QUANT",
    "REDUCE_PROD",
    "REDUCE_MAX",
    "PACK",
    "LOGICAL_OR",
    "ONE_HOT",
    "LOGICAL_AND",
    "LOGICAL_NOT",
    "UNPACK",
    "REDUCE_MIN",
    "FLOOR_DIV",
    "REDUCE_ANY",
    "SQUARE",
    "ZEROS_LIKE",
    "FILL",
    "FLOOR_MOD",
    "RANGE",
    "RESIZE_NEAREST_NEIGHBOR",
    "LEAKY_RELU",
    "SQUARED_DIFFERENCE",
    "MIRROR_PAD",
    "ABS",
    "SPLIT_V",
    "UNIQUE",
    "CEIL",
    "REVERSE_V2",
    "ADD_N",
    "GATHER_ND",
    "COS",
    "WHERE",
    "RANK",
    "ELU",
    "REVERSE_SEQUENCE",
    "MATRIX_DIAG",
    "QUANTIZE",
    "MATRIX_SET_DIAG",
    "ROUND",
    "HARD_SWISH",
    "IF",
    "WHILE",
    "NON_MAX_SUPPRESSION_V4",
    "NON_MAX_SUPPRESSION_V5",
    "SCATTER_ND",
    "SELECT_V2",
    "DENSIFY",
    "SEGMENT_SUM",
    "BATCH_MATMUL",
    "PLACEHOLDER_FOR_GREATER_OP_CODES",
    "CUMSUM",
    "CALL_ONCE",
    "BROADCAST_TO",
    "RFFT2D",
    "CONV_3D",
    "IMAG",
    "REAL",
    "COMPLEX_ABS",
    "HASHTABLE",
    "HASHTABLE_FIND",
    "HASHTABLE_IMPORT",
    "HASHTABLE_SIZE",
    "REDUCE_ALL",
    "CONV_3D_TRANSPOSE",
    "VAR_HANDLE",
    "READ_VARIABLE",
    "ASSIGN_VARIABLE",
    "BROADCAST_ARGS",
    "RANDOM_STANDARD_NORMAL",
    "BUCKETIZE",
    "RANDOM_UNIFORM",
    "MULTINOMIAL",
    "GELU",
    "DYNAMIC_UPDATE_SLICE",
    "RELU_0_TO_1",
    "UNSORTED_SEGMENT_PROD",
    "UNSORTED_SEGMENT_MAX",
    "UNSORTED_SEGMENT_SUM",
    "ATAN2",
    "UNSORTED_SEGMENT_MIN",
    "SIGN",
    "BITCAST",
    "BITWISE_XOR",
    "RIGHT_SHIFT",
    "STABLEHLO_LOGISTIC",
    "STABLEHLO_ADD",
    "STABLEHLO_DIVIDE",
    "STABLEHLO_MULTIPLY",
    "STABLEHLO_MAXIMUM",
    "STABLEHLO_RESHAPE",
    "STABLEHLO_CLAMP",
    "STABLEHLO_CONCATENATE",
    "STABLEHLO_BROADCAST_IN_DIM",
    "STABLEHLO_CONVOLUTION",
    "STABLEHLO_SLICE",
    "STABLEHLO_CUSTOM_CALL",
    "STABLEHLO_REDUCE",
    "STABLEHLO_ABS",
    "STABLEHLO_AND",
    "STABLEHLO_COSINE",
    "STABLEHLO_EXPONENTIAL",
    "STABLEHLO_FLOOR",
    "STABLEHLO_LOG",
    "STABLEHLO_MINIMUM",
    "STABLEHLO_NEGATE",
    "STABLEHLO_OR",
    "STABLEHLO_POWER",
    "STABLEHLO_REMAINDER",
    "STABLEHLO_RSQRT",
    "STABLEHLO_SELECT",
    "STABLEHLO_SUBTRACT",
    "STABLEHLO_TANH",
    "STABLEHLO_SCATTER",
    "STABLEHLO_COMPARE",
    "STABLEHLO_CONVERT",
    "STABLEHLO_DYNAMIC_SLICE",
    "STABLEHLO_DYNAMIC_UPDATE_SLICE",
    "STABLEHLO_PAD",
    "STABLEHLO_IOTA",
    "STABLEHLO_DOT_GENERAL",
    "STABLEHLO_REDUCE_WINDOW",
    "STABLEHLO_SORT",
    "STABLEHLO_WHILE",
    "STABLEHLO_GATHER",
    "STABLEHLO_TRANSPOSE",
    "DILATE",
    "STABLEHLO_RNG_BIT_GENERATOR",
    "REDUCE_WINDOW",
    "STABLEHLO_COMPOSITE",
    "COMPLEX",
];

/// A builtin operator code (`BuiltinOperator` of the TFLite schema). Any `i32` is representable so
/// that models using codes newer than this crate load; [`BuiltinOp::is_known`] tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BuiltinOp(pub i32);

macro_rules! builtin_consts {
    ($($name:ident = $code:expr),* $(,)?) => {
        impl BuiltinOp {
            $(
                #[doc = concat!("`", stringify!($name), "` (schema code ", stringify!($code), ").")]
                pub const $name: BuiltinOp = BuiltinOp($code);
            )*
        }
    };
}

builtin_consts! {
    ADD = 0, AVERAGE_POOL_2D = 1, CONCATENATION = 2, CONV_2D = 3, DEPTHWISE_CONV_2D = 4,
    DEPTH_TO_SPACE = 5, DEQUANTIZE = 6, FLOOR = 8, FULLY_CONNECTED = 9, L2_NORMALIZATION = 11,
    LOGISTIC = 14, LSTM = 16, MAX_POOL_2D = 17, MUL = 18, RELU = 19, RELU_N1_TO_1 = 20, RELU6 = 21,
    RESHAPE = 22, RESIZE_BILINEAR = 23, SOFTMAX = 25, SPACE_TO_DEPTH = 26, SVDF = 27, TANH = 28,
    CALL = 31, CUSTOM = 32, PAD = 34, GATHER = 36, TRANSPOSE = 39, MEAN = 40, SUB = 41, DIV = 42,
    SQUEEZE = 43, UNIDIRECTIONAL_SEQUENCE_LSTM = 44, STRIDED_SLICE = 45, EXP = 47, SPLIT = 49,
    LOG_SOFTMAX = 50, CAST = 53, PRELU = 54, MAXIMUM = 55, MINIMUM = 57, LESS = 58, NEG = 59,
    PADV2 = 60, GREATER = 61, LOGICAL_AND = 86,
    SLICE = 65, TRANSPOSE_CONV = 67, EXPAND_DIMS = 70, LOG = 73, SUM = 74, SQRT = 75, RSQRT = 76,
    SHAPE = 77, POW = 78, REDUCE_PROD = 81, REDUCE_MAX = 82, PACK = 83, UNPACK = 88, SQUARE = 92, ZEROS_LIKE = 93, FILL = 94,
    RESIZE_NEAREST_NEIGHBOR = 97, LEAKY_RELU = 98, SQUARED_DIFFERENCE = 99, ABS = 101, SPLIT_V = 102, RANK = 110, ELU = 111,
    QUANTIZE = 114, ROUND = 116, HARD_SWISH = 117, IF = 118, WHILE = 119, DENSIFY = 124,
    BATCH_MATMUL = 126, PLACEHOLDER_FOR_GREATER_OP_CODES = 127, CALL_ONCE = 129, VAR_HANDLE = 142, READ_VARIABLE = 143,
    ASSIGN_VARIABLE = 144, GELU = 150,
    DYNAMIC_UPDATE_SLICE = 151, RELU_0_TO_1 = 152, SIGN = 158,
}

impl BuiltinOp {
    /// The schema name (`"CONV_2D"`), or `None` for a code this crate does not know.
    pub fn name(self) -> Option<&'static str> {
        usize::try_from(self.0)
            .ok()
            .and_then(|i| NAMES.get(i).copied())
    }

    /// Whether the code is part of the schema this crate was written against.
    pub fn is_known(self) -> bool {
        self.name().is_some()
    }

    /// Looks a builtin operator up by its schema name (exact, upper case).
    pub fn from_name(name: &str) -> Option<BuiltinOp> {
        NAMES
            .iter()
            .position(|n| *n == name)
            .and_then(|i| i32::try_from(i).ok())
            .map(BuiltinOp)
    }

    /// Operators whose output has the same bytes as input 0 reinterpreted with another shape:
    /// the output may share the input's memory when the input dies at this operator.
    pub fn is_reshape_like(self) -> bool {
        matches!(self, Self::RESHAPE | Self::SQUEEZE | Self::EXPAND_DIMS)
    }

    /// Element-wise operators: output element `i` only depends on input element(s) `i`, so the
    /// output may be written into an input of the same byte size and dtype that dies at this
    /// operator (TFLite's in-place sharing).
    pub fn is_elementwise(self) -> bool {
        matches!(
            self,
            Self::ADD
                | Self::SUB
                | Self::MUL
                | Self::DIV
                | Self::MINIMUM
                | Self::MAXIMUM
                | Self::SQUARED_DIFFERENCE
                | Self::RELU
                | Self::RELU6
                | Self::RELU_N1_TO_1
                | Self::RELU_0_TO_1
                | Self::LOGISTIC
                | Self::TANH
                | Self::HARD_SWISH
                | Self::LEAKY_RELU
                | Self::PRELU
                | Self::ELU
                | Self::GELU
                | Self::ABS
                | Self::NEG
                | Self::EXP
                | Self::LOG
                | Self::SQRT
                | Self::RSQRT
                | Self::SQUARE
                | Self::FLOOR
                | Self::ROUND
                | Self::SIGN
        )
    }
}

impl fmt::Display for BuiltinOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "UNKNOWN_BUILTIN_{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_codes() {
        assert_eq!(BuiltinOp::CONV_2D.name(), Some("CONV_2D"));
        assert_eq!(
            BuiltinOp::UNIDIRECTIONAL_SEQUENCE_LSTM.name(),
            Some("UNIDIRECTIONAL_SEQUENCE_LSTM")
        );
        assert_eq!(BuiltinOp::QUANTIZE.name(), Some("QUANTIZE"));
        assert_eq!(BuiltinOp::HARD_SWISH.name(), Some("HARD_SWISH"));
        assert_eq!(BuiltinOp::DENSIFY.name(), Some("DENSIFY"));
        assert_eq!(BuiltinOp::RANK.name(), Some("RANK"));
        assert_eq!(BuiltinOp::SIGN.name(), Some("SIGN"));
        assert_eq!(BuiltinOp(207).name(), Some("COMPLEX"));
        assert_eq!(BuiltinOp(208).name(), None);
        assert_eq!(BuiltinOp(-1).name(), None);
        assert_eq!(BuiltinOp::from_name("MEAN"), Some(BuiltinOp::MEAN));
        assert_eq!(BuiltinOp(9999).to_string(), "UNKNOWN_BUILTIN_9999");
    }
}
