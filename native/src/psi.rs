//! ECDH private set intersection on Ristretto255: hash-to-group and commutative blinding.
//!
//! A party with secret scalar k maps each item x to `k * H(x)`, where H hashes
//! `DOMAIN || x` with SHA-512 into the group (two Elligator maps, `from_uniform_bytes`: the
//! hash-to-group of RFC 9496), and re-blinds the peer's points `P` to `k * P`. Blinding
//! commutes (`a * (b * H(x)) = b * (a * H(x))`), so both parties reach the same doubly blinded
//! value exactly for the items they share; under DDH a singly blinded point tells the peer nothing
//! about an item it does not hold.
//!
//! Points travel as 32-byte canonical encodings. Every received encoding is decompressed, which
//! rejects non-canonical bytes, and the identity is refused. Output encodings are produced in
//! batches with one field inversion per chunk (`double_and_compress_batch`: the kernel multiplies
//! by k/2 and the batch doubling restores k). Work is split in chunks over the rayon pool.

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use rayon::prelude::*;
use sha2::{Digest, Sha256, Sha512};

/// Domain separation of the item hash (a protocol version: both parties must use the same).
pub const DOMAIN: &[u8] = b"shaper/psi/ecdh-ristretto255/v1\0";
/// Bytes of one point encoding.
pub const POINT: usize = 32;
/// Points per batch compression (one inversion each) and per unit of parallel work.
const CHUNK: usize = 512;

/// A party's secret blinding scalar, nonzero, reduced from 64 uniform bytes.
pub struct BlindingKey {
    half: Scalar, // k / 2: the batch compression doubles
    key: Scalar,
}

impl BlindingKey {
    /// From 64 bytes of a CSPRNG (a wide reduction: uniform mod the group order up to 2^-250).
    pub fn from_wide(bytes: &[u8; 64]) -> Result<Self, String> {
        let key = Scalar::from_bytes_mod_order_wide(bytes);
        Self::new(key)
    }

    /// From the 32-byte canonical encoding [`Self::to_bytes`] wrote.
    pub fn from_canonical(bytes: &[u8; 32]) -> Result<Self, String> {
        let key = Option::<Scalar>::from(Scalar::from_canonical_bytes(*bytes))
            .ok_or_else(|| "the blinding key is not a canonical scalar".to_string())?;
        Self::new(key)
    }

    fn new(key: Scalar) -> Result<Self, String> {
        if key == Scalar::ZERO {
            return Err("the blinding key is zero".into());
        }
        Ok(Self { half: key * Scalar::from(2u64).invert(), key })
    }

    pub fn to_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }
}

/// H(x): SHA-512 of `DOMAIN || x`, mapped into the group.
pub fn hash_to_group(item: &[u8]) -> RistrettoPoint {
    let mut h = Sha512::new();
    h.update(DOMAIN);
    h.update(item);
    let wide: [u8; 64] = h.finalize().into();
    RistrettoPoint::from_uniform_bytes(&wide)
}

/// `k * points[i]` written as 32-byte encodings into `out` (which holds points.len() * 32 bytes).
fn compress_into(key: &BlindingKey, points: &[RistrettoPoint], out: &mut [u8]) {
    let halves: Vec<RistrettoPoint> = points.iter().map(|p| p * key.half).collect();
    for (dst, c) in out.chunks_exact_mut(POINT).zip(RistrettoPoint::double_and_compress_batch(&halves)) {
        dst.copy_from_slice(c.as_bytes());
    }
}

/// Items given as one byte string and `offsets` (n + 1 ascending positions): item i is
/// `data[offsets[i]..offsets[i + 1]]`. Returns `k * H(item)` for the items `order[0], order[1],
/// ...` (every item in turn when `order` is None), 32 bytes each.
pub fn hash_blind(key: &BlindingKey, data: &[u8], offsets: &[usize], order: Option<&[usize]>) -> Result<Vec<u8>, String> {
    check_offsets(data.len(), offsets)?;
    let n = offsets.len() - 1;
    if let Some(bad) = order.and_then(|o| o.iter().find(|&&i| i >= n)) {
        return Err(format!("item {bad} is out of range: there are {n} items"));
    }
    let count = order.map_or(n, |o| o.len());
    let mut out = vec![0u8; count * POINT];
    out.par_chunks_mut(CHUNK * POINT).enumerate().for_each(|(c, dst)| {
        let start = c * CHUNK;
        let points: Vec<RistrettoPoint> = (start..start + dst.len() / POINT)
            .map(|j| order.map_or(j, |o| o[j]))
            .map(|i| hash_to_group(&data[offsets[i]..offsets[i + 1]]))
            .collect();
        compress_into(key, &points, dst);
    });
    Ok(out)
}

