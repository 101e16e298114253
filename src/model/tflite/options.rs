//! Verifying, decoding and encoding builtin options tables, all three generated from the one
//! declaration in [`builtin_options_table`](crate::model::options): a field's number, type and
//! default are stated once, so the verifier, the reader and the writer cannot disagree on them.
//!
//! How a field of each Rust type is stored is [`OptionField`]: 1-byte scalars (`i8`, `bool`,
//! [`Padding`], [`Activation`]), `int`, `float`, and `[int]` (always present for `Vec<i32>`,
//! possibly absent for `Option<Vec<i32>>`). A scalar equal to its default is not written, as
//! `flatc` does; the reader returns the default for an absent field.

use flatbuffers::{
    FlatBufferBuilder, ForwardsUOffset, InvalidFlatbuffer, TableVerifier, UnionWIPOffset, VOffsetT,
    Vector, Verifier, WIPOffset,
};
use rust_alloc::string::String;
use rust_alloc::vec::Vec;

use super::dtype::{dtype_from_schema, dtype_to_schema, unknown_dtype};
use super::table::{slot, T};
use super::try_collect;
use crate::model::options::{builtin_options_table, union_id, Activation, BuiltinOptions, Padding};
use crate::model::ModelError;
use crate::tensor::DType;

/// Storage of one options field type: its verification, its reading, its writing.
pub(crate) trait OptionField: Sized {
    /// The schema default when the declaration states none.
    const SCHEMA_DEFAULT: Self;
    /// What must be built before the table is started (vectors); `()` for scalars.
    type Staged<'b>;

    /// Checks the field at `slot` with its stored type.
    fn verify<'v, 'o, 'b>(
        tv: TableVerifier<'v, 'o, 'b>,
        slot: VOffsetT,
    ) -> Result<TableVerifier<'v, 'o, 'b>, InvalidFlatbuffer>;
    /// Reads the field at `slot` of a verified table (`default` when absent); a vector is
    /// allocated fallibly.
    fn read(t: &T<'_>, slot: VOffsetT, default: Self) -> Result<Self, ModelError>;
    /// Builds what [`push`](Self::push) needs outside the table.
    fn stage<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> Self::Staged<'b>;
    /// Writes the field into the table being built (nothing when it equals `default`).
    fn push<'b>(
        &self,
        staged: Self::Staged<'b>,
        fbb: &mut FlatBufferBuilder<'b>,
        slot: VOffsetT,
        default: &Self,
    );
}

/// A scalar stored as `$raw`, converted with `$to_raw` / `$from_raw` (which returns a
/// `Result`: a stored value may have no meaning).
macro_rules! scalar_field {
    ($ty:ty, $raw:ty, $zero:expr, |$v:ident| $to_raw:expr, |$r:ident| $from_raw:expr) => {
        impl OptionField for $ty {
            const SCHEMA_DEFAULT: Self = $zero;
            type Staged<'b> = ();

            fn verify<'v, 'o, 'b>(
                tv: TableVerifier<'v, 'o, 'b>,
                slot: VOffsetT,
            ) -> Result<TableVerifier<'v, 'o, 'b>, InvalidFlatbuffer> {
                tv.visit_field::<$raw>("options field", slot, false)
            }
            fn read(t: &T<'_>, slot: VOffsetT, default: Self) -> Result<Self, ModelError> {
                let to_raw = |$v: Self| -> $raw { $to_raw };
                let $r = t.scalar::<$raw>(slot, to_raw(default));
                $from_raw
            }
            fn stage<'b>(&self, _fbb: &mut FlatBufferBuilder<'b>) {}
            fn push<'b>(
                &self,
                _staged: (),
                fbb: &mut FlatBufferBuilder<'b>,
                slot: VOffsetT,
                default: &Self,
            ) {
                let to_raw = |$v: Self| -> $raw { $to_raw };
                fbb.push_slot::<$raw>(slot, to_raw(*self), to_raw(*default));
            }
        }
    };
}

