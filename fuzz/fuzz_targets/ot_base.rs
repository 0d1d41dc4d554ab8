//! Base OT (Chou–Orlandi on Ristretto255): the sender's message A reaching a receiver, the
//! receiver's reply reaching a sender, and the constructors' sizes and lengths. Any bytes give
//! Ok or Err, never a panic; an honest run (seeds from the input) gives matching keys.
#![no_main]
mod common;

use _native::ot::base::{BaseReceiver, BaseSender, KEY, MAX_COUNT, POINT, SESSION, WIDE};
use common::{filler, Input};
use libfuzzer_sys::fuzz_target;

fn bit(choices: &[u8], i: usize) -> u8 {
    (choices[i >> 3] >> (i & 7)) & 1
}

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    match r.u8() % 4 {
        0 => {
            // the peer's reply (count points) to our A
            let count = 1 + r.below(12);
            let mut s = BaseSender::new(count, &filler(WIDE, 1), &filler(SESSION, 2)).unwrap();
            let reply = r.rest();
            match s.keys(reply) {
                Ok((k0, k1)) => {
                    assert_eq!(reply.len(), count * POINT);
                    assert_eq!((k0.len(), k1.len()), (count * KEY, count * KEY));
                    assert!(s.keys(reply).is_err(), "single use");
                }
                Err(_) => {}
            }
        }
        1 => {
            // the peer's message A to our receiver
            let count = 1 + r.below(12);
            let choices = r.bytes_exact(count.div_ceil(8));
            let mut rc = BaseReceiver::new(&choices, count, &filler(count * WIDE, 3), &filler(SESSION, 4)).unwrap();
            assert!(rc.keys().is_err(), "no keys before the reply");
            let a = r.rest();
            if let Ok(reply) = rc.reply(a) {
                assert_eq!(a.len(), POINT);
                assert_eq!(reply.len(), count * POINT);
                assert_eq!(rc.keys().unwrap().len(), count * KEY);
                assert!(rc.reply(a).is_err(), "single use");
            }
        }
        2 => {
            // constructor arguments of any size
            let count = match r.u8() % 4 {
                0 => 0,
                1 => MAX_COUNT + r.u8() as usize,
                2 => usize::MAX - r.u8() as usize,
                _ => 1 + r.below(64),
            };
            let seed = r.bytes_below(200).to_vec();
            let session = r.bytes_below(20).to_vec();
            let choices = r.bytes_below(12).to_vec();
            let rest = r.rest();
            let _ = BaseSender::new(count, &seed, &session);
            let _ = BaseSender::new(count, rest, &session);
            let _ = BaseReceiver::new(&choices, count, &seed, &session);
            let _ = BaseReceiver::new(&choices, count, rest, &session);
        }
        _ => {
            // an honest run from the input's seeds: k_i = k_{c_i}
            let count = 1 + r.below(8);
            let choices = r.bytes_exact(count.div_ceil(8));
            let session = r.bytes_exact(SESSION);
            let (sa, sb) = (r.bytes_exact(WIDE), r.bytes_exact(count * WIDE));
            let (Ok(mut s), Ok(mut rc)) = (BaseSender::new(count, &sa, &session), BaseReceiver::new(&choices, count, &sb, &session))
            else {
                return; // a zero scalar from all-zero bytes
            };
            let reply = rc.reply(&s.message()).unwrap();
            let (k0, k1) = s.keys(&reply).unwrap();
            let k = rc.keys().unwrap();
            for i in 0..count {
                let want = if bit(&choices, i) == 1 { &k1 } else { &k0 };
                assert_eq!(&k[i * KEY..(i + 1) * KEY], &want[i * KEY..(i + 1) * KEY], "OT {i}");
            }
        }
    }
});
