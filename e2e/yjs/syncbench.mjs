// The load driver of the cross-server live-sync benchmark: one process holding every client, each
// with its own Y.Doc, editing the Y.Text "content". It drives our server (kind "ours") or a peer
// server (peerserver.mjs: "ywebsocket", "hocuspocus") the same way:
//
//   node syncbench.mjs fanout --kind K --url U --room R [--token T | --token-file F] [--readers 100]
//                             [--rate 400] [--seconds 10] [--warmup 2] [--concurrency 50] [--timeout 60]
//   node syncbench.mjs memory --kind K --url U --room-pattern P [--token T | --token-file F]
//                             [--docs 1000] [--text-bytes 5000] [--concurrency 50] [--timeout 60]
//   node syncbench.mjs selftest
//
// Tokens: --token T is presented by every client; --token-file F holds one token a line, and
// client i (fanout: 0 is the writer, 1..readers the readers; memory: document i) presents line
// i mod the number of lines. Our server admits at most 20 connections of one user (the token's
// subject) to a room, so a fanout of 100 readers needs tokens of several users.
//
// Kinds and their clients (connected over `ws`; no BroadcastChannel between them):
//   ours        y-websocket's WebsocketProvider(U, R, doc, {params: {token: T}}): with
//               U = ws://HOST/v2/crdt/sync and R = org/doc/editor it opens
//               ws://HOST/v2/crdt/sync/org/doc/editor?token=T
//   ywebsocket  the same client against peerserver.mjs --kind ywebsocket: U = ws://127.0.0.1:N, the
//               room is the document (--token optional, ignored by the server)
//   hocuspocus  @hocuspocus/provider's HocuspocusProvider({url: U, name: R, document: doc,
//               token: T}) against peerserver.mjs --kind hocuspocus (U = ws://127.0.0.1:N)
// Every provider keeps its defaults (awareness on, reconnecting); clients connect at most
// --concurrency at a time, each started when an earlier one has synced (its provider's "synced":
// the server's sync step 2 arrived). If they have not all synced within --timeout seconds the
// driver fails.
//
// fanout: latency of one writer's typing seen by --readers readers of the same room. After all
// have synced the writer appends one character to "content" every 1/rate s for warmup + seconds
// (a schedule on performance.now(): edit i is due at start + i/rate; when the writer falls behind
// it sends everything due at once). Edit i leaves the text base + i + 1 long (base: its length
// once synced; the room must be otherwise quiet), so a reader that sees the length L after any
// change has received every edit up to L - base - 1 (an update may carry several): its latency is
// the time it sees that length minus the time the writer sent it (one performance.now() clock).
// Only edits sent after the warmup count. After the last edit the driver waits up to 10 s for
// every reader to have every edit. Lines on stdout (newline-delimited JSON):
//   {"phase":"measuring","t":MS}   the first counted edit is being sent (t: Date.now(), epoch ms)
//   {"phase":"done","edits":E,"rate_target":R,"rate_achieved":A,"deliveries":D,"p50_ms":..,
//    "p95_ms":..,"p99_ms":..,"max_ms":..,"missing":M,"converged":BOOL,
//    "kind":K,"readers":N,"measure_ms":W,"writer_lag_max_ms":G,"client_cpu_pct":C,"disconnects":X}
//     E: counted edits (round(rate * seconds)); A: their rate as sent, E / W (R when the writer
//     kept to its schedule, less when it fell behind and did not catch up); D = E * N
//     deliveries expected; the percentiles and max over the deliveries received (nearest rank,
//     ms; null when none); M = D - received; converged: every reader's text equals the
//     writer's. Extra fields: W: the window the counted edits were sent in, ms from the first
//     one's scheduled time to the last one's sending plus one interval (1000 * seconds when on
//     schedule); G: how late behind its schedule the writer sent a counted edit at worst (ms);
//     C: this process's CPU (user + system) from the first counted edit to the end of the
//     drain, percent of one core (near 100 or above, GC and I/O threads included, means the
//     driver itself was a bottleneck: its readers share one event loop with the writer);
//     X: connections closed by the far end after syncing.
// Exit status 0 when the readers converged, whatever the latencies; 1 on errors (a client did
// not sync in time or was refused, the room was not quiet, the readers did not converge: then
// the done line is still printed), with the reason on stderr; 2 on a bad command line.
//
// memory: the server's memory per open document. Client i (i = 0 .. docs-1) holds a text of
// text-bytes ASCII characters (seeded per i, so every document differs; one local insert made
// before connecting) and opens the room P with every "{i}" replaced by i. When every client has
// synced it prints
//   {"phase":"synced","docs":N}
// (the server's step 2 arrived; the client sent its own step 2, its content, before that but the
// server may still be applying it: let it settle before reading its memory), then stays
// connected until stdin ends, closes every client and exits 0.
//
// selftest: starts peerserver.mjs (ywebsocket, then hocuspocus) and runs this script against it
// as a child process: fanout (5 readers, 50 edits/s, 1 s after 0.5 s of warmup, also as kind
// "ours" with a /v2/crdt/sync URL and a token against the ywebsocket server), memory (5 documents,
// checking the server holds each text with a client of its own) and a fanout with nothing
// listening (must fail); it checks every line of output and prints "selftest: ok" (exit 0) or
// what failed (exit 1).
//
// No per-event logging: readers do O(1) work per change plus O(1) per edit it carries.

