// The mess exchange as a Cloudflare Worker: the platform's side (HTTP, storage, R2) in
// JavaScript, the exchange in WebAssembly built from the same Rust crate as the native one.
// Every request that reads or writes the exchange goes to one Durable Object, which runs the
// engine inside a storage transaction (so requests are applied one at a time, and a claim is
// won once), then copies the thread files it wrote to R2 before it answers.
import { DurableObject } from "cloudflare:workers";
import core from "./mess_edge_core.wasm";
import { PAGE, SCRIPT, STYLE } from "./page.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// The storage the engine's host calls reach while it answers one request (set per call: a
// Durable Object runs one call at a time).
let storage = null;
let exports = null;

function readText(ptr, len) {
  return decoder.decode(new Uint8Array(exports.memory.buffer, ptr, len));
}

// Copies `text` into memory the module allocates, packed as (pointer << 32 | length); the
// module takes it over.
function giveText(text) {
  const bytes = encoder.encode(text);
  const at = exports.mess_alloc(bytes.length);
  new Uint8Array(exports.memory.buffer, at, bytes.length).set(bytes);
  return (BigInt(at) << 32n) | BigInt(bytes.length);
}

const ABSENT = 0xffffffffffffffffn;

// The path the alarm asks the engine to pass the deadlines due on (never taken from outside).
const DEADLINES = "/_deadlines";

// Event streams one principal may hold open at once (as the native exchange).
const MAX_STREAMS = 16;

// The largest body taken (the native exchange's `max_message_bytes`): checked against
// Content-Length first, then counted while the body streams in, so nothing larger is held.
const MAX_BODY = 16 * 1024 * 1024;

class TooLarge extends Error {}

function tooLarge() {
  return Response.json(
    { error: { code: "too_large", message: `the body is larger than the limit of ${MAX_BODY} bytes` } },
    { status: 413 },
  );
}

// The body as text, refused past MAX_BODY bytes without reading the rest.
async function boundedText(request) {
  const declared = Number(request.headers.get("content-length") || "0");
  if (declared > MAX_BODY) throw new TooLarge();
  if (!request.body) return "";
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_BODY) {
      await reader.cancel();
      throw new TooLarge();
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return decoder.decode(all);
}

// What a refused request's body may still deliver before it is cut off: a small body already
// sent is read out (cutting it leaves wrangler's local proxy with a broken connection for the
// next request), one larger or slower than this is given up unread.
const DISCARD_AT_MOST = 64 * 1024;
const DISCARD_WITHIN_MS = 200;

async function discard(request) {
  if (!request.body) return;
  const reader = request.body.getReader();
  const deadline = new Promise((done) => setTimeout(() => done({ late: true }), DISCARD_WITHIN_MS));
  let size = 0;
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), deadline]);
      if (next.done) return;
      size += next.late ? 0 : next.value.length;
      if (next.late || size > DISCARD_AT_MOST) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // A body that fails to arrive needs no more attention.
  }
}