/// The first `width` (at most 32) bytes of SHA-256(`prefix || item`) for every item: digests for
/// duplicate detection and for FNP's hashing into bins.
pub fn digests(prefix: &[u8], data: &[u8], offsets: &[usize], width: usize) -> Result<Vec<u8>, String> {
    check_offsets(data.len(), offsets)?;
    if !(1..=32).contains(&width) {
        return Err(format!("a digest has 1 to 32 bytes, asked for {width}"));
    }
    let n = offsets.len() - 1;
    let mut out = vec![0u8; n * width];
    out.par_chunks_mut(CHUNK * 8 * width).enumerate().for_each(|(c, dst)| {
        let start = c * CHUNK * 8;
        for (j, d) in dst.chunks_exact_mut(width).enumerate() {
            let i = start + j;
            let mut h = Sha256::new();
            h.update(prefix);
            h.update(&data[offsets[i]..offsets[i + 1]]);
            d.copy_from_slice(&h.finalize()[..width]);
        }
    });
    Ok(out)
}

/// The permutation of `rows` (item positions) that sorts their items' bytes (byte-wise, a
/// shorter prefix first, ties by place in `rows`): keys of the first 16 bytes, big-endian, and
/// the whole items only where those are equal.
pub fn sort_items(data: &[u8], offsets: &[usize], rows: &[usize]) -> Result<Vec<u32>, String> {
    check_offsets(data.len(), offsets)?;
    let n = offsets.len() - 1;
    if let Some(&r) = rows.iter().find(|&&r| r >= n) {
        return Err(format!("row {r} is not one of the {n} items"));
    }
    if rows.len() > u32::MAX as usize {
        return Err(format!("at most 2^32 rows, got {}", rows.len()));
    }
    let item = |k: u32| &data[offsets[rows[k as usize]]..offsets[rows[k as usize] + 1]];
    let mut keyed: Vec<(u128, u32)> = (0..rows.len() as u32).map(|k| {
        let s = item(k);
        let mut b = [0u8; 16];
        b[..s.len().min(16)].copy_from_slice(&s[..s.len().min(16)]);
        (u128::from_be_bytes(b), k)
    }).collect();
    keyed.par_sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| item(a.1).cmp(item(b.1))).then(a.1.cmp(&b.1)));
    Ok(keyed.into_iter().map(|e| e.1).collect())
}

/// `k * P` for every 32-byte encoding P in `points`. Errors name the first invalid encoding.
pub fn blind(key: &BlindingKey, points: &[u8]) -> Result<Vec<u8>, String> {
    if points.len() % POINT != 0 {
        return Err(format!("{} bytes is not a whole number of {POINT}-byte points", points.len()));
    }
    let mut out = vec![0u8; points.len()];
    let bad = out
        .par_chunks_mut(CHUNK * POINT)
        .zip(points.par_chunks(CHUNK * POINT))
        .enumerate()
        .map(|(c, (dst, src))| {
            let mut decoded = Vec::with_capacity(src.len() / POINT);
            for (j, enc) in src.chunks_exact(POINT).enumerate() {
                match decode(enc) {
                    Some(p) => decoded.push(p),
                    None => return Some(c * CHUNK + j),
                }
            }
            compress_into(key, &decoded, dst);
            None
        })
        .filter_map(|bad| bad)
        .min();
    match bad {
        Some(i) => Err(format!("point {i} is not a valid Ristretto255 encoding (or is the identity)")),
        None => Ok(out),
    }
}

fn decode(enc: &[u8]) -> Option<RistrettoPoint> {
    let p = CompressedRistretto::from_slice(enc).ok()?.decompress()?;
    (p != RistrettoPoint::identity()).then_some(p)
}

