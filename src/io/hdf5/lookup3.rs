//! Bob Jenkins' lookup3 `hashlittle` (public domain), the checksum HDF5 keeps over its
//! version-2 superblock and version-2 object headers (`H5_checksum_lookup3` with an
//! initial value of 0).

/// The mixing step of three 32-bit lanes.
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

/// The final mixing of the three lanes; `c` is the hash.
fn finish(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// Three little-endian words of a block of at most 12 bytes, zero-padded.
fn words(block: &[u8]) -> [u32; 3] {
    let mut padded = [0u8; 12];
    padded[..block.len()].copy_from_slice(block);
    let w = |k: usize| u32::from_le_bytes([padded[k], padded[k + 1], padded[k + 2], padded[k + 3]]);
    [w(0), w(4), w(8)]
}

/// `hashlittle(key, length, initval)`: 12-byte blocks mixed in turn, the last (1 to 12
/// bytes, zero-padded) finished; an empty key hashes to the initial lanes' `c`.
pub fn hashlittle(key: &[u8], initval: u32) -> u32 {
    let start = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (start, start, start);
    if key.is_empty() {
        return c;
    }
    let mut rest = key;
    while rest.len() > 12 {
        let [x, y, z] = words(&rest[..12]);
        a = a.wrapping_add(x);
        b = b.wrapping_add(y);
        c = c.wrapping_add(z);
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    let [x, y, z] = words(rest);
    a = a.wrapping_add(x);
    b = b.wrapping_add(y);
    c = c.wrapping_add(z);
    finish(&mut a, &mut b, &mut c);
    c
}

/// HDF5's metadata checksum: `hashlittle` with initial value 0.
pub fn checksum(bytes: &[u8]) -> u32 {
    hashlittle(bytes, 0)
}

#[cfg(test)]
mod tests {
    use super::hashlittle;

    #[test]
    fn the_reference_driver_values() {
        // The values printed by the self-test (driver5) of Jenkins' lookup3.c.
        assert_eq!(hashlittle(b"", 0), 0xdead_beef);
        assert_eq!(hashlittle(b"", 0xdead_beef), 0xbd5b_7dde);
        let four = b"Four score and seven years ago";
        assert_eq!(hashlittle(four, 0), 0x1777_0551);
        assert_eq!(hashlittle(four, 1), 0xcd62_8161);
    }
}
