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

/// Reads a service's answer to a notice (a [`notice::AnswerInput`] as JSON): answers
/// `{"sent": REF}`, `{"retry": WHY}` or `{"fail": WHY}`.
///
/// # Safety
/// As [`mess_check`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mess_notice_read(ptr: *mut u8, len: usize) -> u64 {
    // SAFETY: the caller wrote `len` bytes into an allocation of that capacity and gives it up.
    let input = unsafe { Vec::from_raw_parts(ptr, len, len) };
    answer(notice::read_answer(&input))
}

pub mod failure;
pub mod home;
pub mod http;
pub mod kv;
pub mod link;
pub mod notice;
pub mod page;
pub mod submit;

// The storage calls the Worker's JavaScript provides (module `host`), over the exchange's
// Durable Object storage. A value comes back in memory from `mess_alloc`, packed as
// (pointer << 32 | length), which the caller frees; `u64::MAX` means absent.
#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "host")]
unsafe extern "C" {
    fn kv_get(key: *const u8, key_len: usize) -> u64;
    fn kv_put(key: *const u8, key_len: usize, value: *const u8, value_len: usize);
    fn kv_delete(key: *const u8, key_len: usize);
    fn kv_scan(prefix: *const u8, prefix_len: usize) -> u64;
}

/// The Durable Object's storage, through the host calls.
#[cfg(target_arch = "wasm32")]
struct HostKv;

#[cfg(target_arch = "wasm32")]
fn take_packed(packed: u64) -> Option<String> {
    if packed == u64::MAX {
        return None;
    }
    let (ptr, len) = (
        (packed >> 32) as usize as *mut u8,
        (packed & 0xffff_ffff) as usize,
    );
    // SAFETY: the host wrote `len` bytes into memory it got from `mess_alloc(len)` and hands
    // that allocation over.
    let bytes = unsafe { Vec::from_raw_parts(ptr, len, len) };
    String::from_utf8(bytes).ok()
}

#[cfg(target_arch = "wasm32")]
impl kv::Kv for HostKv {
    fn get(&self, key: &str) -> Option<String> {
        // SAFETY: the host reads `key` during the call only.
        take_packed(unsafe { kv_get(key.as_ptr(), key.len()) })
    }

    fn put(&mut self, key: &str, value: &str) {
        // SAFETY: the host reads both during the call only.
        unsafe { kv_put(key.as_ptr(), key.len(), value.as_ptr(), value.len()) }
    }

    fn delete(&mut self, key: &str) {
        // SAFETY: the host reads `key` during the call only.
        unsafe { kv_delete(key.as_ptr(), key.len()) }
    }

    fn scan(&self, prefix: &str) -> Vec<(String, String)> {
        // SAFETY: the host reads `prefix` during the call only.
        let text = take_packed(unsafe { kv_scan(prefix.as_ptr(), prefix.len()) });
        text.and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
}

/// Answers one HTTP request (an [`http::Input`] as JSON) with an [`http::Output`] as JSON,
/// reading and writing the exchange's storage through the host calls.
///
/// # Safety
/// As [`mess_check`].
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mess_handle(ptr: *mut u8, len: usize) -> u64 {
    // SAFETY: the caller wrote `len` bytes into an allocation of that capacity and gives it up.
    let input = unsafe { Vec::from_raw_parts(ptr, len, len) };
    let output = match serde_json::from_slice::<http::Input>(&input) {
        Ok(input) => http::handle(&mut HostKv, &input),
        Err(e) => http::Output {
            status: 500,
            content_type: "application/json".to_owned(),
            body: failure::Failure::new(500, "internal", format!("the Worker's request: {e}"))
                .body(),
            r2_put: Vec::new(),
            r2_delete: Vec::new(),
            changes: Vec::new(),
            notices: Vec::new(),
            next_deadline: None,
        },
    };
    answer(serde_json::to_string(&output).unwrap_or_default())
}

/// Prepares one queued notice (a [`notice::NoticeInput`] as JSON): answers
/// `{"send": {url, headers, body}}`, or `{"drop": WHY}` when it is no longer to be sent.
///
/// # Safety
/// As [`mess_check`].
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mess_notice(ptr: *mut u8, len: usize) -> u64 {
    // SAFETY: the caller wrote `len` bytes into an allocation of that capacity and gives it up.
    let input = unsafe { Vec::from_raw_parts(ptr, len, len) };
    answer(notice::answer(&mut HostKv, &input))
}

#[cfg(test)]
mod tests;
