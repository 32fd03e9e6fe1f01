// The reference y-websocket server (@y/websocket-server's setupWSConnection, unchanged), only
// for the self-test of client.mjs (internal/testkit/yjstest):
//
//   node refserver.mjs
//
// listens on 127.0.0.1 on a free port and prints {"port": N} as its first line; exits when
// stdin ends. The room is the whole path ("/v2/crdt/sync/org/doc/editor" → that document). To
// exercise the client's refusal handling it checks the token query parameter like a real server
// might: "deny" gets a y-websocket permission-denied auth message and then close code 4403;
// "reject" gets HTTP 401 instead of the WebSocket upgrade; anything else is let in.

import * as http from 'node:http'
import { WebSocketServer } from 'ws'
import * as encoding from 'lib0/encoding'
import { setupWSConnection } from '@y/websocket-server/utils'

const server = http.createServer((_req, res) => {
  res.writeHead(404, { 'Content-Type': 'text/plain' })
  res.end('not found\n')
})
const wss = new WebSocketServer({ noServer: true })

server.on('upgrade', (req, socket, head) => {
  const token = new URL(req.url, 'http://x').searchParams.get('token')
  if (token === 'reject') {
    socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
    return
  }
  wss.handleUpgrade(req, socket, head, ws => {
    if (token === 'deny') {
      const enc = encoding.createEncoder()
      encoding.writeVarUint(enc, 2) // messageAuth
      encoding.writeVarUint(enc, 0) // permission denied
      encoding.writeVarString(enc, 'token "deny" may not open this document')
      ws.send(encoding.toUint8Array(enc), () => ws.close(4403, 'forbidden'))
      return
    }
    setupWSConnection(ws, req)
  })
})

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n')
})

process.stdin.on('data', () => {})
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
