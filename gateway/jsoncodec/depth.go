package jsoncodec

import "strconv"

// MaxDepth is how deeply arrays and objects may nest in a request: data's object is level 1,
// an array or object in one of its fields level 2, and so on; the envelope around data does not
// count. docs/api.md states the same rule.
//
// Every reader of request JSON recurses on nesting: this package's fast decoder, its type
// check, encoding/json, protojson, and proto.Unmarshal in the service behind the gateway (a
// Struct level is two messages there). Without a bound of our own, a body of a few MiB of "["
// cost hundreds of MB of stack, and a deep Struct was refused by the service's decoder as an
// internal error. The API's own messages nest a few levels; free-form values (Struct, Value)
// have no need of more than this.
const MaxDepth = 64

// maxOpen is MaxDepth counted as the scan counts: the containers open at once, the envelope
// included.
const maxOpen = MaxDepth + 1

var errTooDeep = refuse("Request body is nested too deeply: at most " + strconv.Itoa(MaxDepth) + " levels.")

// checkDepth refuses a body whose arrays and objects nest deeper than MaxDepth. It is one
// linear pass that keeps no stack and allocates nothing, so a refused body costs no more than
// its size, whatever its depth; it runs before anything parses the body. It counts brackets
// outside strings and does not check the syntax: the parsers after it do.
func checkDepth(body []byte) error {
	open := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			// Skip the string, escapes included, so brackets in it do not count.
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if open++; open > maxOpen {
				return errTooDeep
			}
		case ']', '}':
			if open > 0 {
				open--
			}
		}
	}
	return nil
}
