//! Base OT: Chou–Orlandi "simplest OT" on Ristretto255, many OTs from one sender message.
//!
//! Sender: secret a, sends A = a·G. Receiver with choice c_i: secret b_i, replies
//! B_i = b_i·G + c_i·A and keeps k_i = H(i, A, B_i, b_i·A). Sender: k0_i = H(i, A, B_i, a·B_i),
//! k1_i = H(i, A, B_i, a·(B_i − A)); then k_i = k_{c_i}, and under CDH the receiver cannot compute
//! the other key while B_i hides c_i perfectly. Passive security only (the UC proof of the
//! original paper has a known gap; irrelevant for semi-honest use).
//!
//! H is SHA-256 of [`DOMAIN`] || session (16 bytes) || i (u64 little-endian) || A || B_i || the
//! point, truncated to 16 bytes. The session string separates runs that share nothing else.
//!
//! Single use: the receiver's [`BaseReceiver::reply`] may run once (answering a second A with the
//! same b_i would reveal the choices: B_i − B_i' = c_i·(A − A')), and the sender's
//! [`BaseSender::keys`] once. Scalars come from the caller's random bytes (wide reduction).

use curve25519_dalek::constants::RISTRETTO_BASEPOINT_POINT;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{Identity, MultiscalarMul};
use sha2::{Digest, Sha256};

/// Domain separation of the key hash (a protocol version: both parties must use the same).
pub const DOMAIN: &[u8] = b"shaper/ot/base-chou-orlandi-ristretto255/v1\0";
/// Bytes of a point encoding.
pub const POINT: usize = 32;
/// Bytes of an OT key.
pub const KEY: usize = 16;
/// Bytes of the session string.
pub const SESSION: usize = 16;
/// Random bytes per scalar.
pub const WIDE: usize = 64;
/// Most OTs in one run (a bound on allocations; IKNP needs 128).
pub const MAX_COUNT: usize = 1 << 16;

fn key_hash(session: &[u8; SESSION], i: usize, a: &[u8; POINT], b: &[u8; POINT], p: &RistrettoPoint) -> [u8; KEY] {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    h.update(session);
    h.update((i as u64).to_le_bytes());
    h.update(a);
    h.update(b);
    h.update(p.compress().as_bytes());
    h.finalize()[..KEY].try_into().unwrap()
}

fn check_count(count: usize) -> Result<(), String> {
    if count == 0 || count > MAX_COUNT {
        return Err(format!("the number of base OTs must be in 1..={MAX_COUNT}, got {count}"));
    }
    Ok(())
}

fn session(bytes: &[u8]) -> Result<[u8; SESSION], String> {
    bytes.try_into().map_err(|_| format!("the session string must be {SESSION} bytes, got {}", bytes.len()))
}

fn scalar(wide: &[u8]) -> Result<Scalar, String> {
    let s = Scalar::from_bytes_mod_order_wide(wide.try_into().unwrap());
    if s == Scalar::ZERO {
        return Err("a base-OT scalar is zero (the random bytes are not random)".into());
    }
    Ok(s)
}

/// A point from its 32-byte encoding: canonical, and not the identity.
fn point(bytes: &[u8], what: &str) -> Result<RistrettoPoint, String> {
    let p = CompressedRistretto::from_slice(bytes)
        .ok()
        .and_then(|c| c.decompress())
        .ok_or_else(|| format!("{what} is not a valid Ristretto255 point encoding"))?;
    if p == RistrettoPoint::identity() {
        return Err(format!("{what} is the identity point"));
    }
    Ok(p)
}

/// The base-OT sender: holds a; sends A, derives both keys of every OT from the reply.
pub struct BaseSender {
    count: usize,
    session: [u8; SESSION],
    a: Scalar,
    big_a: RistrettoPoint,
    a_bytes: [u8; POINT],
    used: bool,
}

impl BaseSender {
    /// `seed`: 64 random bytes (the scalar a), `session`: 16 bytes.
    pub fn new(count: usize, seed: &[u8], session_bytes: &[u8]) -> Result<Self, String> {
        check_count(count)?;
        if seed.len() != WIDE {
            return Err(format!("the sender seed must be {WIDE} bytes, got {}", seed.len()));
        }
        let session = session(session_bytes)?;
        let a = scalar(seed)?;
        let big_a = RistrettoPoint::mul_base(&a);
        Ok(BaseSender { count, session, a, big_a, a_bytes: big_a.compress().to_bytes(), used: false })
    }

