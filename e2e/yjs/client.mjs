// A scriptable y-websocket client for end-to-end tests of our sync server
// (internal/testkit/yjstest.StartClient):
//
//   node client.mjs <serverUrl> <room> <token> [--no-reconnect]
//
// e.g. node client.mjs ws://127.0.0.1:PORT/v2/crdt/sync org/doc/editor TOKEN connects to
// ws://127.0.0.1:PORT/v2/crdt/sync/org/doc/editor?token=TOKEN with y-websocket's
// WebsocketProvider (no BroadcastChannel). --no-reconnect: after the first close the provider
// gives up instead of reconnecting (by default it reconnects, with backoff, except after close
// codes 4400-4499).
//
// Commands, one JSON object per line on stdin (values may use view.mjs's {"$bytes": base64} and
// {"$undefined": true}):
//   {"cmd":"insertText","root":"content","index":0,"text":"hi","attributes":{...}?}
//   {"cmd":"deleteText","root":..,"index":..,"length":..}
//   {"cmd":"formatText","root":..,"index":..,"length":..,"attributes":{...}}
//   {"cmd":"setMap","root":..,"key":..,"value":..}      {"cmd":"deleteMap","root":..,"key":..}
//   {"cmd":"insertArray","root":..,"index":..,"values":[..]}
//   {"cmd":"deleteArray","root":..,"index":..,"length":..}
//   {"cmd":"applyUpdate","update":B}     apply an update (base64 v1) as a local change
//   {"cmd":"awareness","state":{...}}    set the local awareness state (null clears it)
//   {"cmd":"view","roots":R}             → {"event":"view","view":VIEW}
//   {"cmd":"state"}                      → {"event":"state","update":B,"stateVector":B}
//   {"cmd":"disconnect"} / {"cmd":"connect"}
//   {"cmd":"close"}                      destroy the provider and exit
// Events, one JSON object per line on stdout:
//   {"event":"status","status":"connected"|"disconnected"}
//   {"event":"synced"}                   the first sync step 2 after connecting
//   {"event":"update","origin":"remote"|"local","update":B}   every change of the doc
//   {"event":"awareness","states":{"<clientID>": state}}      every awareness change (all states)
//   {"event":"permission-denied","reason":".."}   a y-websocket auth message (type 2)
//   {"event":"connection-error","message":".."}   e.g. a refused upgrade ("Unexpected server
//                                                 response: 401")
//   {"event":"close","code":N,"reason":"..","local":bool}   every closed connection (local: we
//                                                 closed it; code 0 then)
//   {"event":"closed","code":N,"reason":".."}     the provider stopped reconnecting
//   {"event":"error","error":".."}                a bad command
//   {"event":"exit"}                              the last event, before exiting
// The client exits when stdin ends or after "close".

import * as readline from 'node:readline'
import * as Y from 'yjs'
import { WebsocketProvider, messageAuth } from 'y-websocket'
import WebSocket from 'ws'
import * as decoding from 'lib0/decoding'
import { view, safe } from './view.mjs'

const args = process.argv.slice(2)
const noReconnect = args.includes('--no-reconnect')
const [serverUrl, room, token] = args.filter(a => a !== '--no-reconnect')
if (!serverUrl || room === undefined || token === undefined) {
  console.error('usage: node client.mjs <serverUrl> <room> <token> [--no-reconnect]')
  process.exit(2)
}

const emit = ev => process.stdout.write(JSON.stringify(ev) + '\n')

const ydoc = new Y.Doc()
const opts = { params: { token }, WebSocketPolyfill: WebSocket, connect: false, disableBc: true }
if (noReconnect) opts.shouldReconnect = () => false
const provider = new WebsocketProvider(serverUrl, room, ydoc, opts)

// y-websocket only logs a permission-denied auth message; report it instead.
provider.messageHandlers[messageAuth] = (_encoder, decoder) => {
  const type = decoding.readVarUint(decoder)
  if (type === 0) emit({ event: 'permission-denied', reason: decoding.readVarString(decoder) })
  else emit({ event: 'error', error: `unknown auth message type ${type}` })
}

