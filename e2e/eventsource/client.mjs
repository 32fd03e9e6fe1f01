// A real EventSource client for end-to-end tests of Server-Sent Events streams (the comments
// live stream): the `eventsource` npm package (package.json pins it), the WHATWG EventSource a
// browser front end uses, with its own parsing, Last-Event-ID and reconnection.
// internal/testkit/ssetest starts it and drives it from Go tests.
// eventsource 3.0.7 is the newest release that runs on Node.js 18, the floor of the Node
// projects of e2e/ (internal/testkit/nodeproject.MinNodeMajor); 4.x has the same client and
// declares Node.js 20.
//
//   node client.mjs <url> [--header "Name: value"]... [--types t1,t2,...]
//
// Opens new EventSource(url) and listens, with addEventListener, to "message" and to each
// event type of --types (a front end listens to the types it knows). --header adds a request
// header to every request (e.g. Authorization), through the constructor's fetch option.
//
// Reports on stdout, one JSON object a line, in the order things happen:
//   {"event":"request","url":U,"lastEventId":H}  each request EventSource makes; H is the
//       Last-Event-ID header it sent (null for none): EventSource sends the id of the last
//       event it saw by itself when it reconnects.
//   {"event":"open"}                              the stream opened (200, text/event-stream).
//   {"event":"message","type":T,"id":I,"data":D}  an event a listener got: its type, its
//       lastEventId (the id: field, "" without one) and its data as a string.
//   {"event":"unlistened","type":T,"id":I,"data":D}  an event of a type nobody listens to
//       (EventSource dispatches it to no one; reported so that tests see unexpected types).
//   {"event":"error","code":C,"message":M,"readyState":R}  an error event: readyState 0
//       (CONNECTING) when EventSource will reconnect (the stream ended or the network
//       failed), 2 (CLOSED) when it gave up (a status other than 200, a wrong content type):
//       code is the HTTP status then.
//   {"event":"closed"}                            answered to the close command.
//   {"event":"fatal","message":M}                 a bad command line or command.
//
// Commands on stdin, one JSON object a line: {"cmd":"close"} closes the EventSource (no more
// reconnects), reports closed and exits. The client exits when its stdin ends, so it never
// outlives the test binary that started it.

import { createInterface } from "node:readline";
import { EventSource } from "eventsource";

function report(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function parseArgs(argv) {
  const out = { url: null, headers: {}, types: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--header") {
      const h = argv[++i] ?? "";
      const colon = h.indexOf(":");
      if (colon <= 0) throw new Error(`--header wants "Name: value", got ${JSON.stringify(h)}`);
      out.headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
    } else if (a === "--types") {
      out.types = (argv[++i] ?? "").split(",").filter((t) => t !== "");
    } else if (out.url === null && !a.startsWith("--")) {
      out.url = a;
    } else {
      throw new Error(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (out.url === null) throw new Error("usage: node client.mjs <url> [--header \"Name: value\"]... [--types t1,t2]");
  return out;
}

let args;
try {
  args = parseArgs(process.argv.slice(2));
} catch (e) {
  report({ event: "fatal", message: String(e.message ?? e) });
  process.exit(2);
}

const listened = new Set(["message", ...args.types]);

// Tap reports events that no listener takes; everything else goes through EventSource as is.
class Tap extends EventSource {
  dispatchEvent(ev) {
    if (ev instanceof MessageEvent && !listened.has(ev.type)) {
      report({ event: "unlistened", type: ev.type, id: ev.lastEventId, data: ev.data });
    }
    return super.dispatchEvent(ev);
  }
}

const es = new Tap(args.url, {
  fetch: (input, init) => {
    const headers = { ...(init?.headers ?? {}), ...args.headers };
    report({ event: "request", url: String(input), lastEventId: headers["Last-Event-ID"] ?? null });
    return fetch(input, { ...init, headers });
  },
});

es.addEventListener("open", () => report({ event: "open" }));
es.addEventListener("error", (ev) =>
  report({ event: "error", code: ev.code ?? null, message: ev.message ?? null, readyState: es.readyState }),
);
for (const type of listened) {
  es.addEventListener(type, (ev) => report({ event: "message", type: ev.type, id: ev.lastEventId, data: ev.data }));
}

function finish() {
  es.close();
  process.exit(0);
}

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    report({ event: "fatal", message: `command is not JSON: ${e.message}` });
    return;
  }
  if (cmd?.cmd === "close") {
    es.close();
    report({ event: "closed" });
    process.stdout.write("", finish);
    return;
  }
  report({ event: "fatal", message: `unknown command ${JSON.stringify(cmd?.cmd)}` });
});
rl.on("close", finish);
