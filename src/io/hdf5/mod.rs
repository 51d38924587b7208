//! A minimal HDF5 writer: datasets of f64, i64 or complex128 (h5py's compound {r, i} of
//! two little-endian f64) in the root group, with string and numeric attributes on the
//! file and on each dataset. The values are produced by closures and the data is encoded
//! and written block by block in parallel (`io::stage_blocks`), so a propagator of
//! several GB is never held twice in memory.
//!
//! The file: a version-2 superblock, the root group's version-2 object header (link info,
//! group info, one hard link per dataset, the file's attributes), one object header per
//! dataset (dataspace, datatype, fill value, contiguous layout, attributes), then each
//! dataset's data, contiguous, C order, at an address aligned to 16 bytes. This is the
//! layout libhdf5 1.10+ writes with `libver = "latest"` for contiguous datasets; h5py
//! reads it (tests/python/test_propagator_files.py).
//!
//! No crate fitted (docs/formats.md, "HDF5"): the pure-Rust writers take a dataset's
//! data as one in-memory buffer, and the bindings need libhdf5 or cmake.

mod encode;
mod lookup3;

use crate::error::{Error, Result};
use crate::field::C64;
use crate::io::staged::Staged;
use encode::{Element, Kind, Message};
use std::path::Path;

/// An attribute's value: a string, a number, or a 1-D array of numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Str(String),
    F64(f64),
    I64(i64),
    F64s(Vec<f64>),
    I64s(Vec<i64>),
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> AttrValue {
        AttrValue::Str(s.to_string())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> AttrValue {
        AttrValue::Str(s)
    }
}

impl From<f64> for AttrValue {
    fn from(v: f64) -> AttrValue {
        AttrValue::F64(v)
    }
}

impl From<i64> for AttrValue {
    fn from(v: i64) -> AttrValue {
        AttrValue::I64(v)
    }
}

impl From<Vec<f64>> for AttrValue {
    fn from(v: Vec<f64>) -> AttrValue {
        AttrValue::F64s(v)
    }
}

impl From<&[usize]> for AttrValue {
    fn from(v: &[usize]) -> AttrValue {
        AttrValue::I64s(v.iter().map(|&n| n as i64).collect())
    }
}

/// A named attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: String,
    pub value: AttrValue,
}