    /// The first message, A (32 bytes).
    pub fn message(&self) -> [u8; POINT] {
        self.a_bytes
    }

    /// (k0, k1), `count` keys of 16 bytes each, from the receiver's reply (`count` points).
    pub fn keys(&mut self, reply: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        if self.used {
            return Err("the base-OT sender's keys were already derived (single use)".into());
        }
        if reply.len() != self.count * POINT {
            return Err(format!("the base-OT reply must be {} bytes ({} points), got {}",
                               self.count * POINT, self.count, reply.len()));
        }
        let a_times_a = self.big_a * self.a;
        let (mut k0, mut k1) = (vec![0u8; self.count * KEY], vec![0u8; self.count * KEY]);
        for i in 0..self.count {
            let enc = &reply[i * POINT..(i + 1) * POINT];
            let b = point(enc, &format!("point {i} of the base-OT reply"))?;
            let p0 = b * self.a;
            let p1 = p0 - a_times_a; // a·(B − A)
            let enc: &[u8; POINT] = enc.try_into().unwrap();
            k0[i * KEY..(i + 1) * KEY].copy_from_slice(&key_hash(&self.session, i, &self.a_bytes, enc, &p0));
            k1[i * KEY..(i + 1) * KEY].copy_from_slice(&key_hash(&self.session, i, &self.a_bytes, enc, &p1));
        }
        self.used = true;
        self.a = Scalar::ZERO; // no longer needed
        Ok((k0, k1))
    }
}

/// The base-OT receiver: holds its choice bits and the b_i.
pub struct BaseReceiver {
    count: usize,
    session: [u8; SESSION],
    b: Vec<Scalar>,
    choices: Vec<u8>,
    /// A and the B_i, once [`Self::reply`] ran.
    sent: Option<(RistrettoPoint, [u8; POINT], Vec<u8>)>,
}

impl BaseReceiver {
    /// `choices`: `ceil(count / 8)` bytes of packed bits (LSB-first; bits past `count` ignored);
    /// `seed`: `count * 64` random bytes (the scalars b_i); `session`: 16 bytes.
    pub fn new(choices: &[u8], count: usize, seed: &[u8], session_bytes: &[u8]) -> Result<Self, String> {
        check_count(count)?;
        if choices.len() != count.div_ceil(8) {
            return Err(format!("{count} choice bits take {} bytes, got {}", count.div_ceil(8), choices.len()));
        }
        if seed.len() != count * WIDE {
            return Err(format!("the receiver seed must be {} bytes ({WIDE} per OT), got {}", count * WIDE, seed.len()));
        }
        let session = session(session_bytes)?;
        let b = seed.chunks_exact(WIDE).map(scalar).collect::<Result<Vec<_>, _>>()?;
        Ok(BaseReceiver { count, session, b, choices: choices.to_vec(), sent: None })
    }

    /// The reply B_i = b_i·G + c_i·A to the sender's message A (`count` × 32 bytes). Once only.
    pub fn reply(&mut self, message: &[u8]) -> Result<Vec<u8>, String> {
        if self.sent.is_some() {
            return Err("the base-OT receiver already replied (a second reply would reveal its choices)".into());
        }
        if message.len() != POINT {
            return Err(format!("the base-OT sender message must be {POINT} bytes, got {}", message.len()));
        }
        let big_a = point(message, "the base-OT sender message A")?;
        let mut out = vec![0u8; self.count * POINT];
        for i in 0..self.count {
            let c = Scalar::from(((self.choices[i >> 3] >> (i & 7)) & 1) as u64);
            // constant time in c: a two-term multiscalar product rather than a branch
            let b = RistrettoPoint::multiscalar_mul([self.b[i], c], [RISTRETTO_BASEPOINT_POINT, big_a]);
            out[i * POINT..(i + 1) * POINT].copy_from_slice(b.compress().as_bytes());
        }
        self.sent = Some((big_a, message.try_into().unwrap(), out.clone()));
        Ok(out)
    }

