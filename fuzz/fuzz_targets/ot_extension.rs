//! IKNP / SoftSpoken extension messages: the receiver's message u (any length, any count; with
//! or without the KOS/SoftSpoken consistency check and its trailer) reaching an `IknpSender`
//! through `extend`, `extend_hash`, `extend_bits` and `extend_cot` after the checks the binding
//! runs (`py/ot.rs::sender_checks`, `cot::check_bits`, `cot::moduli`, `cot::check_residues`),
//! and the sender's Gilboa corrections reaching the receiver (`cot::check_residues` then
//! `cot::add_corrections`). Never a panic; a checked sender refuses a message that is not a
//! receiver's (and every later one); an honest run from the input's choices and Δ, checked or
//! not, passes and gives q_j = t_j ⊕ b_j·Δ and matching random-OT hashes.
#![no_main]
mod common;

use _native::ot::block::BLOCK;
use _native::ot::check::{CHECK_ROWS, TRAILER};
use _native::ot::iknp::{IknpReceiver, IknpSender, KAPPA, MAX_COUNT as MAX_COUNT_IKNP};
use _native::ot::{cot, tccr};
use common::{filler, Input};
use libfuzzer_sys::fuzz_target;

/// Extensions in one input stay small (the output buffers are the caller's, sized by count).
const MAX_FUZZ_COUNT: usize = 1 << 13;

/// A receiver and a sender over fixed base keys, Δ and k from the input; `checked`: both run the
/// consistency check (same context).
fn pair(r: &mut Input, checked: bool) -> (IknpReceiver, IknpSender, [u8; BLOCK], usize) {
    let (k0, k1) = (filler(KAPPA * BLOCK, 11), filler(KAPPA * BLOCK, 12));
    let delta: [u8; BLOCK] = r.array();
    let keys: Vec<u8> = (0..KAPPA)
        .flat_map(|i| {
            let src = if (delta[i >> 3] >> (i & 7)) & 1 == 1 { &k1 } else { &k0 };
            src[i * BLOCK..(i + 1) * BLOCK].to_vec()
        })
        .collect();
    let k = [1usize, 2, 4][r.u8() as usize % 3];
    let (mut rcv, setup) = IknpReceiver::soft(&k0, &k1, k, &filler(BLOCK, 13)).unwrap();
    let mut snd = IknpSender::soft(&keys, &delta, k, &setup).unwrap();
    if checked {
        let context = filler(BLOCK, 14);
        rcv.enable_check(&context, &filler(BLOCK, 15)).unwrap();
        snd.enable_check(&context).unwrap();
    }
    (rcv, snd, delta, k)
}

fn domain(r: &mut Input) -> u64 {
    let d = r.u64();
    if r.u8() % 8 == 0 { d } else { d & !0xff }
}

fn start(r: &mut Input) -> u64 {
    match r.u8() % 4 {
        0 => u64::MAX - r.u16() as u64,
        _ => r.u32() as u64,
    }
}

/// Moduli as a binding call would pass them, checked with `cot::moduli`.
fn moduli(r: &mut Input) -> Result<Vec<cot::Modulus>, String> {
    let n = r.u8() as usize % 4; // 0 is refused
    let values: Vec<u64> = (0..n)
        .map(|_| match r.u8() % 4 {
            0 => 0,
            1 => r.u64(),
            _ => (r.u64() >> 2) | 1,
        })
        .collect();
    cot::moduli(&values)
}