provider.on('status', ({ status }) => {
  if (status === 'connected' || status === 'disconnected') emit({ event: 'status', status })
})
provider.on('synced', state => { if (state) emit({ event: 'synced' }) })
provider.on('connection-close', ev => {
  if (ev == null) emit({ event: 'close', code: 0, reason: '', local: true })
  else emit({ event: 'close', code: ev.code ?? 0, reason: String(ev.reason ?? ''), local: false })
})
provider.on('closed', ev => emit({ event: 'closed', code: ev.code ?? 0, reason: String(ev.reason ?? '') }))
provider.on('connection-error', ev => {
  emit({ event: 'connection-error', message: String(ev?.message ?? ev?.error?.message ?? ev?.type ?? ev) })
})
ydoc.on('update', (update, origin) => {
  emit({ event: 'update', origin: origin === provider ? 'remote' : 'local', update: Buffer.from(update).toString('base64') })
})
provider.awareness.on('change', () => {
  const states = {}
  for (const [client, state] of provider.awareness.getStates()) states[String(client)] = safe(state)
  emit({ event: 'awareness', states })
})

/** The inverse of view.mjs's safe for command values: {"$bytes"} and {"$undefined"}. */
function unsafe (v) {
  if (Array.isArray(v)) return v.map(unsafe)
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v)
    if (keys.length === 1 && keys[0] === '$bytes' && typeof v.$bytes === 'string') return new Uint8Array(Buffer.from(v.$bytes, 'base64'))
    if (keys.length === 1 && keys[0] === '$undefined' && v.$undefined === true) return undefined
    const out = {}
    for (const k of keys) out[k] = unsafe(v[k])
    return out
  }
  return v
}

function str (c, f) {
  if (typeof c[f] !== 'string') throw new Error(`${f}: want a string`)
  return c[f]
}

function int (c, f) {
  if (!Number.isInteger(c[f]) || c[f] < 0) throw new Error(`${f}: want a non-negative integer`)
  return c[f]
}

let exiting = false

function exit () {
  if (exiting) return
  exiting = true
  provider.destroy()
  emit({ event: 'exit' })
  // Let stdout drain, then go.
  process.stdout.write('', () => process.exit(0))
  setTimeout(() => process.exit(0), 1000).unref()
}

const commands = {
  insertText: c => ydoc.getText(str(c, 'root')).insert(int(c, 'index'), str(c, 'text'), c.attributes ?? undefined),
  deleteText: c => ydoc.getText(str(c, 'root')).delete(int(c, 'index'), int(c, 'length')),
  formatText: c => ydoc.getText(str(c, 'root')).format(int(c, 'index'), int(c, 'length'), c.attributes ?? {}),
  setMap: c => ydoc.getMap(str(c, 'root')).set(str(c, 'key'), unsafe(c.value)),
  deleteMap: c => ydoc.getMap(str(c, 'root')).delete(str(c, 'key')),
  insertArray: c => {
    if (!Array.isArray(c.values)) throw new Error('values: want an array')
    ydoc.getArray(str(c, 'root')).insert(int(c, 'index'), unsafe(c.values))
  },
  deleteArray: c => ydoc.getArray(str(c, 'root')).delete(int(c, 'index'), int(c, 'length')),
  applyUpdate: c => Y.applyUpdate(ydoc, new Uint8Array(Buffer.from(str(c, 'update'), 'base64'))),
  awareness: c => provider.awareness.setLocalState(c.state ?? null),
  view: c => {
    if (!Array.isArray(c.roots)) throw new Error('roots: want [{"name","kind"}]')
    emit({ event: 'view', view: view(ydoc, c.roots) })
  },
  state: () => emit({
    event: 'state',
    update: Buffer.from(Y.encodeStateAsUpdate(ydoc)).toString('base64'),
    stateVector: Buffer.from(Y.encodeStateVector(ydoc)).toString('base64')
  }),
  disconnect: () => provider.disconnect(),
  connect: () => provider.connect(),
  close: () => exit()
}

provider.connect()

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
rl.on('line', line => {
  if (exiting || line.trim() === '') return
  let c
  try {
    c = JSON.parse(line)
    if (c === null || typeof c !== 'object' || !Object.hasOwn(commands, c.cmd)) {
      throw new Error(`unknown command ${JSON.stringify(c?.cmd)} (${Object.keys(commands).join(', ')})`)
    }
    commands[c.cmd](c)
  } catch (e) {
    emit({ event: 'error', error: `${c?.cmd ?? 'command'}: ${e?.message ?? String(e)}` })
  }
})
rl.on('close', exit)
