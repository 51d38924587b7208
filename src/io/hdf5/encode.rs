//! The HDF5 structures the writer emits, encoded little-endian with 8-byte offsets and
//! lengths (HDF5 File Format Specification 3.0): the version-2 superblock, version-2
//! object headers ("OHDR", lookup3 checksum), and their messages: dataspace (version 2),
//! datatype (IEEE f64, signed i64, fixed-length UTF-8 string, the compound {r, i} of two
//! f64 that h5py reads as complex128), fill value (version 3), contiguous data layout
//! (version 3), link info, group info, hard links (version 1) and attributes (version 3).

use super::lookup3;

/// The undefined address (all bits set).
pub const UNDEFINED: u64 = u64::MAX;
/// Bytes of the version-2 superblock.
pub const SUPERBLOCK_LEN: usize = 48;

const SIGNATURE: [u8; 8] = [0x89, b'H', b'D', b'F', b'\r', b'\n', 0x1a, b'\n'];

/// An element type of a dataset or attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    F64,
    I64,
    /// Two f64 named "r" and "i" (h5py's complex128).
    C16,
    /// A fixed-length UTF-8 string of this many bytes, padded with NULs.
    Str(usize),
}

impl Element {
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Element::F64 | Element::I64 => 8,
            Element::C16 => 16,
            Element::Str(n) => n,
        }
    }
}

/// The datatype message's body for `e`.
pub fn datatype(e: Element) -> Vec<u8> {
    match e {
        Element::F64 => f64_type(),
        Element::I64 => {
            // Class 0 (fixed point), version 1; byte 0: little-endian, signed (bit 3).
            let mut v = vec![0x10, 0x08, 0, 0];
            v.extend_from_slice(&8u32.to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes()); // bit offset
            v.extend_from_slice(&64u16.to_le_bytes()); // bit precision
            v
        }
        Element::C16 => complex_type(),
        Element::Str(n) => {
            // Class 3 (string), version 1; padding 1 (null pad), character set 1 (UTF-8).
            let mut v = vec![0x13, 0x11, 0, 0];
            v.extend_from_slice(&(n as u32).to_le_bytes());
            v
        }
    }
}

/// IEEE 754 binary64, little-endian: class 1, version 1.
fn f64_type() -> Vec<u8> {
    // Byte 0: little-endian, no padding, mantissa normalised with the msb implied (2 << 4);
    // byte 1: the sign bit's position.
    let mut v = vec![0x11, 0x20, 63, 0];
    v.extend_from_slice(&8u32.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes()); // bit offset
    v.extend_from_slice(&64u16.to_le_bytes()); // bit precision
    v.extend_from_slice(&[52, 11, 0, 52]); // exponent at 52 (11 bits), mantissa at 0 (52)
    v.extend_from_slice(&1023u32.to_le_bytes()); // exponent bias
    v
}

/// The compound {r: f64 at 0, i: f64 at 8}: class 6, version 1, two members.
fn complex_type() -> Vec<u8> {
    let mut v = vec![0x16, 2, 0, 0];
    v.extend_from_slice(&16u32.to_le_bytes());
    for (name, offset) in [("r", 0u32), ("i", 8)] {
        // The name, NUL-terminated and padded to a multiple of 8.
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        n.resize(n.len().div_ceil(8) * 8, 0);
        v.extend_from_slice(&n);
        v.extend_from_slice(&offset.to_le_bytes());
        // Dimensionality 0, reserved (3), permutation (4), reserved (4), dimensions (16).
        v.extend_from_slice(&[0u8; 28]);
        v.extend_from_slice(&f64_type());
    }
    v
}

/// A dataspace message: scalar (`None`) or simple with `dims` (no maximum dims: fixed).
pub fn dataspace(dims: Option<&[usize]>) -> Vec<u8> {
    match dims {
        None => vec![2, 0, 0, 0],
        Some(d) => {
            let mut v = vec![2, d.len() as u8, 0, 1];
            for &n in d {
                v.extend_from_slice(&(n as u64).to_le_bytes());
            }
            v
        }
    }
}

/// A fill value message, version 3: storage allocated early, the fill value written only
/// if set, and none set.
pub fn fill_value() -> Vec<u8> {
    vec![3, 1 | (2 << 2)]
}

