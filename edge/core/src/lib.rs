//! The MESS protocol for WebAssembly: exports over linear memory that a Worker's JavaScript
//! calls (no wasm-bindgen: the glue is a few lines of JavaScript in the Worker).
//!
//! A call takes its input as UTF-8 bytes the caller wrote into memory it got from
//! [`mess_alloc`], and answers with a packed (pointer << 32 | length) of UTF-8 bytes the
//! caller reads and then hands back to [`mess_free`].

// Exports over linear memory are raw pointers by nature; each unsafe block says what it relies on.
#![allow(unsafe_code)]

use mess_protocol::message::Message;
use mess_protocol::yaml::{self, Limits};

/// Memory for `len` bytes of input, owned by the caller until it passes it to a call.
#[unsafe(no_mangle)]
pub extern "C" fn mess_alloc(len: usize) -> *mut u8 {
    let mut buf = Vec::<u8>::with_capacity(len);
    let ptr = buf.as_mut_ptr();
    std::mem::forget(buf);
    ptr
}

/// Gives back memory from [`mess_alloc`] or an answer.
///
/// # Safety
/// `ptr` and `len` must be what an allocation or an answer returned, once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mess_free(ptr: *mut u8, len: usize) {
    // SAFETY: the caller passes back exactly what this module allocated with this capacity.
    unsafe { drop(Vec::from_raw_parts(ptr, 0, len)) };
}

fn answer(text: String) -> u64 {
    let mut bytes = text.into_bytes();
    bytes.shrink_to_fit();
    let (ptr, len) = (bytes.as_mut_ptr(), bytes.len());
    std::mem::forget(bytes);
    ((ptr as u64) << 32) | len as u64
}

/// Reads a MESS message (YAML or JSON) and answers `ok: KIND, KIND…` or `error: WHY`.
///
/// # Safety
/// `ptr` and `len` must be an allocation from [`mess_alloc`] holding `len` bytes of input,
/// which this call takes over.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mess_check(ptr: *mut u8, len: usize) -> u64 {
    // SAFETY: the caller wrote `len` bytes into an allocation of that capacity and gives it up.
    let input = unsafe { Vec::from_raw_parts(ptr, len, len) };
    let Ok(text) = String::from_utf8(input) else {
        return answer("error: the message is not UTF-8".to_owned());
    };
    let checked = yaml::parse_document(&text, &Limits::DEFAULT)
        .map_err(|e| e.to_string())
        .and_then(|v| Message::from_value(v).map_err(|e| e.to_string()));
    answer(match checked {
        Ok(m) => format!(
            "ok: {}",
            m.content()
                .map(|p| p.kind().to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => format!("error: {e}"),
    })
}