fn check_offsets(len: usize, offsets: &[usize]) -> Result<(), String> {
    if offsets.is_empty() || offsets[0] != 0 || *offsets.last().unwrap() != len {
        return Err(format!("offsets must start at 0 and end at the data length {len}"));
    }
    if offsets.windows(2).any(|w| w[1] < w[0]) {
        return Err("offsets must not decrease".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> BlindingKey {
        BlindingKey::from_wide(&[seed; 64]).unwrap()
    }

    fn items(words: &[&str]) -> (Vec<u8>, Vec<usize>) {
        let mut data = Vec::new();
        let mut offsets = vec![0];
        for w in words {
            data.extend_from_slice(w.as_bytes());
            offsets.push(data.len());
        }
        (data, offsets)
    }

    #[test]
    fn blinding_commutes_and_matches_direct_multiplication() {
        let (a, b) = (key(1), key(2));
        let words: Vec<String> = (0..1300).map(|i| format!("id-{i}")).collect();
        let refs: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
        let (data, offsets) = items(&refs);
        let ab = blind(&b, &hash_blind(&a, &data, &offsets, None).unwrap()).unwrap();
        let ba = blind(&a, &hash_blind(&b, &data, &offsets, None).unwrap()).unwrap();
        assert_eq!(ab, ba);
        for (i, w) in refs.iter().enumerate().step_by(97) {
            let direct = (hash_to_group(w.as_bytes()) * (a.key * b.key)).compress();
            assert_eq!(&ab[i * POINT..(i + 1) * POINT], direct.as_bytes());
        }
    }

    #[test]
    fn distinct_items_and_keys_give_distinct_points() {
        let (data, offsets) = items(&["alice", "bob", "", "alice "]);
        let out = hash_blind(&key(3), &data, &offsets, None).unwrap();
        let mut seen: Vec<&[u8]> = out.chunks(POINT).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 4);
        assert_ne!(out, hash_blind(&key(4), &data, &offsets, None).unwrap());
    }

    #[test]
    fn invalid_encodings_and_offsets_are_refused() {
        let (data, offsets) = items(&["x", "y", "z"]);
        let mut pts = hash_blind(&key(5), &data, &offsets, None).unwrap();
        pts[2 * POINT] ^= 1; // flipping the low bit makes the encoding non-canonical (odd) or invalid
        assert!(blind(&key(6), &pts).unwrap_err().contains("point 2"));
        let identity = [0u8; 64];
        assert!(blind(&key(6), &identity).unwrap_err().contains("point 0"));
        assert!(blind(&key(6), &[0u8; 33]).is_err());
        assert!(hash_blind(&key(5), &data, &[0, 2, 1, 3], None).is_err());
        assert!(hash_blind(&key(5), &data, &[0, 1, 2], None).is_err());
        assert!(BlindingKey::from_canonical(&[0u8; 32]).is_err());
        assert!(BlindingKey::from_canonical(&[0xff; 32]).is_err());
    }

    #[test]
    fn an_order_selects_and_permutes_items() {
        let (data, offsets) = items(&["a", "b", "c", "d"]);
        let all = hash_blind(&key(8), &data, &offsets, None).unwrap();
        let some = hash_blind(&key(8), &data, &offsets, Some(&[3, 0, 3])).unwrap();
        assert_eq!(&some[..POINT], &all[3 * POINT..]);
        assert_eq!(&some[POINT..2 * POINT], &all[..POINT]);
        assert_eq!(&some[2 * POINT..], &all[3 * POINT..]);
        assert!(hash_blind(&key(8), &data, &offsets, Some(&[4])).unwrap_err().contains("item 4"));
    }

    #[test]
    fn items_sort_bytewise_shorter_prefix_first() {
        let items: [&[u8]; 7] = [b"b", b"", b"ab", b"a", b"abcdefghijklmnopqrZ", b"abcdefghijklmnopqrA", b"ab\0"];
        let data: Vec<u8> = items.concat();
        let mut offsets = vec![0usize];
        for i in items {
            offsets.push(offsets.last().unwrap() + i.len());
        }
        let rows = [6usize, 0, 5, 1, 4, 2, 3];
        let order = sort_items(&data, &offsets, &rows).unwrap();
        let got: Vec<&[u8]> = order.iter().map(|&k| items[rows[k as usize]]).collect();
        let mut want: Vec<&[u8]> = rows.iter().map(|&r| items[r]).collect();
        want.sort();
        assert_eq!(got, want);
        assert!(sort_items(&data, &offsets, &[7]).is_err());
    }

    #[test]
    fn digests_are_prefixed_sha256() {
        let (data, offsets) = items(&["x", "", "yz"]);
        let d = digests(b"p", &data, &offsets, 32).unwrap();
        assert_eq!(&d[64..], Sha256::digest(b"pyz").as_slice());
        assert_eq!(&d[32..64], Sha256::digest(b"p").as_slice());
        assert_eq!(digests(b"p", &data, &offsets, 5).unwrap()[..5], d[..5]);
        assert!(digests(b"p", &data, &offsets, 33).is_err());
    }

    #[test]
    fn key_round_trips() {
        let k = key(7);
        let back = BlindingKey::from_canonical(&k.to_bytes()).unwrap();
        assert_eq!(back.key, k.key);
    }
}
