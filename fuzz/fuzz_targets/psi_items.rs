//! Items given as one byte string and offsets (`psi::hash_blind`, `psi::digests`): arbitrary
//! offsets (decreasing, past the end, not starting at 0), orders (out of range, repeated) and
//! digest widths give Ok or Err, never a panic or an out-of-bounds slice.
#![no_main]
mod common;

use _native::psi::{self, BlindingKey, POINT};
use common::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    let width = r.u8() as usize % 40; // 0 and 33..39 are refused
    let nitems = r.u8() as usize % 24;
    let prefix_len = r.u8() as usize % 8;
    let prefix = r.bytes(prefix_len).to_vec();
    let use_order = r.bool();
    let norder = r.u8() as usize % 16;
    let order: Vec<usize> = (0..norder).map(|_| r.u8() as usize % (nitems + 3)).collect();
    // offsets: mostly cumulative lengths (valid), sometimes raw values (anything)
    let raw = r.bool();
    let deltas: Vec<u8> = (0..nitems).map(|_| r.u8()).collect();
    let items = r.rest();
    let mut offsets = vec![if raw { deltas.first().copied().unwrap_or(0) as usize % 3 } else { 0 }];
    let mut at = 0usize;
    for &d in &deltas {
        at = if raw { d as usize } else { (at + (d as usize % 16)).min(items.len()) };
        offsets.push(at);
    }
    if !raw {
        *offsets.last_mut().unwrap() = items.len();
    }
    let valid = offsets[0] == 0
        && *offsets.last().unwrap() == items.len()
        && offsets.windows(2).all(|w| w[0] <= w[1]);
    let n = offsets.len() - 1;

    match psi::digests(&prefix, items, &offsets, width) {
        Ok(d) => {
            assert!(valid && (1..=32).contains(&width));
            assert_eq!(d.len(), n * width);
        }
        Err(_) => assert!(!valid || !(1..=32).contains(&width)),
    }
    let key = BlindingKey::from_wide(&[0x33; 64]).unwrap();
    let order = use_order.then_some(order.as_slice());
    match psi::hash_blind(&key, items, &offsets, order) {
        Ok(out) => {
            assert!(valid);
            assert_eq!(out.len(), order.map_or(n, |o| o.len()) * POINT);
            psi::blind(&key, &out).expect("hashed items are valid points");
        }
        Err(_) => assert!(!valid || order.is_some_and(|o| o.iter().any(|&i| i >= n))),
    }
});
