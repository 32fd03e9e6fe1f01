package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// MaxBodyBytes is the largest request body the gateway reads.
const MaxBodyBytes = 4 << 20

// envelopeCodec is the grpc-gateway Marshaler of the API's envelopes: it reads the request
// message from the body's "data" object and writes responses as {"result": <message>}.
type envelopeCodec struct {
	in protojson.UnmarshalOptions
}

func newEnvelopeCodec() *envelopeCodec {
	return &envelopeCodec{
		in: protojson.UnmarshalOptions{DiscardUnknown: true},
	}
}

func (c *envelopeCodec) ContentType(any) string { return "application/json" }

// Marshal wraps a response message in {"result": ...}.
func (c *envelopeCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return json.Marshal(map[string]any{"result": v})
	}
	b, err := marshalJSON(m, `{"result":`, "}")
	if err != nil {
		return nil, fmt.Errorf("marshal response: %w", err)
	}
	return b, nil
}

// Unmarshal reads a request body {"data": {...}} into the request message. An empty body
// counts as {"data": {}}: several operations need no parameters.
func (c *envelopeCodec) Unmarshal(body []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return errors.New("request target is not a protobuf message")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if decodeFast(body, m) == nil {
		return nil
	}
	proto.Reset(m)
	return c.slowUnmarshal(body, m)
}

// slowUnmarshal decodes with protojson, and words what is wrong when it refuses.
func (c *envelopeCodec) slowUnmarshal(body []byte, m proto.Message) error {
	// Only the envelope is parsed here; protojson reads data straight into the message, and
	// the slower field-by-field check runs only to explain a refusal.
	dec := json.NewDecoder(bytes.NewReader(body))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return errors.New("Request body is not valid JSON.")
	}
	// Anything after the value must be white space only. (Decoder.More would miss a stray
	// "}" or "]".)
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case err == nil:
		return errors.New("Request body is not valid JSON: it holds more than one value.")
	case !errors.Is(err, io.EOF):
		return errors.New("Request body is not valid JSON.")
	}
	var obj map[string]json.RawMessage
	if top[0] != '{' || json.Unmarshal(top, &obj) != nil {
		return errors.New(`Request body must be a JSON object: {"data": {...}}.`)
	}
	data, present := obj["data"]
	if !present {
		return errors.New(`Request body must have a "data" object: {"data": {...}}.`)
	}
	if len(data) == 0 || data[0] != '{' {
		return errors.New("data must be an object.")
	}
	if err := c.in.Unmarshal(data, m); err != nil {
		proto.Reset(m)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var parsed any
		if dec.Decode(&parsed) == nil {
			if msg := checkJSON("data", parsed, m.ProtoReflect().Descriptor()); msg != "" {
				return errors.New(msg)
			}
		}
		// The types are right, so protojson refuses the value for its own reasons (a bad
		// base64 string, a field sent under both of its names, say).
		return errors.New("data holds a value of the wrong form for this operation.")
	}
	return nil
}

func (c *envelopeCodec) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		body, err := io.ReadAll(r)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return fmt.Errorf("Request body is larger than %d MiB.", MaxBodyBytes>>20)
			}
			return errors.New("Request body could not be read.")
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return io.EOF // the generated handlers treat EOF as "no body"
		}
		return c.Unmarshal(body, v)
	})
}

func (c *envelopeCodec) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v any) error {
		b, err := c.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}