impl Attr {
    pub fn new(name: impl Into<String>, value: impl Into<AttrValue>) -> Attr {
        Attr {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// A dataset's values: element i in C order of its shape is `f(i)`.
#[derive(Clone, Copy)]
pub enum Data<'a> {
    C16(&'a (dyn Fn(usize) -> C64 + Sync)),
    F64(&'a (dyn Fn(usize) -> f64 + Sync)),
    I64(&'a (dyn Fn(usize) -> i64 + Sync)),
}

impl Data<'_> {
    fn element(&self) -> Element {
        match self {
            Data::C16(_) => Element::C16,
            Data::F64(_) => Element::F64,
            Data::I64(_) => Element::I64,
        }
    }

    /// Element `i`'s little-endian bytes into `out` (`element().size()` bytes).
    #[inline]
    fn encode(&self, i: usize, out: &mut [u8]) {
        match self {
            Data::C16(f) => {
                let z = f(i);
                out[..8].copy_from_slice(&z.re.to_le_bytes());
                out[8..16].copy_from_slice(&z.im.to_le_bytes());
            }
            Data::F64(f) => out[..8].copy_from_slice(&f(i).to_le_bytes()),
            Data::I64(f) => out[..8].copy_from_slice(&f(i).to_le_bytes()),
        }
    }
}

/// A dataset of the root group.
pub struct Dataset<'a> {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Data<'a>,
    pub attrs: Vec<Attr>,
}

/// What an HDF5 file holds: the root group's attributes and datasets.
#[derive(Default)]
pub struct H5File<'a> {
    pub attrs: Vec<Attr>,
    pub datasets: Vec<Dataset<'a>>,
}

/// The most dimensions of a dataset (HDF5's limit).
const MAX_RANK: usize = 32;
/// Data addresses are multiples of this.
const DATA_ALIGN: u64 = 16;

/// Writes `file` to `path`, atomically.
pub fn write_h5(path: &Path, file: &H5File) -> Result<()> {
    crate::io::staged::commit_one(stage_h5(path, file)?)
}

/// `write_h5` up to the rename: the file staged for `Staged::commit`.
pub fn stage_h5(path: &Path, file: &H5File) -> Result<Staged> {
    let layout = Layout::of(file)?;
    let head = metadata(file, &layout)?;
    debug_assert_eq!(head.len() as u64, layout.data_start);
    crate::io::stage_blocks(path, &head, layout.body_len, |at, block| {
        fill(file, &layout, at, block)
    })
}

/// Where each dataset's data lies: byte ranges of the body (the part after the
/// metadata), each starting at a multiple of `DATA_ALIGN`.
struct Layout {
    /// Per dataset: (offset in the body, bytes).
    ranges: Vec<(u64, u64)>,
    body_len: u64,
    /// Bytes of the metadata (superblock and object headers) padded to `DATA_ALIGN`:
    /// the file address of the body.
    data_start: u64,
    /// Per dataset: its object header's address.
    headers: Vec<u64>,
}

impl Layout {
    /// Checks names and shapes, sizes every object header and places the data.
    fn of(file: &H5File) -> Result<Layout> {
        check_names(file)?;
        let mut ranges = Vec::with_capacity(file.datasets.len());
        let mut body_len = 0u64;
        for ds in &file.datasets {
            let bytes = data_bytes(ds)?;
            ranges.push((body_len, bytes));
            body_len = (body_len + bytes).div_ceil(DATA_ALIGN) * DATA_ALIGN;
        }
        // Header sizes do not depend on the addresses they hold (all 8 bytes).
        let zeros = vec![0u64; file.datasets.len()];
        let root_len = root_header(file, &zeros)?.len() as u64;
        let mut at = encode::SUPERBLOCK_LEN as u64 + root_len;
        let mut headers = Vec::with_capacity(file.datasets.len());
        for ds in &file.datasets {
            headers.push(at);
            at += dataset_header(ds, 0)?.len() as u64;
        }
        Ok(Layout {
            ranges,
            body_len,
            data_start: at.div_ceil(DATA_ALIGN) * DATA_ALIGN,
            headers,
        })
    }

    /// The file address of dataset `k`'s data (undefined for an empty one).
    fn data_address(&self, k: usize) -> u64 {
        match self.ranges[k] {
            (_, 0) => encode::UNDEFINED,
            (offset, _) => self.data_start + offset,
        }
    }
}

/// A dataset's bytes, or an error naming it when its shape is unusable.
fn data_bytes(ds: &Dataset) -> Result<u64> {
    if ds.shape.len() > MAX_RANK {
        return Err(Error::invalid(
            "hdf5 dataset",
            format!(
                "\"{}\" has {} dimensions, more than HDF5's {MAX_RANK}",
                ds.name,
                ds.shape.len()
            ),
        ));
    }
    ds.shape
        .iter()
        .try_fold(ds.data.element().size() as u64, |n, &d| {
            n.checked_mul(d as u64)
        })
        .ok_or_else(|| {
            Error::invalid(
                "hdf5 dataset",
                format!("\"{}\": shape {:?} overflows 64 bits", ds.name, ds.shape),
            )
        })
}

/// Dataset names: non-empty ASCII without '/', at most 255 bytes, distinct; attribute
/// names: non-empty without NUL, distinct on their object.
fn check_names(file: &H5File) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for ds in &file.datasets {
        let n = &ds.name;
        if n.is_empty() || n.len() > 255 || !n.is_ascii() || n.contains('/') || n == "." {
            return Err(Error::invalid(
                "hdf5 dataset",
                format!(
                    "name \"{n}\": expected 1 to 255 ASCII characters without '/' (a dataset \
                     of the root group)"
                ),
            ));
        }
        if !seen.insert(n.as_str()) {
            return Err(Error::invalid(
                "hdf5 dataset",
                format!("name \"{n}\" is used twice"),
            ));
        }
    }
    let objects = std::iter::once(("the file", &file.attrs))
        .chain(file.datasets.iter().map(|d| (d.name.as_str(), &d.attrs)));
    for (what, attrs) in objects {
        let mut seen = std::collections::HashSet::new();
        for a in attrs {
            if a.name.is_empty() || a.name.contains('\0') || !seen.insert(a.name.as_str()) {
                return Err(Error::invalid(
                    "hdf5 attribute",
                    format!(
                        "\"{}\" of {what}: names must be non-empty, without NUL, and distinct",
                        a.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The attribute messages of one object.
fn attribute_messages(attrs: &[Attr], what: &str) -> Result<Vec<Message>> {
    attrs
        .iter()
        .map(|a| {
            let (e, count, data) = match &a.value {
                AttrValue::Str(s) => {
                    // A fixed-length string of at least one byte (HDF5 has no size 0).
                    let mut b = s.as_bytes().to_vec();
                    if b.is_empty() {
                        b.push(0);
                    }
                    (Element::Str(b.len()), None, b)
                }
                AttrValue::F64(v) => (Element::F64, None, v.to_le_bytes().to_vec()),
                AttrValue::I64(v) => (Element::I64, None, v.to_le_bytes().to_vec()),
                AttrValue::F64s(v) => (
                    Element::F64,
                    Some(v.len()),
                    v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                ),
                AttrValue::I64s(v) => (
                    Element::I64,
                    Some(v.len()),
                    v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                ),
            };
            let body = encode::attribute(&a.name, e, count, &data);
            if body.len() > encode::MAX_MESSAGE {
                return Err(Error::invalid(
                    "hdf5 attribute",
                    format!(
                        "\"{}\" of {what} takes {} bytes, more than the {} of a header message",
                        a.name,
                        body.len(),
                        encode::MAX_MESSAGE
                    ),
                ));
            }
            Ok(Message {
                kind: Kind::Attribute,
                body,
            })
        })
        .collect()
}

/// The root group's object header, its links pointing at `addresses`.
fn root_header(file: &H5File, addresses: &[u64]) -> Result<Vec<u8>> {
    let mut m = vec![
        Message {
            kind: Kind::LinkInfo,
            body: encode::link_info(),
        },
        Message {
            kind: Kind::GroupInfo,
            body: encode::group_info(),
        },
    ];
    for (ds, &a) in file.datasets.iter().zip(addresses) {
        m.push(Message {
            kind: Kind::Link,
            body: encode::hard_link(&ds.name, a),
        });
    }
    m.extend(attribute_messages(&file.attrs, "the file")?);
    Ok(encode::object_header(&m))
}

/// A dataset's object header, its data at `address`.
fn dataset_header(ds: &Dataset, address: u64) -> Result<Vec<u8>> {
    let e = ds.data.element();
    let mut m = vec![
        Message {
            kind: Kind::Dataspace,
            body: encode::dataspace(Some(&ds.shape)),
        },
        Message {
            kind: Kind::Datatype,
            body: encode::datatype(e),
        },
        Message {
            kind: Kind::FillValue,
            body: encode::fill_value(),
        },
        Message {
            kind: Kind::Layout,
            body: encode::contiguous(address, data_bytes(ds)?),
        },
    ];
    m.extend(attribute_messages(&ds.attrs, &ds.name)?);
    Ok(encode::object_header(&m))
}

/// Superblock and object headers, padded to the body's address.
fn metadata(file: &H5File, layout: &Layout) -> Result<Vec<u8>> {
    let end = layout.data_start + layout.body_len;
    let root = encode::SUPERBLOCK_LEN as u64;
    let mut head = encode::superblock(end, root);
    head.extend(root_header(file, &layout.headers)?);
    for (k, ds) in file.datasets.iter().enumerate() {
        debug_assert_eq!(head.len() as u64, layout.headers[k]);
        head.extend(dataset_header(ds, layout.data_address(k))?);
    }
    head.resize(layout.data_start as usize, 0);
    Ok(head)
}

/// Encodes the body bytes `[at, at + block.len())`: the elements of every dataset whose
/// range meets the block (ranges start on element boundaries; padding stays zero).
fn fill(file: &H5File, layout: &Layout, at: u64, block: &mut [u8]) {
    let end = at + block.len() as u64;
    for (ds, &(start, len)) in file.datasets.iter().zip(&layout.ranges) {
        let (lo, hi) = (start.max(at), (start + len).min(end));
        if lo >= hi {
            continue;
        }
        let size = ds.data.element().size() as u64;
        let first = ((lo - start) / size) as usize;
        let out = &mut block[(lo - at) as usize..(hi - at) as usize];
        for (k, bytes) in out.chunks_exact_mut(size as usize).enumerate() {
            ds.data.encode(first + k, bytes);
        }
    }
}

#[cfg(test)]
mod tests;
