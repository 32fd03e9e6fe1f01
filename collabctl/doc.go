// Package collabctl is the operator's command line (cmd/collabctl): it creates workspaces, keys
// and auth tokens, toggles workspace settings and calls any operation through the HTTP API,
// follows webhook delivery attempts, and reads the event relay's backlog from the processes'
// metrics listeners. Main is the whole program, so tests run it against a real process.
package collabctl
