//! SoftSpoken's one-time setup message (receiver → sender, `pprf::SETUP_LEN` bytes) reaching
//! `IknpSender::soft`, the checked entry point of `pprf::puncture` (which asserts the key
//! length and k its callers guarantee). Any bytes and any k give Ok or Err, never a panic; an
//! accepted sender extends (with a wrong setup its rows are wrong, which it cannot detect).
#![no_main]
mod common;

use _native::ot::block::BLOCK;
use _native::ot::iknp::{IknpReceiver, IknpSender, KAPPA};
use _native::ot::pprf::SETUP_LEN;
use common::{filler, Input};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    let k = match r.u8() % 8 {
        0 => r.u8() as usize, // anything, mostly refused
        1 => 1,
        2 | 3 | 4 => 2,
        _ => 4,
    };
    let delta: [u8; BLOCK] = r.array();
    let key_len = if r.u8() % 16 == 0 { r.below(3000) } else { KAPPA * BLOCK };
    let keys = filler(key_len, 21);
    let mode = r.u8() % 4;
    let body = r.rest();
    let setup: Vec<u8> = match mode {
        // the real message with the input XORed in (the sender cannot tell)
        0 | 1 if (2..=4).contains(&k) && k != 3 => {
            let (_, mut s) = IknpReceiver::soft(&filler(KAPPA * BLOCK, 22), &filler(KAPPA * BLOCK, 23), k, &[7u8; 16]).unwrap();
            for (d, b) in s.iter_mut().zip(body) {
                *d ^= b;
            }
            s
        }
        2 => {
            let mut s = body.to_vec();
            s.resize(SETUP_LEN, 0);
            s
        }
        _ => body.to_vec(),
    };
    match IknpSender::soft(&keys, &delta, k, &setup) {
        Ok(mut snd) => {
            assert!(k == 1 || setup.len() == SETUP_LEN);
            assert_eq!(snd.delta(), delta);
            let count = 300;
            let u = vec![0x5cu8; snd.message_len(count)];
            let mut q = vec![0u8; count * BLOCK];
            snd.extend(&u, count, &mut q).unwrap();
        }
        Err(e) => assert!(!e.is_empty()),
    }
});
