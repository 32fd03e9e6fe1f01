package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"

	"github.com/collab/collab/gateway/jsoncodec"
)

// MaxBodyBytes is the largest request body the gateway reads.
const MaxBodyBytes = 4 << 20

// envelopeCodec is the grpc-gateway Marshaler of the API's envelopes: it reads the request
// message from the body's "data" object and writes responses as {"result": <message>}. The
// JSON itself is jsoncodec's; this adapter adds the body limit and grpc-gateway's interfaces.
type envelopeCodec struct{}

func newEnvelopeCodec() *envelopeCodec { return &envelopeCodec{} }

func (c *envelopeCodec) ContentType(any) string { return "application/json" }

// Marshal wraps a response message in {"result": ...}.
func (c *envelopeCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return json.Marshal(map[string]any{"result": v})
	}
	b, err := jsoncodec.Marshal(m, `{"result":`, "}")
	if err != nil {
		return nil, fmt.Errorf("marshal response: %w", err)
	}
	return b, nil
}

// Unmarshal reads a request body {"data": {...}} into the request message. grpc-gateway turns
// its error into INVALID_ARGUMENT with the error's text as the message.
func (c *envelopeCodec) Unmarshal(body []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return errors.New("request target is not a protobuf message")
	}
	return jsoncodec.Unmarshal(body, m)
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
