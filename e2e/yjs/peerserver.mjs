// A peer sync server for the cross-server live-sync benchmark (syncbench.mjs), so our server's
// numbers can be set beside other Yjs servers run on the same machine:
//
//   node peerserver.mjs --kind hocuspocus|ywebsocket
//
// listens on 127.0.0.1 on a free port and prints {"port":N,"pid":P} as its first line (P is this
// process, whose /proc/P/status VmRSS is the server's memory); exits when stdin ends. Nothing else
// is printed on stdout; the servers' own warnings go to stderr.
//
//   ywebsocket  @y/websocket-server's setupWSConnection, unchanged (in-memory documents, gc on,
//               no persistence, no auth): the plain y-websocket protocol. The room is the whole
//               URL path without the leading slash: a WebsocketProvider with the url
//               ws://127.0.0.1:N and the room "org/doc/editor" opens the document
//               "org/doc/editor".
//   hocuspocus  @hocuspocus/server's Server with the default configuration (no extensions, no
//               auth hook; broadcasts batched per event-loop turn): its own protocol, every
//               message prefixed with the document name, so its clients must be
//               @hocuspocus/provider's HocuspocusProvider (url ws://127.0.0.1:N, name = the
//               document name).

import * as http from 'node:http'
import { parseArgs } from 'node:util'

let kind
try {
  ({ values: { kind } } = parseArgs({ options: { kind: { type: 'string' } } }))
} catch (e) {
  kind = undefined
  console.error(e.message)
}
if (kind !== 'hocuspocus' && kind !== 'ywebsocket') {
  console.error('usage: node peerserver.mjs --kind hocuspocus|ywebsocket')
  process.exit(2)
}

const ready = port => process.stdout.write(JSON.stringify({ port, pid: process.pid }) + '\n')

if (kind === 'ywebsocket') {
  const { WebSocketServer } = await import('ws')
  const { setupWSConnection } = await import('@y/websocket-server/utils')
  const server = http.createServer((_req, res) => {
    res.writeHead(404, { 'Content-Type': 'text/plain' })
    res.end('not found\n')
  })
  const wss = new WebSocketServer({ noServer: true })
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, ws => setupWSConnection(ws, req))
  })
  server.listen(0, '127.0.0.1', () => ready(server.address().port))
} else {
  const { Server } = await import('@hocuspocus/server')
  // stopOnSignals stays at its default (true): SIGINT/SIGTERM close the connections and exit.
  const server = new Server({ port: 0, address: '127.0.0.1', quiet: true })
  await server.listen()
  ready(server.address.port)
}

process.stdin.on('data', () => {})
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
