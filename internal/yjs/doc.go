// Package yjs reads and writes Yjs documents: the update format v1 of the `yjs` npm package
// (13.6.x) on lib0's encodings, the integration algorithm that merges updates (YATA), reading
// a root type as JSON, and producing the update that makes a root hold new content. It also
// reads and writes the y-websocket protocol's frames.
//
// The npm package is the truth: e2e/yjs generates editing traces with it, and the tests hold
// this package to it (every trace reads as yjs reads it, our encodings load in yjs
// identically, our replacement updates give yjs exactly the new content, and yjs's edits on
// top of ours apply here identically). docs/crdt.md describes the format and the choices.
//
// # The model
//
// A Doc holds, for each client, its structs in clock order: items (content with the IDs of
// their left and right neighbours at creation, their origins) and GC structs (ranges whose
// content was collected). Items of one shared type form a doubly linked list in document
// order; a map's entries are lists per key whose last item is the current value. Integrating
// an item places it between its origins, ordering concurrent insertions at the same place by
// YATA's rules, exactly as yjs does, so every replica converges on the same order.
//
// Structs whose dependencies (origins, parent, earlier clocks of their client) have not
// arrived wait in the Doc and are integrated when they do; deletions of structs not yet seen
// wait likewise. After each change deleted content is garbage-collected (yjs's default) and
// adjacent structs merge, so memory follows the visible document, not its history of
// keystrokes.
//
// # Untrusted input
//
// Apply reads a whole update before it changes anything: malformed bytes wrap ErrMalformed and
// leave the Doc as it was. Counts are checked against the bytes left before anything is
// allocated for them, numbers beyond 2^53 are refused (no yjs encoder writes them), `any`
// values nest at most 100 deep, and views stop descending at 256 levels of nested types.
// Nothing panics on any input (FuzzApply, FuzzReadMessage). Bounding a document's total size
// is the caller's job (Size).
//
// A Doc is not safe for concurrent use.
package yjs
