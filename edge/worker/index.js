// The mess exchange as a Cloudflare Worker: the platform's side (HTTP, storage) in JavaScript,
// the protocol in WebAssembly built from the same Rust crate as the native exchange.
import core from "./mess_edge_core.wasm";

const exports = new WebAssembly.Instance(core, {}).exports;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Calls an export that takes UTF-8 text and answers packed (pointer << 32 | length) text.
function call(name, text) {
  const input = encoder.encode(text);
  const at = exports.mess_alloc(input.length);
  new Uint8Array(exports.memory.buffer, at, input.length).set(input);
  const packed = exports[name](at, input.length);
  const ptr = Number(packed >> 32n);
  const len = Number(packed & 0xffffffffn);
  const out = decoder.decode(new Uint8Array(exports.memory.buffer, ptr, len));
  exports.mess_free(ptr, len);
  return out;
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") {
      return Response.json({ status: "ok", edge: true });
    }
    if (url.pathname === "/check" && request.method === "POST") {
      const answer = call("mess_check", await request.text());
      return new Response(answer + "\n", {
        status: answer.startsWith("ok") ? 200 : 422,
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    }
    return Response.json({ error: { code: "not_found", message: `no route ${url.pathname}` } }, { status: 404 });
  },
};