import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import * as net from 'node:net'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'
import { Rng, seedFor } from './gen.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const KINDS = ['ours', 'ywebsocket', 'hocuspocus']
// At most this many latencies are kept (8 bytes each): edits * readers.
const MAX_DELIVERIES = 50_000_000
// How long after the last edit the readers may take to receive everything.
const DRAIN_MS = 10_000

const USAGE = `usage:
  node syncbench.mjs fanout --kind ours|ywebsocket|hocuspocus --url U --room R
                            [--token T | --token-file F] [--readers 100] [--rate 400]
                            [--seconds 10] [--warmup 2] [--concurrency 50] [--timeout 60]
  node syncbench.mjs memory --kind ours|ywebsocket|hocuspocus --url U --room-pattern P
                            [--token T | --token-file F] [--docs 1000] [--text-bytes 5000]
                            [--concurrency 50] [--timeout 60]
  node syncbench.mjs selftest`

class UsageError extends Error {}

function fail (message, code = 1) {
  process.stderr.write(`syncbench: ${message}\n`)
  process.exit(code)
}

const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n')
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const round3 = x => x == null ? null : Math.round(x * 1000) / 1000

/**
 * Parses argv for a mode: spec maps an option's name to {type: 'string'} or a number's limits
 * ({int, positive, min}), with default (a string) or required; throws UsageError.
 */
function options (argv, spec) {
  const parseSpec = {}
  for (const name of Object.keys(spec)) parseSpec[name] = { type: 'string' }
  let values
  try {
    ({ values } = parseArgs({ args: argv, options: parseSpec, strict: true, allowPositionals: false }))
  } catch (e) {
    throw new UsageError(e.message)
  }
  const out = {}
  for (const [name, s] of Object.entries(spec)) {
    const v = values[name] ?? s.default
    if (v === undefined) {
      if (s.required) throw new UsageError(`--${name} is required`)
      out[name] = undefined
      continue
    }
    if (s.type === 'string') {
      out[name] = String(v)
      continue
    }
    const n = Number(v)
    if (!Number.isFinite(n) || (s.int && !Number.isInteger(n)) || n < (s.min ?? -Infinity) || (s.positive && n <= 0)) {
      throw new UsageError(`--${name} ${v}: want ${s.int ? 'an integer' : 'a number'}${s.positive ? ' > 0' : s.min !== undefined ? ` >= ${s.min}` : ''}`)
    }
    out[name] = n
  }
  if (out.kind !== undefined && !KINDS.includes(out.kind)) {
    throw new UsageError(`--kind ${out.kind}: want one of ${KINDS.join(', ')}`)
  }
  return out
}

const common = {
  kind: { type: 'string', required: true },
  url: { type: 'string', required: true },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  concurrency: { int: true, positive: true, default: '50' },
  timeout: { positive: true, default: '60' }
}

/**
 * The token of client i: from --token, or line i mod n of --token-file's n lines, or undefined.
 * Throws UsageError when both are given or the file holds no token.
 */