/// A contiguous data layout message, version 3.
pub fn contiguous(address: u64, len: u64) -> Vec<u8> {
    let mut v = vec![3, 1];
    v.extend_from_slice(&address.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v
}

/// A link info message: no creation order, links stored in the header (no fractal heap,
/// no name index).
pub fn link_info() -> Vec<u8> {
    let mut v = vec![0, 0];
    v.extend_from_slice(&UNDEFINED.to_le_bytes());
    v.extend_from_slice(&UNDEFINED.to_le_bytes());
    v
}

/// A group info message with the defaults.
pub fn group_info() -> Vec<u8> {
    vec![0, 0]
}

/// A hard link message (version 1) named `name` to the object header at `address`.
pub fn hard_link(name: &str, address: u64) -> Vec<u8> {
    // Flags: the name's length in one byte (bits 0-1 = 0), a hard link (no type field),
    // ASCII (no charset field): names are checked to be ASCII, at most 255 bytes.
    let mut v = vec![1, 0, name.len() as u8];
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(&address.to_le_bytes());
    v
}

/// An attribute message (version 3): `name` (UTF-8), the element type, the dataspace
/// (`None` scalar, else 1-D of `count`) and the encoded values.
pub fn attribute(name: &str, e: Element, count: Option<usize>, data: &[u8]) -> Vec<u8> {
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    let dt = datatype(e);
    let ds = dataspace(count.as_ref().map(std::slice::from_ref));
    let mut v = vec![3, 0];
    v.extend_from_slice(&(n.len() as u16).to_le_bytes());
    v.extend_from_slice(&(dt.len() as u16).to_le_bytes());
    v.extend_from_slice(&(ds.len() as u16).to_le_bytes());
    v.push(1); // the name is UTF-8
    v.extend_from_slice(&n);
    v.extend_from_slice(&dt);
    v.extend_from_slice(&ds);
    v.extend_from_slice(data);
    v
}

/// The message types the writer emits, with their type numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Dataspace = 0x01,
    LinkInfo = 0x02,
    Datatype = 0x03,
    FillValue = 0x05,
    Link = 0x06,
    Layout = 0x08,
    GroupInfo = 0x0a,
    Attribute = 0x0c,
}

/// One header message: its type and body.
pub struct Message {
    pub kind: Kind,
    pub body: Vec<u8>,
}

/// The largest body of one message (its size field has 2 bytes).
pub const MAX_MESSAGE: usize = u16::MAX as usize;

/// A version-2 object header holding `messages` in one chunk: "OHDR", version 2, flags
/// (the chunk size in 4 bytes), the chunk size, each message's type, size and flags (0)
/// and body, then the lookup3 checksum of all that precedes it. Bodies are at most
/// `MAX_MESSAGE` bytes (checked by the caller).
pub fn object_header(messages: &[Message]) -> Vec<u8> {
    let chunk: usize = messages.iter().map(|m| 4 + m.body.len()).sum();
    let mut v = b"OHDR".to_vec();
    v.push(2);
    v.push(0x02);
    v.extend_from_slice(&(chunk as u32).to_le_bytes());
    for m in messages {
        v.push(m.kind as u8);
        v.extend_from_slice(&(m.body.len() as u16).to_le_bytes());
        v.push(0);
        v.extend_from_slice(&m.body);
    }
    let sum = lookup3::checksum(&v);
    v.extend_from_slice(&sum.to_le_bytes());
    v
}

/// The version-2 superblock: 8-byte offsets and lengths, base address 0, no superblock
/// extension, the end-of-file address and the root group's object header address, then
/// the lookup3 checksum.
pub fn superblock(end_of_file: u64, root: u64) -> Vec<u8> {
    let mut v = SIGNATURE.to_vec();
    v.extend_from_slice(&[2, 8, 8, 0]);
    v.extend_from_slice(&0u64.to_le_bytes());
    v.extend_from_slice(&UNDEFINED.to_le_bytes());
    v.extend_from_slice(&end_of_file.to_le_bytes());
    v.extend_from_slice(&root.to_le_bytes());
    let sum = lookup3::checksum(&v);
    v.extend_from_slice(&sum.to_le_bytes());
    debug_assert_eq!(v.len(), SUPERBLOCK_LEN);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_sizes_of_the_spec() {
        // Sizes from the format specification's layouts: the superblock v2 is 48 bytes;
        // an IEEE float datatype message 8 + 12 bytes; a contiguous layout v3 1 + 1 + 8 + 8.
        assert_eq!(superblock(100, 48).len(), 48);
        assert_eq!(datatype(Element::F64).len(), 20);
        assert_eq!(datatype(Element::I64).len(), 12);
        assert_eq!(contiguous(0, 0).len(), 18);
        // The compound: 8 header bytes, each member 8 (name) + 4 + 28 + 20.
        assert_eq!(datatype(Element::C16).len(), 8 + 2 * (8 + 4 + 28 + 20));
        let sb = superblock(100, 48);
        assert_eq!(&sb[..8], b"\x89HDF\r\n\x1a\n");
        assert_eq!(u64::from_le_bytes(sb[28..36].try_into().unwrap()), 100);
        assert_eq!(u64::from_le_bytes(sb[36..44].try_into().unwrap()), 48);
        assert_eq!(
            u32::from_le_bytes(sb[44..48].try_into().unwrap()),
            lookup3::checksum(&sb[..44])
        );
    }
}