scalar_field!(i8, i8, 0, |v| v, |r| Ok(r));
scalar_field!(i32, i32, 0, |v| v, |r| Ok(r));
scalar_field!(f32, f32, 0.0, |v| v, |r| Ok(r));
scalar_field!(bool, u8, false, |v| u8::from(v), |r| Ok(r != 0));
scalar_field!(Padding, i8, Padding::Same, |v| v.raw(), |r| {
    Ok(Padding::from_raw(r))
});
scalar_field!(Activation, i8, Activation::None, |v| v.raw(), |r| {
    Ok(Activation::from_raw(r))
});
// A `TensorType` field (CAST, SHAPE): a number the schema does not define is refused, as
// LiteRT's `ConvertTensorType` refuses it.
scalar_field!(DType, i8, DType::F32, |v| dtype_to_schema(v), |r| {
    dtype_from_schema(r).ok_or_else(|| ModelError::invalid("operator options", unknown_dtype(r)))
});

/// `[int]`, always written (an empty vector reads back empty).
impl OptionField for Vec<i32> {
    const SCHEMA_DEFAULT: Self = Vec::new();
    type Staged<'b> = WIPOffset<Vector<'b, i32>>;

    fn verify<'v, 'o, 'b>(
        tv: TableVerifier<'v, 'o, 'b>,
        slot: VOffsetT,
    ) -> Result<TableVerifier<'v, 'o, 'b>, InvalidFlatbuffer> {
        tv.visit_field::<ForwardsUOffset<Vector<'_, i32>>>("options field", slot, false)
    }
    fn read(t: &T<'_>, slot: VOffsetT, default: Self) -> Result<Self, ModelError> {
        match t.vector::<i32>(slot) {
            Some(v) => try_collect(v.iter(), "an [int] field of builtin options"),
            None => Ok(default),
        }
    }
    fn stage<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> Self::Staged<'b> {
        fbb.create_vector(self)
    }
    fn push<'b>(
        &self,
        staged: Self::Staged<'b>,
        fbb: &mut FlatBufferBuilder<'b>,
        slot: VOffsetT,
        _default: &Self,
    ) {
        fbb.push_slot_always(slot, staged);
    }
}

/// `string`, written unless empty (an absent string reads back empty, as `flatc`'s readers
/// give it).
impl OptionField for String {
    const SCHEMA_DEFAULT: Self = String::new();
    type Staged<'b> = Option<WIPOffset<&'b str>>;

    fn verify<'v, 'o, 'b>(
        tv: TableVerifier<'v, 'o, 'b>,
        slot: VOffsetT,
    ) -> Result<TableVerifier<'v, 'o, 'b>, InvalidFlatbuffer> {
        tv.visit_field::<ForwardsUOffset<&str>>("options field", slot, false)
    }
    fn read(t: &T<'_>, slot: VOffsetT, default: Self) -> Result<Self, ModelError> {
        match t.string(slot) {
            Some(v) => {
                let mut out = String::new();
                out.try_reserve_exact(v.len()).map_err(|_| {
                    ModelError::invalid("operator options", "out of memory for a string field")
                })?;
                out.push_str(v);
                Ok(out)
            }
            None => Ok(default),
        }
    }
    fn stage<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> Self::Staged<'b> {
        (!self.is_empty()).then(|| fbb.create_string(self))
    }
    fn push<'b>(
        &self,
        staged: Self::Staged<'b>,
        fbb: &mut FlatBufferBuilder<'b>,
        slot: VOffsetT,
        _default: &Self,
    ) {
        if let Some(v) = staged {
            fbb.push_slot_always(slot, v);
        }
    }
}

/// `[int]` whose absence is meaningful (`None`), distinct from an empty vector.
impl OptionField for Option<Vec<i32>> {
    const SCHEMA_DEFAULT: Self = None;
    type Staged<'b> = Option<WIPOffset<Vector<'b, i32>>>;

