package jsoncodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// InputError is a refused request body. Its message is meant for the API's caller: it never
// carries protojson's or encoding/json's wording, which those packages may change.
type InputError struct{ Message string }

func (e *InputError) Error() string { return e.Message }

func refuse(message string) error { return &InputError{Message: message} }

// Unmarshal reads a request body {"data": {...}} into m. An empty body (or white space only)
// counts as {"data": {}}: several operations need no parameters. Then it applies the presence
// rules of m's fields (presence.go): a required field left out is refused, null fields are
// listed where the message asks. Every refusal is an *InputError.
func Unmarshal(body []byte, m proto.Message) error {
	if err := decode(body, m); err != nil {
		return err
	}
	if err := applyPresence(body, m.ProtoReflect()); err != nil {
		proto.Reset(m)
		return err
	}
	return nil
}

// decode reads body into m, the fast way when it can.
func decode(body []byte, m proto.Message) error {
	if len(bytes.TrimSpace(body)) == 0 {
		proto.Reset(m)
		return nil
	}
	// Before anything that recurses reads the body.
	if err := checkDepth(body); err != nil {
		return err
	}
	err := decodeFast(body, m)
	if err == nil {
		return nil
	}
	proto.Reset(m)
	if !errors.Is(err, errFallback) {
		return err
	}
	return slowUnmarshal(body, m)
}

// protojsonIn reads data the slow way. Its recursion limit is a backstop above MaxDepth
// (protojson counts a message per level, and one more for a scalar in a Value), so that the
// depth rule and its message stay checkDepth's.
var protojsonIn = protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: MaxDepth + 2}

// slowUnmarshal decodes with protojson, and words what is wrong when it refuses.
func slowUnmarshal(body []byte, m proto.Message) error {
	// Only the envelope is parsed here; protojson reads data straight into the message. The
	// slower field-by-field check runs only to explain a refusal, or where a quick scan finds
	// an unknown field that may be a near miss.
	dec := json.NewDecoder(bytes.NewReader(body))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return refuse("Request body is not valid JSON.")
	}
	// Anything after the value must be white space only. (Decoder.More would miss a stray
	// "}" or "]".)
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case err == nil:
		return refuse("Request body is not valid JSON: it holds more than one value.")
	case !errors.Is(err, io.EOF):
		return refuse("Request body is not valid JSON.")
	}
	var obj map[string]json.RawMessage
	if top[0] != '{' || json.Unmarshal(top, &obj) != nil {
		return refuse(`Request body must be a JSON object: {"data": {...}}.`)
	}
	data, present := obj["data"]
	if !present {
		return refuse(`Request body must have a "data" object: {"data": {...}}.`)
	}
	if len(data) == 0 || data[0] != '{' {
		return refuse("data must be an object.")
	}
	md := m.ProtoReflect().Descriptor()
	if err := protojsonIn.Unmarshal(data, m); err != nil {
		proto.Reset(m)
		if parsed, err := parseJSON(data); err == nil {
			if msg := checkJSON("data", parsed, md); msg != "" {
				return refuse(msg)
			}
		}
		// The types are right, so protojson refuses the value for its own reasons (a bad
		// base64 string, a field sent under both of its names, say).
		return refuse("data holds a value of the wrong form for this operation.")
	}
	// protojson ignores every unknown field; a near miss of a known one must not be. A quick
	// scan tells whether there may be one; the check, which reads the tree, finds and words it.
	if scan := (&fastDecoder{b: data}); !scan.nearMissAhead(md) {
		return nil
	}
	parsed, err := parseJSON(data)
	if err != nil {
		proto.Reset(m)
		return refuse("data holds a value of the wrong form for this operation.")
	}
	if msg := nearMissIn("data", parsed, md); msg != "" {
		proto.Reset(m)
		return refuse(msg)
	}
	return nil
}