// The first string after `prefix` in byte order: prefixes end in an ASCII character.
function after(prefix) {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

const host = {
  kv_get(kp, kl) {
    const rows = storage.sql.exec("SELECT v FROM kv WHERE k = ?", readText(kp, kl)).toArray();
    return rows.length ? giveText(rows[0].v) : ABSENT;
  },
  kv_put(kp, kl, vp, vl) {
    storage.sql.exec(
      "INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
      readText(kp, kl),
      readText(vp, vl),
    );
  },
  kv_delete(kp, kl) {
    storage.sql.exec("DELETE FROM kv WHERE k = ?", readText(kp, kl));
  },
  kv_scan(pp, pl) {
    const prefix = readText(pp, pl);
    const rows = storage.sql
      .exec("SELECT k, v FROM kv WHERE k >= ? AND k < ? ORDER BY k", prefix, after(prefix))
      .toArray();
    return giveText(JSON.stringify(rows.map((r) => [r.k, r.v])));
  },
};

// A new instance of the engine: at the start, and after a trap (which leaves an instance's
// memory and stack as they were when it stopped).
function instantiate() {
  exports = new WebAssembly.Instance(core, { host }).exports;
}
instantiate();

// What a refused request's transaction throws to roll itself back, carrying the answer.
class Refused extends Error {
  constructor(output) {
    super("refused");
    this.output = output;
  }
}

// Calls an export that takes UTF-8 text and answers packed (pointer << 32 | length) text.
function call(name, text) {
  const input = encoder.encode(text);
  const at = exports.mess_alloc(input.length);
  new Uint8Array(exports.memory.buffer, at, input.length).set(input);
  const packed = exports[name](at, input.length);
  const ptr = Number(packed >> 32n);
  const len = Number(packed & 0xffffffffn);
  const out = readText(ptr, len);
  exports.mess_free(ptr, len);
  return out;
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// The exchange: its storage (table `kv`, the engine's; table `mirror`, the R2 writes still
// owed), and the engine.
export class Exchange extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.ctx = ctx;
    this.env = env;
    this.mirroring = Promise.resolve();
    this.queueing = Promise.resolve();
    // Open event streams (`GET /events`): each with its principal and its writer.
    this.watchers = new Set();
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)");
    // One row per R2 key: the newest text to put there, or NULL to delete it.
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS mirror (k TEXT PRIMARY KEY, text TEXT)");
    // The notices owed and not yet handed to the Queue: one row per delivery id.
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS outbox (id TEXT PRIMARY KEY, job TEXT NOT NULL)");
  }

  // The settings for notices the engine reads: what signs webhooks and where they may lead,
  // and each service's credentials and base URL.
  dispatchSettings() {
    const env = this.env;
    return {
      webhook_secret: env.MESS_WEBHOOK_SECRET || null,
      webhook_allow: (env.MESS_WEBHOOK_ALLOW || "").split(",").map((h) => h.trim()).filter(Boolean),
      slack_token: env.MESS_SLACK_TOKEN || null,
      slack_url: env.MESS_SLACK_URL || null,
      telegram_token: env.MESS_TELEGRAM_TOKEN || null,
      telegram_url: env.MESS_TELEGRAM_URL || null,
      twilio_sid: env.MESS_TWILIO_SID || null,
      twilio_token: env.MESS_TWILIO_TOKEN || null,
      twilio_from: env.MESS_TWILIO_FROM || null,
      twilio_url: env.MESS_TWILIO_URL || null,
      ntfy_url: env.MESS_NTFY_URL || null,
      ntfy_token: env.MESS_NTFY_TOKEN || null,
    };
  }

  // Called by the Queue's consumer: the request one delivery sends now (`{send}`), or why it
  // is dropped (`{drop}`).
  notice(delivery) {
    const now = this.env.MESS_FIXED_CLOCK ? Date.parse(this.env.MESS_FIXED_CLOCK) : Date.now();
    storage = this.ctx.storage;
    try {
      return JSON.parse(
        call(
          "mess_notice",
          JSON.stringify({
            delivery,
            at: Math.floor(now / 1000),
            link_secret: this.env.MESS_SECRET || null,
            ...this.dispatchSettings(),
          }),
        ),
      );
    } finally {
      storage = null;
    }
  }

  // Hands the outbox to the Queue, and clears what it took; what fails stays for the next
  // request.
  async enqueue() {
    const rows = this.ctx.storage.sql.exec("SELECT id, job FROM outbox ORDER BY id").toArray();
    if (!rows.length) return;
    if (!this.env.NOTICES) {
      console.error("notices are owed but the Worker has no NOTICES queue binding");
      return;
    }
    // A batch holds at most 100 messages (each job is a few hundred bytes, far within the
    // batch's byte limit).
    for (let at = 0; at < rows.length; at += 100) {
      const chunk = rows.slice(at, at + 100);
      await this.env.NOTICES.sendBatch(chunk.map((r) => ({ body: JSON.parse(r.job) })));
      for (const r of chunk) this.ctx.storage.sql.exec("DELETE FROM outbox WHERE id = ?", r.id);
    }
  }

  // What the engine is told of a request.
  input(method, url, headers) {
    return {
      method,
      path: url.pathname,
      query: url.search.replace(/^\?/, ""),
      authorization: headers.get("authorization"),
      accept: headers.get("accept"),
      content_type: headers.get("content-type"),
      body: "",
      now: this.env.MESS_FIXED_CLOCK || new Date().toISOString(),
      operator_key: this.env.MESS_OPERATOR_KEY || null,
      link_secret: this.env.MESS_SECRET || null,
      ...this.dispatchSettings(),
      issuer: (this.env.MESS_PUBLIC_URL || url.origin).replace(/\/+$/, ""),
      entropy: hex(crypto.getRandomValues(new Uint8Array(32))),
      watchers: [...new Set([...this.watchers].map((w) => w.id))],
    };
  }

  async fetch(request) {
    const url = new URL(request.url);
    const input = this.input(request.method, url, request.headers);
    if (request.method !== "GET" && request.headers.get(AUTHORIZE_ONLY)) {
      return this.authorize(input) || new Response(null, { status: 204 });
    }
    if (request.method !== "GET") {
      try {
        input.body = await boundedText(request);
      } catch (e) {
        if (e instanceof TooLarge) return tooLarge();
        throw e;
      }
    }
    return this.run(input);
  }

  // A deadline came due: the engine passes every deadline due at the start of any request, so
  // a request of its own does it.
  async alarm() {
    await this.run(this.input("POST", new URL(`http://exchange${DEADLINES}`), new Headers()));
  }

  // Sets the alarm for the earliest deadline the engine keeps, unless one is set sooner. A
  // clock fixed for tests never reaches a deadline, so it sets none.
  async arm(next) {
    if (next === null || next === undefined || this.env.MESS_FIXED_CLOCK) return;
    const at = next * 1000;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
  }

  // Runs one request through the engine in a storage transaction, then tells the watchers,
  // hands the notices to the Queue and copies the files to R2.
  async run(input) {
    let output;
    try {
      output = this.ctx.storage.transactionSync(() => {
        storage = this.ctx.storage;
        try {
          const out = JSON.parse(call("mess_handle", JSON.stringify(input)));
          // A refusal writes nothing, even where the engine wrote before it refused.
          if (out.status >= 400) throw new Refused(out);
          for (const key of out.r2_delete) {
            storage.sql.exec(
              "INSERT INTO mirror (k, text) VALUES (?, NULL) ON CONFLICT (k) DO UPDATE SET text = NULL",
              key,
            );
          }
          for (const job of out.notices || []) {
            storage.sql.exec(
              "INSERT INTO outbox (id, job) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
              job.id,
              JSON.stringify(job),
            );
          }
          for (const [key, text] of out.r2_put) {
            storage.sql.exec(
              "INSERT INTO mirror (k, text) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET text = excluded.text",
              key,
              text,
            );
          }
          return out;
        } finally {
          storage = null;
        }
      });
    } catch (e) {
      if (e instanceof Refused) {
        return new Response(e.output.body, {
          status: e.output.status,
          headers: { "content-type": e.output.content_type },
        });
      }
      // A trap in the engine: the transaction rolled back, nothing was written; the next call
      // gets a fresh instance.
      console.error("engine failure", e && e.stack ? e.stack : e);
      instantiate();
      return Response.json(
        { error: { code: "internal", message: "the exchange failed; nothing was written" } },
        { status: 500 },
      );
    }
    if (input.method === "GET" && output.status === 200 && isStream(input.path)) {
      const { watch, until } = JSON.parse(output.body);
      return this.watch(watch, until);
    }
    this.tell(output.changes || []);
    this.queueing = this.queueing
      .then(() => this.enqueue())
      .catch((e) => console.error("handing notices to the Queue failed; retried on the next request", e));
    await this.arm(output.next_deadline);
    // R2 writes are made one flush at a time, newest text per key, so a slow put can never
    // leave an older file in R2 than a later request wrote; the answer waits for its own.
    this.mirroring = this.mirroring.then(() => this.flush());
    try {
      await this.mirroring;
    } catch (e) {
      this.mirroring = Promise.resolve();
      console.error("R2 mirror failed; retried on the next request", e);
    }
    return new Response(output.body, {
      status: output.status,
      headers: { "content-type": output.content_type },
    });
  }

  // The refusal `input`'s caller gets, or null when the request may go on (reads only).
  authorize(input) {
    storage = this.ctx.storage;
    let out;
    try {
      out = JSON.parse(call("mess_handle", JSON.stringify({ ...input, authorize_only: true })));
    } finally {
      storage = null;
    }
    if (out.status === 200) return null;
    return new Response(out.body, { status: out.status, headers: { "content-type": out.content_type } });
  }

  // An event stream for principal `id` (or a link's, `link:EXECUTOR:REF`, which ends when the
  // link expires at `until`, seconds since the epoch): one `thread` event per change it may
  // see, as the native exchange sends them, and a keep-alive comment every 15 s. At most 16 per
  // principal.
  watch(id, until) {
    const held = [...this.watchers].filter((w) => w.id === id).length;
    if (held >= MAX_STREAMS) {
      return Response.json(
        { error: { code: "busy", message: `at most ${MAX_STREAMS} event streams at once; close one first` } },
        { status: 429, headers: { "retry-after": "1" } },
      );
    }
    const { readable, writable } = new TransformStream();
    const watcher = { id, writer: writable.getWriter() };
    const drop = () => {
      clearInterval(watcher.timer);
      clearTimeout(watcher.expiry);
      this.watchers.delete(watcher);
      watcher.writer.close().catch(() => {});
    };
    watcher.send = (text) => watcher.writer.write(encoder.encode(text)).catch(drop);
    watcher.drop = drop;
    watcher.timer = setInterval(() => watcher.send(": keep-alive\n\n"), 15000);
    // Timers take at most 2^31 - 1 ms (about 24 days): a longer link re-arms until it is due.
    const expire = () => {
      const left = until * 1000 - Date.now();
      if (left <= 0) return drop();
      watcher.expiry = setTimeout(expire, Math.min(left, 2 ** 31 - 1));
    };
    if (until) expire();
    this.watchers.add(watcher);
    watcher.send(": connected\n\n");
    return new Response(readable, {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }

  // Tells each watcher of the changes it may see.
  tell(changes) {
    for (const change of changes) {
      const data = JSON.stringify({ ref: change.ref, status: change.status, updated: change.updated });
      for (const watcher of this.watchers) {
        if (!change.to.includes(watcher.id)) continue;
        watcher.send(`event: thread\ndata: ${data}\n\n`);
        // A link whose executor may no longer read the thread hears this change last.
        if ((change.end || []).includes(watcher.id)) watcher.send("").then(watcher.drop);
      }
    }
  }

  // Makes R2 hold what the mirror table says, and clears each row it carried out.
  async flush() {
    const rows = this.ctx.storage.sql.exec("SELECT k, text FROM mirror ORDER BY k").toArray();
    for (const row of rows) {
      if (row.text === null) {
        await this.env.THREADS.delete(row.k);
      } else {
        await this.env.THREADS.put(row.k, row.text, {
          httpMetadata: { contentType: "application/yaml; charset=utf-8" },
        });
      }
      // Only if no newer text arrived meanwhile.
      this.ctx.storage.sql.exec(
        "DELETE FROM mirror WHERE k = ? AND text IS ?",
        row.k,
        row.text,
      );
    }
  }
}

// A call of the front Worker to the Durable Object that asks only whether the caller may go
// on (204, or the refusal); it reads and writes nothing, whoever sends it.
const AUTHORIZE_ONLY = "x-mess-authorize-only";

// The routes the Durable Object answers with an event stream once the engine has checked
// the caller: `/events` (a key) and `/thread/{ref}/events` (a link).
function isStream(path) {
  return path === "/events" || (path.startsWith("/thread/") && path.endsWith("/events"));
}

// The human page's headers, as `mess serve` sends them: scripts and styles from this Worker
// only, media from the page's own data or over https, requests to this Worker (and the
// exchange an `exchange=` parameter names), no framing, no referrer, no caching.
const POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; " +
  "img-src 'self' data: blob: https:; media-src 'self' data: blob: https:; connect-src 'self'; " +
  "form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

// The `scheme://host[:port]` of an http(s) URL, or null for anything else.
function exchangeOrigin(url) {
  const m = /^(https?):\/\/([A-Za-z0-9.\-:\[\]]+)(?:[/?#]|$)/i.exec(url || "");
  return m ? `${m[1].toLowerCase()}://${m[2].toLowerCase()}` : null;
}

function pageAsset(type, body, policy) {
  return new Response(body, {
    headers: {
      "content-type": type,
      "content-security-policy": policy,
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
    },
  });
}

// How long a failed webhook waits before its next attempt: 2, 4, 8 ... seconds, at most 10
// minutes (the Queue gives up after `max_retries` in wrangler.toml).
function backoff(attempts) {
  return Math.min(2 ** attempts, 600);
}

// The Queue's consumer: each notice prepared by the exchange at the moment it is sent, then
// POSTed; a 2xx answer ends it, anything else (or no answer) retries it later. Redirects are
// not followed: a webhook leads only where it was registered to.
async function deliver(batch, env) {
  const exchange = env.EXCHANGE.get(env.EXCHANGE.idFromName("exchange"));
  for (const message of batch.messages) {
    const prepared = await exchange.notice(message.body);
    if (prepared.drop) {
      console.warn(`notice ${message.body.id} dropped: ${prepared.drop}`);
      message.ack();
      continue;
    }
    const { url, headers, body, reading } = prepared.send;
    let outcome;
    try {
      const answer = await fetch(url, { method: "POST", headers, body, redirect: "manual" });
      // A webhook's answer is its status; a service's is read by the engine's rule (its
      // answers are small: more than 64 KiB is not one of them).
      const text = reading ? (await answer.text()).slice(0, 65536) : "";
      if (!reading) await answer.body?.cancel();
      outcome = JSON.parse(call("mess_notice_read", JSON.stringify({ reading, status: answer.status, body: text })));
    } catch (e) {
      // An engine that trapped is not used again.
      if (e instanceof WebAssembly.RuntimeError) instantiate();
      outcome = { retry: `${e}` };
    }
    if ("sent" in outcome) {
      message.ack();
    } else if (outcome.fail) {
      console.warn(`notice ${message.body.id} failed: ${outcome.fail}`);
      message.ack();
    } else {
      console.warn(`notice ${message.body.id}: ${outcome.retry}, attempt ${message.attempts}`);
      message.retry({ delaySeconds: backoff(message.attempts) });
    }
  }
}

export default {
  queue: deliver,
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") {
      return Response.json({ status: "ok", edge: true });
    }
    if (request.method === "GET" && url.pathname === "/respond") {
      const origin = exchangeOrigin(url.searchParams.get("exchange"));
      const policy = origin ? POLICY.replace("connect-src 'self'", `connect-src 'self' ${origin}`) : POLICY;
      return pageAsset("text/html; charset=utf-8", PAGE, policy);
    }
    if (request.method === "GET" && url.pathname === "/respond/app.js") {
      return pageAsset("text/javascript; charset=utf-8", SCRIPT, POLICY);
    }
    if (request.method === "GET" && url.pathname === "/respond/app.css") {
      return pageAsset("text/css; charset=utf-8", STYLE, POLICY);
    }
    if (url.pathname === "/check" && request.method === "POST") {
      let text;
      try {
        text = await boundedText(request);
      } catch (e) {
        if (e instanceof TooLarge) return tooLarge();
        throw e;
      }
      const answer = call("mess_check", text);
      return new Response(answer + "\n", {
        status: answer.startsWith("ok") ? 200 : 422,
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    }
    // The alarm's own path is not a route: answered as any path that is not one.
    if (url.pathname === DEADLINES) {
      const message = `no route ${request.method} ${url.pathname} on the Worker build of mess`;
      return Response.json({ error: { code: "not_found", message } }, { status: 404 });
    }
    // R2 as a home: the thread files under their folders, for the operator.
    if (url.pathname === "/export" && request.method === "GET") {
      return exportHome(request, env);
    }
    const exchange = env.EXCHANGE.get(env.EXCHANGE.idFromName("exchange"));
    if (request.method !== "GET") {
      // The caller first (a key, a link, the operator key), in a call without the body, as the
      // native exchange checks it before it reads a byte: nobody without one makes the
      // exchange take a body in. (Answering the body's own call unread would leave the
      // runtime feeding a stream nobody reads.)
      const headers = new Headers(request.headers);
      headers.set(AUTHORIZE_ONLY, "1");
      const verdict = await exchange.fetch(new Request(request.url, { method: request.method, headers }));
      if (verdict.status !== 204) {
        await discard(request);
        return verdict;
      }
      // The request itself never carries the check's mark, whoever set it.
      const forwarded = new Headers(request.headers);
      forwarded.delete(AUTHORIZE_ONLY);
      return exchange.fetch(new Request(request, { headers: forwarded }));
    }
    return exchange.fetch(request);
  },
};

// `GET /export` with the operator key: every thread file in R2 as one listing of
// `{key, text}` entries (JSON lines), which `mess` can write out as a home.
async function exportHome(request, env) {
  const key = (request.headers.get("authorization") || "").replace(/^Bearer /, "");
  const operator = env.MESS_OPERATOR_KEY || "";
  if (!operator || operator.length < 16 || !(await sameSecret(key, operator))) {
    return Response.json(
      { error: { code: "unauthorized", message: "GET /export takes the operator key" } },
      { status: 401 },
    );
  }
  const lines = [];
  let cursor;
  do {
    const page = await env.THREADS.list({ cursor });
    for (const object of page.objects) {
      const body = await env.THREADS.get(object.key);
      if (body) lines.push(JSON.stringify({ key: object.key, text: await body.text() }));
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return new Response(lines.join("\n") + (lines.length ? "\n" : ""), {
    headers: { "content-type": "application/x-ndjson" },
  });
}

async function sameSecret(a, b) {
  const digest = async (s) => new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(s)));
  const [x, y] = [await digest(a), await digest(b)];
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
  return diff === 0;
}
