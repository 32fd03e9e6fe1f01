package gateway

import _ "embed"

// HTTPRules is http_rules.yaml, every route of the API, as built into the binary: clients such
// as collabctl resolve a method's name to its path from it without a copy of their own.
//
//go:embed http_rules.yaml
var HTTPRules []byte
