//! The reader's view of a verified flatbuffer table ([`T`]) and the vtable slot of a schema
//! field ([`slot`]): what the schema's accessors ([`super::schema`]) and the builtin options
//! decoder ([`super::options`]) share.

use flatbuffers::{ForwardsUOffset, Table, VOffsetT, Vector};

/// Vtable slot of field number `id` (the schema's declaration order): 4 + 2 * id.
pub(crate) const fn slot(id: u16) -> VOffsetT {
    4 + 2 * id
}

/// A verified table. Constructed only by [`T::verified`] (from
/// [`verified_root`](super::schema::verified_root)) and by following fields of another verified
/// table, so every accessor below reads a field the verifier checked with the same slot and
/// type.
#[derive(Clone, Copy)]
pub(crate) struct T<'a>(Table<'a>);

impl<'a> T<'a> {
    /// The table `t`.
    ///
    /// # Safety
    /// `t` was verified by the schema's `Verifiable` impls (`schema::verified_root`), which
    /// check every field the accessors below read, with the same slot and type.
    pub(crate) unsafe fn verified(t: Table<'a>) -> Self {
        T(t)
    }

    /// A scalar field (or its schema default).
    pub(crate) fn scalar<X>(&self, slot: VOffsetT, default: X) -> X
    where
        X: flatbuffers::Follow<'a, Inner = X> + Copy + 'a,
    {
        // SAFETY: the tree was verified (`T::verified`'s contract) by `Verifiable` impls that
        // check this slot with scalar type `X` (the reader uses the same slot constants and types).
        unsafe { self.0.get::<X>(slot, Some(default)) }.unwrap_or(default)
    }

    /// A vector-of-scalars field.
    pub(crate) fn vector<X>(&self, slot: VOffsetT) -> Option<Vector<'a, X>>
    where
        X: flatbuffers::Follow<'a> + 'a,
    {
        // SAFETY: verified as `ForwardsUOffset<Vector<X>>` at this slot (see `scalar`).
        unsafe { self.0.get::<ForwardsUOffset<Vector<'a, X>>>(slot, None) }
    }

    /// A string field.
    pub(crate) fn string(&self, slot: VOffsetT) -> Option<&'a str> {
        // SAFETY: verified as `ForwardsUOffset<&str>` (bounds, UTF-8) at this slot.
        unsafe { self.0.get::<ForwardsUOffset<&'a str>>(slot, None) }
    }

    /// A sub-table field.
    pub(crate) fn table(&self, slot: VOffsetT) -> Option<T<'a>> {
        // SAFETY: verified as `ForwardsUOffset<SomeTable>` at this slot: the offset is in
        // bounds and points to a table with a valid vtable.
        unsafe { self.0.get::<ForwardsUOffset<Table<'a>>>(slot, None) }.map(T)
    }

    /// Whether a field is present in the vtable.
    pub(crate) fn has(&self, slot: VOffsetT) -> bool {
        self.0.vtable().get(slot) != 0
    }

    /// A vector-of-tables field.
    pub(crate) fn tables(
        &self,
        slot: VOffsetT,
    ) -> Option<impl ExactSizeIterator<Item = T<'a>> + 'a> {
        // SAFETY: verified as `ForwardsUOffset<Vector<ForwardsUOffset<SomeTable>>>`: every
        // element offset was followed and its table verified.
        let v = unsafe {
            self.0
                .get::<ForwardsUOffset<Vector<'a, ForwardsUOffset<Table<'a>>>>>(slot, None)
        };
        v.map(|v| v.iter().map(T))
    }
}