    fn verify<'v, 'o, 'b>(
        tv: TableVerifier<'v, 'o, 'b>,
        slot: VOffsetT,
    ) -> Result<TableVerifier<'v, 'o, 'b>, InvalidFlatbuffer> {
        <Vec<i32>>::verify(tv, slot)
    }
    fn read(t: &T<'_>, slot: VOffsetT, default: Self) -> Result<Self, ModelError> {
        match t.vector::<i32>(slot) {
            Some(v) => try_collect(v.iter(), "an [int] field of builtin options").map(Some),
            None => Ok(default),
        }
    }
    fn stage<'b>(&self, fbb: &mut FlatBufferBuilder<'b>) -> Self::Staged<'b> {
        self.as_ref().map(|v| fbb.create_vector(v))
    }
    fn push<'b>(
        &self,
        staged: Self::Staged<'b>,
        fbb: &mut FlatBufferBuilder<'b>,
        slot: VOffsetT,
        _default: &Self,
    ) {
        if let Some(v) = staged {
            fbb.push_slot_always(slot, v);
        }
    }
}

/// The declared default of a field: the stated one, else the type's schema default.
macro_rules! field_default {
    ($ty:ty) => {
        <$ty as OptionField>::SCHEMA_DEFAULT
    };
    ($ty:ty, $default:expr) => {
        $default
    };
}

/// Generates [`verify_options`], [`decode_options`] and [`write_options`] from the table (and,
/// for the tests, a sample of every declared table).
macro_rules! define_codec {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $uid:ident {
            $($id:literal $field:ident : $ty:ty $(= $default:expr)?),* $(,)?
        }
    )*) => {
        /// Verifies the fields of an options table of union type `type_id` at `table_pos`;
        /// tables of other types are verified as tables and not decoded.
        pub(crate) fn verify_options(
            type_id: u8,
            v: &mut Verifier,
            table_pos: usize,
        ) -> Result<(), InvalidFlatbuffer> {
            let tv = v.visit_table(table_pos)?;
            let tv = match type_id {
                $(union_id::$uid => {
                    $(let tv = <$ty as OptionField>::verify(tv, slot($id))?;)*
                    tv
                })*
                _ => tv,
            };
            tv.finish();
            Ok(())
        }

        /// Decodes a verified options table of union type `type_id` (vectors allocated
        /// fallibly).
        pub(crate) fn decode_options(
            type_id: u8,
            t: T<'_>,
        ) -> Result<BuiltinOptions, ModelError> {
            Ok(match type_id {
                $(union_id::$uid => BuiltinOptions::$variant {
                    $($field: <$ty as OptionField>::read(
                        &t,
                        slot($id),
                        field_default!($ty $(, $default)?),
                    )?,)*
                },)*
                other => BuiltinOptions::Other { type_id: other },
            })
        }

        /// Writes `o` as an options table: its union type id and the table (`None` for type
        /// id 0, i.e. [`BuiltinOptions::None`]; [`BuiltinOptions::Other`] is an empty table of
        /// its type).
        pub(crate) fn write_options<'b>(
            fbb: &mut FlatBufferBuilder<'b>,
            o: &BuiltinOptions,
        ) -> Option<(u8, WIPOffset<UnionWIPOffset>)> {
            let type_id = o.type_id();
            if type_id == 0 {
                return None;
            }
            let table = match o {
                BuiltinOptions::None | BuiltinOptions::Other { .. } => {
                    let t = fbb.start_table();
                    fbb.end_table(t)
                }
                $(BuiltinOptions::$variant { $($field),* } => {
                    // Vectors are built before the table is started.
                    $(let $field = ($field, OptionField::stage($field, fbb));)*
                    let t = fbb.start_table();
                    $(OptionField::push(
                        $field.0,
                        $field.1,
                        fbb,
                        slot($id),
                        &field_default!($ty $(, $default)?),
                    );)*
                    fbb.end_table(t)
                })*
            };
            Some((type_id, table.as_union_value()))
        }

        /// Every declared options table, once with defaults and once with every field set to a
        /// distinct non-default value.
        #[cfg(test)]
        fn samples() -> Vec<(BuiltinOptions, BuiltinOptions)> {
            use tests::NonDefault;
            vec![$((
                BuiltinOptions::$variant { $($field: field_default!($ty $(, $default)?),)* },
                BuiltinOptions::$variant {
                    $($field: <$ty as NonDefault>::other_than(
                        &field_default!($ty $(, $default)?),
                        $id,
                    ),)*
                },
            ),)*]
        }
    };
}