    /// k_i = k_{c_i} of the sender, `count` × 16 bytes; only after [`Self::reply`].
    pub fn keys(&self) -> Result<Vec<u8>, String> {
        let (big_a, a_bytes, replies) = self.sent.as_ref()
            .ok_or_else(|| "the base-OT receiver has no keys before reply()".to_string())?;
        let mut k = vec![0u8; self.count * KEY];
        for i in 0..self.count {
            let enc: &[u8; POINT] = replies[i * POINT..(i + 1) * POINT].try_into().unwrap();
            k[i * KEY..(i + 1) * KEY].copy_from_slice(&key_hash(&self.session, i, a_bytes, enc, &(big_a * self.b[i])));
        }
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        // deterministic test bytes (SHA-256 in counter mode)
        (0..n.div_ceil(32)).flat_map(|k| Sha256::digest([seed, k as u8, (k >> 8) as u8]).to_vec()).take(n).collect()
    }

    fn run(count: usize, choices: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let session = [3u8; 16];
        let mut s = BaseSender::new(count, &bytes(64, 1), &session).unwrap();
        let mut r = BaseReceiver::new(choices, count, &bytes(count * 64, 2), &session).unwrap();
        let reply = r.reply(&s.message()).unwrap();
        let (k0, k1) = s.keys(&reply).unwrap();
        (k0, k1, r.keys().unwrap())
    }

    #[test]
    fn receiver_key_is_the_chosen_sender_key() {
        let count = 128;
        let choices = bytes(16, 9);
        let (k0, k1, k) = run(count, &choices);
        for i in 0..count {
            let c = (choices[i >> 3] >> (i & 7)) & 1;
            let (mine, other) = if c == 1 { (&k1, &k0) } else { (&k0, &k1) };
            assert_eq!(&k[i * KEY..(i + 1) * KEY], &mine[i * KEY..(i + 1) * KEY], "OT {i}");
            assert_ne!(&k[i * KEY..(i + 1) * KEY], &other[i * KEY..(i + 1) * KEY], "OT {i}");
        }
        // odd counts and ignored pad bits
        let (k0, _, k) = run(3, &[0xf8]);
        assert_eq!(k0, k);
    }

    #[test]
    fn bad_inputs_are_rejected() {
        let session = [0u8; 16];
        assert!(BaseSender::new(128, &[1u8; 63], &session).is_err());
        assert!(BaseSender::new(0, &[1u8; 64], &session).is_err());
        assert!(BaseSender::new(128, &[1u8; 64], &session[..15]).is_err());
        assert!(BaseSender::new(128, &[0u8; 64], &session).is_err_and(|e| e.contains("zero")));
        assert!(BaseReceiver::new(&[0u8; 15], 128, &bytes(128 * 64, 1), &session).is_err());
        assert!(BaseReceiver::new(&[0u8; 16], 128, &bytes(127 * 64, 1), &session).is_err());

        let mut r = BaseReceiver::new(&[0u8; 16], 128, &bytes(128 * 64, 1), &session).unwrap();
        assert!(r.keys().unwrap_err().contains("before reply"));
        assert!(r.reply(&[0u8; 31]).is_err());
        assert!(r.reply(&[0u8; 32]).unwrap_err().contains("identity"));
        assert!(r.reply(&[0xffu8; 32]).unwrap_err().contains("not a valid"));
        let mut s = BaseSender::new(128, &bytes(64, 4), &session).unwrap();
        let reply = r.reply(&s.message()).unwrap();
        assert!(r.reply(&s.message()).unwrap_err().contains("already"));
        assert!(s.keys(&reply[..reply.len() - 1]).is_err());
        let mut bad = reply.clone();
        bad[5 * POINT..6 * POINT].fill(0xff);
        assert!(s.keys(&bad).unwrap_err().contains("point 5"));
        bad[5 * POINT..6 * POINT].fill(0);
        assert!(s.keys(&bad).unwrap_err().contains("identity"));
        s.keys(&reply).unwrap();
        assert!(s.keys(&reply).unwrap_err().contains("single use"));
    }

    #[test]
    fn sessions_separate_keys() {
        let mut s1 = BaseSender::new(1, &bytes(64, 1), &[1u8; 16]).unwrap();
        let mut s2 = BaseSender::new(1, &bytes(64, 1), &[2u8; 16]).unwrap();
        let mut r = BaseReceiver::new(&[0], 1, &bytes(64, 2), &[1u8; 16]).unwrap();
        let reply = r.reply(&s1.message()).unwrap();
        assert_ne!(s1.keys(&reply).unwrap().0, s2.keys(&reply).unwrap().0);
    }
}