function tokenOf (o) {
  if (o['token-file'] === undefined) return () => o.token
  if (o.token !== undefined) throw new UsageError('--token and --token-file: give one of them')
  let text
  try {
    text = fs.readFileSync(o['token-file'], 'utf8')
  } catch (e) {
    throw new UsageError(`--token-file: ${e.message}`)
  }
  const tokens = text.split('\n').map(l => l.trim()).filter(Boolean)
  if (tokens.length === 0) throw new UsageError(`--token-file ${o['token-file']}: no token in it`)
  return i => tokens[i % tokens.length]
}

let HocuspocusProvider // loaded on first use: a devDependency, only the hocuspocus kind needs it

/**
 * One client: a provider of the kind on doc, connecting at once. synced resolves on its first
 * sync; refused resolves with a reason when the server turned it away for good (y-websocket: a
 * close code 4400-4499, after which it stops reconnecting; Hocuspocus: authentication failed);
 * problem says the last connection trouble seen (for error messages); disconnects counts closes
 * by the far end after syncing.
 */
class Client {
  constructor (kind, url, room, token, doc) {
    this.doc = doc
    this.error = '' // the last WebSocket error ("connect ECONNREFUSED ...", "Unexpected server response: 401")
    this.close = '' // the last close by the far end
    this.disconnects = 0
    this.isSynced = false
    this.synced = new Promise(resolve => { this._resolveSynced = resolve })
    let refuse
    this.refused = new Promise(resolve => { refuse = resolve })
    const onSynced = () => {
      if (this.isSynced) return
      this.isSynced = true
      this._resolveSynced()
    }
    const onClose = (code, reason) => {
      this.close = `closed with code ${code}${reason ? ` (${reason})` : ''}`
      if (this.isSynced) this.disconnects++
    }
    // ws, recording its errors: neither provider passes their text on reliably.
    const client = this
    class TracedWebSocket extends WebSocket {
      constructor (...args) {
        super(...args)
        this.on('error', e => { client.error = String(e?.message ?? e) })
      }
    }
    if (kind === 'hocuspocus') {
      // Node 20 has no global WebSocket: the option is WebSocketPolyfill, as in y-websocket.
      this.provider = new HocuspocusProvider({ url, name: room, document: doc, token: token ?? null, WebSocketPolyfill: TracedWebSocket })
      this.provider.on('synced', onSynced)
      this.provider.on('close', ({ event }) => onClose(event?.code ?? 0, String(event?.reason ?? '')))
      this.provider.on('authenticationFailed', ({ reason }) => refuse(`authentication failed: ${reason}`))
    } else {
      this.provider = new WebsocketProvider(url, room, doc, {
        params: token !== undefined ? { token } : {},
        WebSocketPolyfill: TracedWebSocket,
        disableBc: true // clients in one process would otherwise sync over BroadcastChannel
      })
      this.provider.on('synced', state => { if (state) onSynced() })
      this.provider.on('connection-close', ev => { if (ev != null) onClose(ev.code ?? 0, String(ev.reason ?? '')) })
      this.provider.on('closed', () => refuse(`${this.close}, not reconnecting`))
    }
  }

  get problem () {
    return [this.error, this.close].filter(Boolean).join(', then ')
  }

  destroy () {
    try {
      this.provider.destroy()
    } catch {}
  }
}

/**
 * Starts count clients (make(i) → Client) at most concurrency at a time, each after an earlier
 * one synced; resolves with them when all have synced, fails the process after timeoutS or as
 * soon as a client is refused.
 */
async function connectAll (count, make, { concurrency, timeoutS, where }) {
  const clients = []
  let next = 0
  let synced = 0
  const worker = async () => {
    while (next < count) {
      const i = next++
      const c = make(i)
      clients.push(c)
      const why = await Promise.race([c.synced, c.refused])
      if (!c.isSynced) fail(`client ${i} was refused (${where}): ${why}`)
      synced++
    }
  }
  let timer
  const deadline = new Promise(resolve => { timer = setTimeout(resolve, timeoutS * 1000) })
  const all = Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  const done = await Promise.race([all.then(() => true), deadline.then(() => false)])
  clearTimeout(timer)
  if (!done) {
    const trouble = clients.find(c => !c.isSynced && c.problem) ?? clients.find(c => c.problem)
    fail(`${synced} of ${count} clients synced within ${timeoutS} s (${where})` +
      (trouble ? `; e.g. ${trouble.problem}` : '; no connection error seen (the server accepted but did not answer the sync?)'))
  }
  return clients
}

