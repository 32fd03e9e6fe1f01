// A real webhook receiver for end-to-end tests of the webhook delivery engine. Every delivery is
// verified with the official `standardwebhooks` package, unchanged (package.json pins it), so a
// test passes only if a real Standard Webhooks consumer would accept what we send.
// internal/testkit/webhooktest starts it and drives it from Go tests.
//
// Listens on 127.0.0.1, port 0 (any free one); the first stdout line is {"port": N}. With
// --exit-on-stdin-close it exits when its stdin ends, so it never outlives the test binary that
// started it, even one killed before its cleanups ran.
//
// Control API (JSON in, JSON out; paths under /_control/ are never deliveries):
//   POST /_control/endpoint  {path, secrets: ["whsec_..."], privateKeyPem?, responses?: [
//                             {status, retryAfter?, delayMs?, hang?, body?}]}
//       Configures one receiving path (one webhook endpoint). Replaces the path's previous
//       configuration and restarts its responses; keeps what it already received. Responses
//       answer successive deliveries in order, the last one repeating; without any, 200.
//       retryAfter (seconds or an HTTP date) is sent as Retry-After; delayMs waits before
//       answering; hang never answers (a dead endpoint); body is sent as is (a string) or as
//       JSON (anything else).
//   GET  /_control/received?path=/p   {deliveries: [...]} in arrival order (see record below)
//   POST /_control/reset              forgets every endpoint and every delivery
//   POST /_control/sign  {secret, id, timestamp (unix seconds), body}  {signature}: what
//       new Webhook(secret).sign(id, date, body) produces (to compare other signers with it)
//
// Every other request is a delivery, recorded (even to an unconfigured path: verified false,
// verifyError "unknown path", answered 404) and then answered as configured. The path is the
// URL's path; the query string is recorded in url but does not select the endpoint.
//
// Verification: new Webhook(secret).verify(rawBody, headers) for each configured secret until
// one accepts. The library splits webhook-signature on single spaces, skips entries whose
// version is not "v1", and accepts when any v1 signature matches (constant-time compare), so
// during a secret rotation a header with the old and the new secret's signatures verifies
// against either secret alone. It checks the timestamp first (5 minutes tolerance either way),
// so a stale message fails with "Message timestamp too old" whatever its signatures. After a
// match it parses the body as JSON, so a signed body that is not JSON fails too
// ("SyntaxError: ..."). It signs the body decoded as UTF-8, so the sender must send UTF-8.
//
// Payload: the value verify returns (the body parsed as JSON), then decoded: a body object with
// a string encodedPayload is replaced by base64-decoding it and parsing the result as JSON; one
// with string encryptedData, encryptedKey and iv (all base64) is decrypted: RSA-OAEP with
// SHA-256 and the path's privateKeyPem unwraps the AES-256 key, AES-256-CBC with PKCS#7
// padding decrypts encryptedData with iv, and the plaintext is parsed as JSON. Only verified
// deliveries get a payload; a decoding failure leaves payload null and says why in
// payloadError.

import http from "node:http";
import crypto from "node:crypto";
import { Webhook } from "standardwebhooks";

const CONTROL = "/_control/";
const MAX_BODY = 16 << 20; // bytes; larger bodies are refused with 413 (and recorded)

/** @type {Map<string, {secrets: string[], privateKeyPem: string|null, responses: object[], next: number}>} */
let endpoints = new Map();
/** @type {Map<string, object[]>} */
let received = new Map();
let seq = 0;

class HTTPError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        tooLarge = true;
        chunks.length = 0;
      } else if (!tooLarge) {
        chunks.push(c);
      }
    });
    req.on("end", () => resolve({ body: Buffer.concat(chunks), tooLarge }));
    req.on("error", reject);
  });
}

function sendJSON(res, status, value) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

function parseJSON(buf) {
  try {
    return JSON.parse(buf.toString("utf8"));
  } catch (e) {
    throw new HTTPError(400, `body is not JSON: ${e.message}`);
  }
}

// ---- control API ----

function validateResponse(r, i) {
  if (r === null || typeof r !== "object" || Array.isArray(r)) {
    throw new HTTPError(400, `responses[${i}] is not an object`);
  }
  const status = r.status ?? 200;
  if (!Number.isInteger(status) || status < 100 || status > 999) {
    throw new HTTPError(400, `responses[${i}].status ${JSON.stringify(r.status)} is not an HTTP status`);
  }
  if (r.delayMs !== undefined && !(Number.isFinite(r.delayMs) && r.delayMs >= 0)) {
    throw new HTTPError(400, `responses[${i}].delayMs must be a number >= 0`);
  }
  if (r.retryAfter !== undefined && typeof r.retryAfter !== "string" && typeof r.retryAfter !== "number") {
    throw new HTTPError(400, `responses[${i}].retryAfter must be a number or a string`);
  }
  return {
    status,
    retryAfter: r.retryAfter === undefined || r.retryAfter === "" ? null : String(r.retryAfter),
    delayMs: r.delayMs ?? 0,
    hang: r.hang === true,
    body: r.body ?? null,
  };
}