fn peer_message(r: &mut Input) {
    let checked = r.bool();
    let (_, mut snd, _, k) = pair(r, checked);
    let op = r.u8() % 4;
    let count = match r.u8() % 3 {
        0 => r.u16() as usize,
        1 => if r.bool() { usize::MAX - r.u8() as usize } else { MAX_COUNT_IKNP + (r.u32() as usize) * if r.bool() { 1 << 20 } else { 1 } },
        _ => usize::MAX, // replaced below by the count the message length matches
    };
    let (domain, start) = (domain(r), start(r));
    let bits = r.u8() as usize % 70;
    let m = moduli(r);
    let offsets_raw: Vec<u64> = (0..r.u8() as usize % 64).map(|_| r.u64()).collect();
    let u = r.rest();
    let count = if count == usize::MAX {
        // the count this message length matches (a checked call adds CHECK_ROWS rows and a trailer)
        let body = if checked { u.len().saturating_sub(TRAILER) } else { u.len() };
        (body * 8 * k / KAPPA).saturating_sub(if checked { CHECK_ROWS } else { 0 })
    } else {
        count
    };
    // the binding's checks (py/ot.rs sender_checks)
    if snd.check_message(u, count).is_err() || tccr::check_domain(domain).is_err() || tccr::check_indices(start, count).is_err() {
        if count <= MAX_FUZZ_COUNT {
            // the raw entry point on its own: an Err (or Ok when only domain/start are bad)
            let mut q = vec![0u8; count * BLOCK];
            let _ = snd.extend(u, count, &mut q);
        }
        return;
    }
    // count ≤ 2^16 here: the message was at most the input's length
    let result = match op {
        0 => {
            let mut q = vec![0u8; count * BLOCK];
            snd.extend(u, count, &mut q)
        }
        1 => {
            let (mut o0, mut o1) = (vec![0u8; count * BLOCK], vec![0u8; count * BLOCK]);
            snd.extend_hash(u, count, domain, start, &mut o0, &mut o1)
        }
        2 => {
            let w = tccr::bit_words(count);
            let (mut o0, mut o1) = (vec![0u64; w], vec![0u64; w]);
            snd.extend_bits(u, count, domain, start, &mut o0, &mut o1)
        }
        _ => {
            let Ok(m) = m else { return };
            if cot::check_bits(bits).is_err() || !count.is_multiple_of(bits) {
                return;
            }
            let entries = count / bits;
            let mut offsets: Vec<u64> = (0..entries * m.len()).map(|i| offsets_raw.get(i % offsets_raw.len().max(1)).copied().unwrap_or(0)).collect();
            if cot::check_residues(&offsets, &m, "offsets").is_err() {
                for (i, o) in offsets.iter_mut().enumerate() {
                    let q = m[i % m.len()].value();
                    if q != 0 {
                        *o %= q;
                    }
                }
            }
            let (mut corrections, mut share) = (vec![0u64; count * m.len()], vec![0u64; entries * m.len()]);
            snd.extend_cot(u, count, domain, start, &offsets, &m, bits, &mut corrections, &mut share)
        }
    };
    if checked {
        // the input's bytes are no receiver's message: the check refuses them, and the extension
        // refuses every later call
        assert!(result.is_err() && snd.failed(), "a message that is no receiver's passed the consistency check");
        assert!(snd.check_message(u, count).is_err());
    } else {
        result.expect("an unchecked extension takes any message of the right length");
    }
}

fn honest(r: &mut Input) {
    let checked = r.bool();
    let (mut rcv, mut snd, delta, _) = pair(r, checked);
    let count = r.below(1200);
    let (domain, start) = (r.u32() as u64 & !0xff, r.u32() as u64);
    let choices = r.bytes_exact(count.div_ceil(8));
    let mut u = vec![0u8; rcv.message_len(count)];
    let mut t = vec![0u8; count * BLOCK];
    rcv.extend(&choices, count, &mut u, &mut t).unwrap();
    let mut q = vec![0u8; count * BLOCK];
    snd.extend(&u, count, &mut q).unwrap();
    for j in 0..count {
        let b = (choices[j >> 3] >> (j & 7)) & 1;
        for i in 0..BLOCK {
            assert_eq!(q[j * BLOCK + i], t[j * BLOCK + i] ^ (delta[i] & 0u8.wrapping_sub(b)), "row {j}");
        }
    }
    // the fused random OT: the receiver's hash is the sender's hash of its choice
    let mut h = vec![0u8; count * BLOCK];
    u.fill(0);
    rcv.extend_hash(&choices, count, domain, start, &mut u, &mut h).unwrap();
    let (mut h0, mut h1) = (vec![0u8; count * BLOCK], vec![0u8; count * BLOCK]);
    snd.extend_hash(&u, count, domain, start, &mut h0, &mut h1).unwrap();
    for j in 0..count {
        let b = (choices[j >> 3] >> (j & 7)) & 1;
        let want = if b == 1 { &h1 } else { &h0 };
        assert_eq!(&h[j * BLOCK..(j + 1) * BLOCK], &want[j * BLOCK..(j + 1) * BLOCK], "hash {j}");
    }
}

fn peer_corrections(r: &mut Input) {
    // the receiver's Gilboa half: its pads from an honest extension, then the sender's
    // corrections (peer data) through the binding's check
    let checked = r.bool();
    let (mut rcv, _, _, _) = pair(r, checked);
    let bits = 1 + r.below(64);
    let entries = r.below(16);
    let Ok(m) = moduli(r) else { return };
    let count = entries * bits;
    let values: Vec<u64> = (0..entries).map(|_| r.u64() & if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 }).collect();
    cot::check_values(&values, bits).unwrap();
    let mut choices = vec![0u8; count.div_ceil(8)];
    cot::pack_choice_bits(&values, bits, &mut choices);
    let mut u = vec![0u8; rcv.message_len(count)];
    let mut pads = vec![0u64; entries * m.len()];
    rcv.extend_cot(&choices, count, 0x100, 0, &m, bits, &mut u, &mut pads).unwrap();
    let corrections: Vec<u64> = (0..count * m.len()).map(|_| r.u64()).collect();
    if cot::check_residues(&corrections, &m, "corrections").is_ok() {
        cot::add_corrections(&mut pads, &values, &corrections, &m, bits);
        assert!(cot::check_residues(&pads, &m, "shares").is_ok());
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    match r.u8() % 3 {
        0 => peer_message(&mut r),
        1 => honest(&mut r),
        _ => peer_corrections(&mut r),
    }
});