async function loadKind (kind) {
  if (kind === 'hocuspocus' && !HocuspocusProvider) {
    ({ HocuspocusProvider } = await import('@hocuspocus/provider'))
  }
  process.setMaxListeners(0) // every WebsocketProvider adds a process 'exit' listener
}

/** Waits until pred() or timeoutMs; returns pred(). */
async function waitFor (pred, timeoutMs, stepMs = 20) {
  const until = performance.now() + timeoutMs
  while (!pred() && performance.now() < until) await sleep(stepMs)
  return pred()
}

async function fanout (argv) {
  const o = options(argv, {
    ...common,
    room: { type: 'string', required: true },
    readers: { int: true, positive: true, default: '100' },
    rate: { positive: true, default: '400' },
    seconds: { positive: true, default: '10' },
    warmup: { min: 0, default: '2' }
  })
  const token = tokenOf(o)
  await loadKind(o.kind)
  const total = Math.round(o.rate * (o.warmup + o.seconds)) // edits sent
  const first = Math.round(o.rate * o.warmup) // the first counted edit
  const E = total - first
  const N = o.readers
  if (E < 1) throw new UsageError(`--rate ${o.rate} --seconds ${o.seconds}: not one edit to count`)
  if (E * N > MAX_DELIVERIES) throw new UsageError(`${E} edits x ${N} readers: more than ${MAX_DELIVERIES} deliveries to keep`)

  const where = `${o.kind} at ${o.url}, room ${o.room}`
  const clients = await connectAll(N + 1, i => new Client(o.kind, o.url, o.room, token(i), new Y.Doc()),
    { concurrency: o.concurrency, timeoutS: o.timeout, where })
  const [writer, ...readers] = clients
  const wtext = writer.doc.getText('content')
  const base = wtext.length
  const texts = readers.map(r => r.doc.getText('content'))
  if (!await waitFor(() => texts.every(t => t.length === base), 5000)) {
    fail(`the readers' texts are not ${base} characters long like the writer's after syncing: is someone else editing room ${o.room}?`)
  }

  const sentAt = new Float64Array(total) // performance.now() when edit i was sent
  const latencies = new Float64Array(E * N)
  let received = 0
  const seen = new Int32Array(N) // per reader: how many edits it has
  readers.forEach((r, k) => {
    const text = texts[k]
    text.observe(() => {
      const have = text.length - base
      let i = seen[k]
      if (have <= i) return
      const now = performance.now()
      if (i < first) i = Math.min(first, have)
      for (; i < have; i++) latencies[received++] = now - sentAt[i]
      seen[k] = have
    })
  })

  // The writer: edit i is due at t0 + i * interval.
  const interval = 1000 / o.rate
  let next = 0
  let lagMax = 0
  let cpu0, wall0
  const t0 = performance.now()
  await new Promise(resolve => {
    const tick = () => {
      const now = performance.now()
      while (next < total && t0 + next * interval <= now) {
        if (next === first) {
          cpu0 = process.cpuUsage()
          wall0 = performance.now()
          emit({ phase: 'measuring', t: Date.now() })
        }
        const t = performance.now()
        sentAt[next] = t
        if (next >= first) lagMax = Math.max(lagMax, t - (t0 + next * interval))
        wtext.insert(base + next, String.fromCharCode(97 + next % 26))
        next++
      }
      if (next < total) setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()))
      else resolve()
    }
    tick()
  })
  await waitFor(() => seen.every(n => n >= total), DRAIN_MS)
  const cpu = process.cpuUsage(cpu0)
  const cpuPct = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0) * 100

  const want = wtext.toString()
  const converged = want.length === base + total && texts.every(t => t.toString() === want)
  const sorted = latencies.subarray(0, received).sort()
  const pct = q => received === 0 ? null : round3(sorted[Math.min(received - 1, Math.max(0, Math.ceil(q * received) - 1))])
  const measureMs = sentAt[total - 1] + interval - (t0 + first * interval)
  const disconnects = clients.reduce((s, c) => s + c.disconnects, 0)
  emit({
    phase: 'done',
    edits: E,
    rate_target: o.rate,
    rate_achieved: Math.round(E / measureMs * 1000 * 10) / 10,
    deliveries: E * N,
    p50_ms: pct(0.5),
    p95_ms: pct(0.95),
    p99_ms: pct(0.99),
    max_ms: received === 0 ? null : round3(sorted[received - 1]),
    missing: E * N - received,
    converged,
    kind: o.kind,
    readers: N,
    measure_ms: round3(measureMs),
    writer_lag_max_ms: round3(lagMax),
    client_cpu_pct: Math.round(cpuPct * 10) / 10,
    disconnects
  })
  for (const c of clients) c.destroy()
  if (disconnects > 0) process.stderr.write(`syncbench: ${disconnects} connections were closed by the server after syncing\n`)
  if (!converged) {
    const behind = readers.filter((_, k) => texts[k].toString() !== want).length
    fail(`${behind} of ${N} readers did not converge on the writer's text (${want.length} characters) within ${DRAIN_MS / 1000} s of the last edit`)
  }
  process.exit(0)
}

