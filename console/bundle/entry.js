// The playground's one bundle (console/static/vendor/yjs.js, written by scripts/generate):
// Yjs, y-websocket's client provider and y-protocols' awareness, one copy of each, as an ES
// module the page imports (docs/console.md, "Libraries").
export * as Y from 'yjs';
export { WebsocketProvider } from 'y-websocket';
export { Awareness } from 'y-protocols/awareness';