builtin_options_table!(define_codec);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::builder::ModelBuilder;
    use crate::model::tflite::{read_model, write_model};
    use crate::model::BuiltinOp;

    /// A value other than the default, different for each field number `id`.
    pub(super) trait NonDefault: Sized {
        fn other_than(default: &Self, id: i32) -> Self;
    }
    impl NonDefault for i8 {
        fn other_than(d: &Self, id: i32) -> Self {
            d.wrapping_add(10 + id as i8)
        }
    }
    impl NonDefault for i32 {
        fn other_than(d: &Self, id: i32) -> Self {
            d + 100 + id
        }
    }
    impl NonDefault for f32 {
        fn other_than(d: &Self, id: i32) -> Self {
            d + 1.5 + id as f32
        }
    }
    impl NonDefault for bool {
        fn other_than(d: &Self, _id: i32) -> Self {
            !d
        }
    }
    impl NonDefault for DType {
        fn other_than(d: &Self, id: i32) -> Self {
            let all = DType::ALL;
            let at = all.iter().position(|x| x == d).unwrap_or(0);
            all[(at + 1 + id.unsigned_abs() as usize) % all.len()]
        }
    }
    impl NonDefault for Padding {
        fn other_than(d: &Self, _id: i32) -> Self {
            if *d == Padding::Valid {
                Padding::Same
            } else {
                Padding::Valid
            }
        }
    }
    impl NonDefault for Activation {
        fn other_than(d: &Self, id: i32) -> Self {
            Activation::from_raw(d.raw() + 1 + id as i8)
        }
    }
    impl NonDefault for Vec<i32> {
        fn other_than(_d: &Self, id: i32) -> Self {
            vec![id, -1, 7]
        }
    }
    impl NonDefault for String {
        fn other_than(_d: &Self, id: i32) -> Self {
            format!("name{id}")
        }
    }
    impl NonDefault for Option<Vec<i32>> {
        fn other_than(_d: &Self, id: i32) -> Self {
            Some(vec![id, 2, 3])
        }
    }

    fn round_trip(options: &[BuiltinOptions]) -> Vec<BuiltinOptions> {
        let mut b = ModelBuilder::new("options");
        let x = b.add_tensor("x", DType::F32, &[4]);
        b.inputs(&[x]).outputs(&[x]);
        for o in options {
            b.add_op(BuiltinOp::ADD, o.clone(), &[x], &[x]);
        }
        let bytes = write_model(&b.build()).unwrap();
        let back = read_model(bytes.into()).unwrap();
        back.subgraphs[0]
            .operators
            .iter()
            .map(|op| op.builtin_options.clone())
            .collect()
    }

    #[test]
    fn every_declared_option_round_trips_with_non_default_values() {
        let (defaults, others): (Vec<_>, Vec<_>) = samples().into_iter().unzip();
        for (d, o) in defaults.iter().zip(&others) {
            assert_ne!(d, o, "the sample must differ from the defaults");
            assert_eq!(d.type_id(), o.type_id());
        }
        assert_eq!(round_trip(&others), others);
        assert_eq!(round_trip(&defaults), defaults);
    }

    #[test]
    fn declared_defaults_are_not_written() {
        // A table of defaults is as small as an empty one of the same type (no field stored),
        // except the vectors, which are always written when present.
        let sizes = |o: &BuiltinOptions| {
            let mut fbb = FlatBufferBuilder::new();
            let (_, t) = write_options(&mut fbb, o).unwrap();
            fbb.finish_minimal(t);
            fbb.finished_data().len()
        };
        let empty = sizes(&BuiltinOptions::Other { type_id: 1 });
        for (d, _) in samples() {
            if !matches!(d, BuiltinOptions::Squeeze { .. }) {
                assert_eq!(sizes(&d), empty, "{d:?}");
            }
        }
    }
}