/** The text of memory client i: bytes characters, seeded by i. */
export function memoryText (i, bytes) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;\n'
  const rng = new Rng(seedFor(0x5eed, i))
  const buf = Buffer.alloc(bytes)
  for (let k = 0; k < bytes; k++) buf[k] = alphabet.charCodeAt(rng.int(alphabet.length))
  return buf.toString('latin1')
}

async function memory (argv) {
  const o = options(argv, {
    ...common,
    'room-pattern': { type: 'string', required: true },
    docs: { int: true, positive: true, default: '1000' },
    'text-bytes': { int: true, min: 0, default: '5000' }
  })
  const token = tokenOf(o)
  await loadKind(o.kind)
  const pattern = o['room-pattern']
  if (o.docs > 1 && !pattern.includes('{i}')) throw new UsageError(`--room-pattern ${pattern}: has no {i}, so every client would open the same room`)
  const stdinEnded = new Promise(resolve => {
    process.stdin.on('data', () => {})
    process.stdin.on('end', resolve)
    process.stdin.resume()
  })
  const clients = await connectAll(o.docs, i => {
    const doc = new Y.Doc()
    doc.getText('content').insert(0, memoryText(i, o['text-bytes']))
    return new Client(o.kind, o.url, pattern.replaceAll('{i}', String(i)), token(i), doc)
  }, { concurrency: o.concurrency, timeoutS: o.timeout, where: `${o.kind} at ${o.url}, rooms ${pattern}` })
  emit({ phase: 'synced', docs: clients.length })
  await stdinEnded
  for (const c of clients) c.destroy()
  process.exit(0)
}

// ---- selftest ----

/** Spawns node with args here; lines collects stdout lines as they come. */
function child (args, stdin = 'ignore') {
  const p = spawn(process.execPath, args, { cwd: here, stdio: [stdin, 'pipe', 'pipe'] })
  const c = { p, lines: [], stderr: '', waiters: [] }
  let buf = ''
  p.stdout.setEncoding('utf8')
  p.stdout.on('data', d => {
    buf += d
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      c.lines.push(buf.slice(0, nl))
      buf = buf.slice(nl + 1)
      for (const w of c.waiters.splice(0)) w()
    }
  })
  p.stderr.setEncoding('utf8')
  p.stderr.on('data', d => { c.stderr += d })
  c.exited = new Promise(resolve => p.on('exit', code => {
    for (const w of c.waiters.splice(0)) w()
    resolve(code)
  }))
  /** Resolves with the first line matching pred, or throws after ms. */
  c.line = async (pred, ms, what) => {
    const until = performance.now() + ms
    for (;;) {
      const l = c.lines.find(pred)
      if (l !== undefined) return l
      if (p.exitCode !== null || performance.now() > until) {
        throw new Error(`${what}: no such line within ${ms} ms (exit ${p.exitCode}; stdout ${JSON.stringify(c.lines)}; stderr ${c.stderr.trim()})`)
      }
      await Promise.race([new Promise(resolve => c.waiters.push(resolve)), sleep(Math.max(1, until - performance.now()))])
    }
  }
  return c
}