function configure(cfg) {
  if (cfg === null || typeof cfg !== "object") throw new HTTPError(400, "expected a JSON object");
  const { path, secrets, privateKeyPem, responses } = cfg;
  if (typeof path !== "string" || !path.startsWith("/") || path.startsWith(CONTROL)) {
    throw new HTTPError(400, `path ${JSON.stringify(path)} must start with "/" and not with ${CONTROL}`);
  }
  if (!Array.isArray(secrets) || secrets.some((s) => typeof s !== "string")) {
    throw new HTTPError(400, "secrets must be an array of strings");
  }
  for (const s of secrets) {
    try {
      new Webhook(s);
    } catch (e) {
      throw new HTTPError(400, `secret refused by standardwebhooks: ${e.message}`);
    }
  }
  if (privateKeyPem !== undefined && privateKeyPem !== null) {
    if (typeof privateKeyPem !== "string") throw new HTTPError(400, "privateKeyPem must be a string");
    try {
      crypto.createPrivateKey(privateKeyPem);
    } catch (e) {
      throw new HTTPError(400, `privateKeyPem: ${e.message}`);
    }
  }
  if (responses !== undefined && responses !== null && !Array.isArray(responses)) {
    throw new HTTPError(400, "responses must be an array");
  }
  endpoints.set(path, {
    secrets: [...secrets],
    privateKeyPem: privateKeyPem ?? null,
    responses: (responses ?? []).map(validateResponse),
    next: 0,
  });
}

async function control(req, res, url) {
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case "POST /_control/endpoint": {
      const { body } = await readBody(req);
      configure(parseJSON(body));
      return sendJSON(res, 200, {});
    }
    case "GET /_control/received": {
      const path = url.searchParams.get("path");
      if (path === null) throw new HTTPError(400, "missing ?path=");
      return sendJSON(res, 200, { deliveries: received.get(path) ?? [] });
    }
    case "POST /_control/reset": {
      await readBody(req);
      endpoints = new Map();
      received = new Map();
      return sendJSON(res, 200, {});
    }
    case "POST /_control/sign": {
      const { body } = await readBody(req);
      const v = parseJSON(body);
      if (typeof v?.secret !== "string" || typeof v.id !== "string" || typeof v.body !== "string" ||
        !Number.isInteger(v.timestamp)) {
        throw new HTTPError(400, "expected {secret, id, timestamp (integer unix seconds), body (string)}");
      }
      let signature;
      try {
        signature = new Webhook(v.secret).sign(v.id, new Date(v.timestamp * 1000), v.body);
      } catch (e) {
        throw new HTTPError(400, e.message);
      }
      return sendJSON(res, 200, { signature });
    }
    default:
      throw new HTTPError(404, `no control route ${route}`);
  }
}

// ---- deliveries ----

function verify(endpoint, rawBody, headers) {
  const errors = [];
  for (const secret of endpoint.secrets) {
    try {
      const payload = new Webhook(secret).verify(rawBody, headers);
      return { verified: true, verifyError: "", payload };
    } catch (e) {
      const msg = e.name === "WebhookVerificationError" ? e.message : `${e.name}: ${e.message}`;
      if (!errors.includes(msg)) errors.push(msg);
    }
  }
  if (endpoint.secrets.length === 0) errors.push("no secrets configured for the path");
  return { verified: false, verifyError: errors.join("; "), payload: undefined };
}

function decodePayload(endpoint, value) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  if (typeof value.encodedPayload === "string") {
    const plain = Buffer.from(value.encodedPayload, "base64");
    return parsePlain(plain, "encodedPayload");
  }
  if (typeof value.encryptedData === "string" && typeof value.encryptedKey === "string" &&
    typeof value.iv === "string") {
    if (!endpoint.privateKeyPem) throw new Error("encrypted payload, but the path has no privateKeyPem");
    let key;
    try {
      key = crypto.privateDecrypt(
        { key: endpoint.privateKeyPem, padding: crypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" },
        Buffer.from(value.encryptedKey, "base64"),
      );
    } catch (e) {
      throw new Error(`encryptedKey: RSA-OAEP-SHA256 decryption failed: ${e.message}`);
    }
    if (key.length !== 32) throw new Error(`encryptedKey: unwrapped key is ${key.length} bytes, want 32 (AES-256)`);
    const iv = Buffer.from(value.iv, "base64");
    if (iv.length !== 16) throw new Error(`iv is ${iv.length} bytes, want 16`);
    let plain;
    try {
      const decipher = crypto.createDecipheriv("aes-256-cbc", key, iv); // PKCS#7 padding by default
      plain = Buffer.concat([decipher.update(Buffer.from(value.encryptedData, "base64")), decipher.final()]);
    } catch (e) {
      throw new Error(`encryptedData: AES-256-CBC decryption failed: ${e.message}`);
    }
    return parsePlain(plain, "encryptedData");
  }
  return value;
}

