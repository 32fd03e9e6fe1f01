package jsoncodec

import (
	"bytes"
	"strconv"
)

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
			// Skip the string, so that brackets in it do not count: its end is the next quote
			// not escaped, that is, after an even run of backslashes. (IndexByte is much
			// faster than a loop over the bytes, and strings are most of a body.)
			for {
				j := bytes.IndexByte(body[i+1:], '"')
				if j < 0 {
					return nil // an unterminated string: the parsers refuse it
				}
				i += 1 + j
				backslashes := 0
				for k := i - 1; body[k] == '\\'; k-- {
					backslashes++
				}
				if backslashes%2 == 0 {
					break
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