async function withTimeout (promise, ms, what) {
  let timer
  const t = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: still running after ${ms} ms`)), ms) })
  try {
    return await Promise.race([promise, t])
  } finally {
    clearTimeout(timer)
  }
}

function check (cond, what) {
  if (!cond) throw new Error(what)
}

function parseLines (lines, what) {
  return lines.map(l => {
    try {
      const v = JSON.parse(l)
      check(v !== null && typeof v === 'object' && !Array.isArray(v), `${what}: line ${l} is not a JSON object`)
      return v
    } catch (e) {
      throw new Error(`${what}: line ${JSON.stringify(l)} is not JSON: ${e.message}`)
    }
  })
}

async function selftestFanout (kind, url, room, ...extra) {
  const what = `fanout ${kind} ${url} ${extra.join(' ')}`
  const args = ['syncbench.mjs', 'fanout', '--kind', kind, '--url', url, '--room', room,
    '--readers', '5', '--rate', '50', '--seconds', '1', '--warmup', '0.5', '--timeout', '20', ...extra]
  const c = child(args)
  const code = await withTimeout(c.exited, 60_000, what)
  check(code === 0, `${what}: exit ${code}; stderr ${c.stderr.trim()}`)
  const out = parseLines(c.lines, what)
  check(out.length === 2 && out[0].phase === 'measuring' && out[1].phase === 'done', `${what}: want a measuring and a done line, got ${JSON.stringify(c.lines)}`)
  check(Number.isInteger(out[0].t) && Math.abs(out[0].t - Date.now()) < 60_000, `${what}: measuring t ${out[0].t} is not epoch ms`)
  const d = out[1]
  const nums = ['rate_achieved', 'p50_ms', 'p95_ms', 'p99_ms', 'max_ms', 'measure_ms', 'writer_lag_max_ms', 'client_cpu_pct']
  for (const k of nums) check(typeof d[k] === 'number' && d[k] >= 0, `${what}: ${k} ${d[k]} is not a number >= 0`)
  check(d.edits === 50 && d.rate_target === 50 && d.deliveries === 250 && d.readers === 5 && d.kind === kind, `${what}: counts ${JSON.stringify(d)}`)
  check(d.missing === 0 && d.converged === true && d.disconnects === 0, `${what}: not every delivery arrived: ${JSON.stringify(d)}`)
  check(d.p50_ms <= d.p95_ms && d.p95_ms <= d.p99_ms && d.p99_ms <= d.max_ms, `${what}: percentiles out of order: ${JSON.stringify(d)}`)
  check(d.rate_achieved > 0 && d.rate_achieved <= 50, `${what}: rate_achieved ${d.rate_achieved}, want at most the 50 asked for`)
  return d
}

async function selftestMemory (kind, url) {
  const what = `memory ${kind} ${url}`
  const pattern = 'selftest/mem-{i}/editor'
  const c = child(['syncbench.mjs', 'memory', '--kind', kind, '--url', url, '--room-pattern', pattern,
    '--docs', '5', '--text-bytes', '5000', '--timeout', '20'], 'pipe')
  try {
    const line = await c.line(l => l.includes('"synced"'), 30_000, what)
    check(c.lines.length === 1, `${what}: want one line, got ${JSON.stringify(c.lines)}`)
    const [s] = parseLines([line], what)
    check(s.phase === 'synced' && s.docs === 5, `${what}: ${line}`)
    // The server holds every text: a client of our own reads each room while they are open.
    await loadKind(kind)
    for (let i = 0; i < 5; i++) {
      const want = memoryText(i, 5000)
      const probe = new Client(kind, url, pattern.replaceAll('{i}', String(i)), undefined, new Y.Doc())
      const text = probe.doc.getText('content')
      await withTimeout(probe.synced, 10_000, `${what}: probe ${i}`)
      const ok = await waitFor(() => text.toString() === want, 5000)
      probe.destroy()
      check(ok, `${what}: room ${i} holds ${text.length} characters, not the client's 5000`)
    }
  } finally {
    c.p.stdin.end()
  }
  const code = await withTimeout(c.exited, 10_000, `${what}: after stdin ended`)
  check(code === 0, `${what}: exit ${code} after stdin ended; stderr ${c.stderr.trim()}`)
}