function parsePlain(buf, what) {
  try {
    return JSON.parse(buf.toString("utf8"));
  } catch (e) {
    throw new Error(`${what}: decoded data is not JSON: ${e.message}`);
  }
}

function pickResponse(endpoint) {
  if (!endpoint) return { status: 404, retryAfter: null, delayMs: 0, hang: false, body: "unknown path" };
  if (endpoint.responses.length === 0) return { status: 200, retryAfter: null, delayMs: 0, hang: false, body: null };
  const r = endpoint.responses[Math.min(endpoint.next, endpoint.responses.length - 1)];
  endpoint.next++;
  return r;
}

function header(headers, name) {
  const v = headers[name];
  return v === undefined ? "" : String(v);
}

async function deliver(req, res, url) {
  const receivedAtMs = Date.now();
  const { body: raw, tooLarge } = await readBody(req);
  const path = url.pathname;
  const endpoint = endpoints.get(path);
  const headers = {
    "webhook-id": header(req.headers, "webhook-id"),
    "webhook-timestamp": header(req.headers, "webhook-timestamp"),
    "webhook-signature": header(req.headers, "webhook-signature"),
    "content-type": header(req.headers, "content-type"),
  };
  const ts = Number.parseInt(headers["webhook-timestamp"], 10);
  const record = {
    seq: ++seq,
    id: headers["webhook-id"],
    timestamp: Number.isNaN(ts) ? 0 : ts,
    method: req.method,
    url: req.url,
    headers,
    body: raw.toString("utf8"),
    verified: false,
    verifyError: "",
    payload: null,
    payloadError: "",
    answeredStatus: 0, // what the receiver answers (or will, after delayMs); 0 for hang
    receivedAtMs,
    answeredAtMs: 0, // when the answer was written; 0 before that, and for ever if the client left
    clientClosed: false, // the client closed the connection before getting its answer
  };
  if (tooLarge) {
    record.verifyError = `body over ${MAX_BODY} bytes`;
  } else if (!endpoint) {
    record.verifyError = "unknown path";
  } else {
    const v = verify(endpoint, raw, req.headers);
    record.verified = v.verified;
    record.verifyError = v.verifyError;
    if (v.verified) {
      try {
        record.payload = decodePayload(endpoint, v.payload) ?? null;
      } catch (e) {
        record.payloadError = e.message;
      }
    }
  }
  const r = tooLarge ? { status: 413, retryAfter: null, delayMs: 0, hang: false, body: null } : pickResponse(endpoint);
  record.answeredStatus = r.hang ? 0 : r.status;
  if (!received.has(path)) received.set(path, []);
  received.get(path).push(record);

  res.on("close", () => {
    if (!res.writableFinished) record.clientClosed = true;
  });
  if (r.hang) return; // never answered; the connection stays open until the client leaves
  const answer = () => {
    if (res.destroyed || record.clientClosed) return;
    const h = {};
    if (r.retryAfter !== null) h["retry-after"] = r.retryAfter;
    let text = "";
    if (typeof r.body === "string") {
      text = r.body;
      h["content-type"] = "text/plain; charset=utf-8";
    } else if (r.body !== null) {
      text = JSON.stringify(r.body);
      h["content-type"] = "application/json";
    }
    h["content-length"] = Buffer.byteLength(text);
    res.writeHead(r.status, h);
    res.end(text, () => {
      record.answeredAtMs = Date.now();
    });
  };
  if (r.delayMs > 0) setTimeout(answer, r.delayMs);
  else answer();
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://receiver.invalid");
  const handler = url.pathname.startsWith(CONTROL) ? control : deliver;
  handler(req, res, url).catch((e) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendJSON(res, e instanceof HTTPError ? e.status : 500, { error: e.message });
  });
});
// Deliveries that hang or wait must not be cut short by Node's own timeouts.
server.requestTimeout = 0;
server.headersTimeout = 60_000;
server.keepAliveTimeout = 5_000;

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});

if (process.argv.includes("--exit-on-stdin-close")) {
  process.stdin.on("end", () => process.exit(0));
  process.stdin.on("error", () => process.exit(0));
  process.stdin.resume();
}
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