async function selftestRefused (kind) {
  // A port nothing listens on: the clients cannot connect, so the driver must fail.
  const port = await new Promise(resolve => {
    const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)) })
  })
  const what = `fanout ${kind} with nothing listening`
  const c = child(['syncbench.mjs', 'fanout', '--kind', kind, '--url', `ws://127.0.0.1:${port}`, '--room', 'a/b/c',
    '--readers', '2', '--rate', '10', '--seconds', '1', '--warmup', '0', '--timeout', '2'])
  const code = await withTimeout(c.exited, 20_000, what)
  check(code !== 0 && c.lines.length === 0, `${what}: exit ${code}, stdout ${JSON.stringify(c.lines)}`)
  check(/0 of 3 clients synced within 2 s/.test(c.stderr), `${what}: stderr ${JSON.stringify(c.stderr)}`)
  return c.stderr.trim()
}

async function selftest (argv) {
  if (argv.length > 0) throw new UsageError('selftest takes no options')
  const log = s => process.stdout.write(s + '\n')
  for (const kind of ['ywebsocket', 'hocuspocus']) {
    const srv = child(['peerserver.mjs', '--kind', kind], 'pipe')
    try {
      const first = await srv.line(() => true, 10_000, `peerserver ${kind}`)
      const [{ port, pid }] = parseLines([first], `peerserver ${kind}`)
      check(Number.isInteger(port) && pid === srv.p.pid, `peerserver ${kind}: first line ${first}`)
      const url = `ws://127.0.0.1:${port}`
      const d = await selftestFanout(kind, url, 'selftest/fanout/editor')
      log(`ok fanout ${kind}: p50 ${d.p50_ms} ms, p99 ${d.p99_ms} ms, ${d.deliveries} deliveries`)
      if (kind === 'ywebsocket') {
        // Our server's URL shape and a token (the y-websocket server takes the whole path as the room).
        const d2 = await selftestFanout('ours', `${url}/v2/crdt/sync`, 'selftest/ours/editor', '--token', 'tok')
        log(`ok fanout ours (against ywebsocket, /v2/crdt/sync + token): p50 ${d2.p50_ms} ms`)
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'syncbench-'))
        try {
          const file = path.join(dir, 'tokens')
          fs.writeFileSync(file, 'tok-a\ntok-b\n')
          const d3 = await selftestFanout('ours', `${url}/v2/crdt/sync`, 'selftest/tokens/editor', '--token-file', file)
          log(`ok fanout ours (against ywebsocket, --token-file of 2 tokens): p50 ${d3.p50_ms} ms`)
        } finally {
          fs.rmSync(dir, { recursive: true, force: true })
        }
      }
      await selftestMemory(kind, url)
      log(`ok memory ${kind}: 5 documents synced and held by the server`)
      const msg = await selftestRefused(kind)
      log(`ok fanout ${kind} refused: ${msg}`)
    } finally {
      srv.p.stdin.end()
    }
    const code = await withTimeout(srv.exited, 10_000, `peerserver ${kind} after stdin ended`)
    check(code === 0, `peerserver ${kind}: exit ${code}; stderr ${srv.stderr.trim()}`)
  }
  log('selftest: ok')
  process.exit(0)
}

const modes = { fanout, memory, selftest }
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [mode, ...argv] = process.argv.slice(2)
  if (!Object.hasOwn(modes, mode ?? '')) fail(`unknown mode ${JSON.stringify(mode ?? '')}\n${USAGE}`, 2)
  modes[mode](argv).catch(e => {
    if (e instanceof UsageError) fail(`${e.message}\n${USAGE}`, 2)
    fail(mode === 'selftest' ? `selftest failed: ${e.message}` : (e?.stack ?? String(e)))
  })
}
