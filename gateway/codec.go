package gateway

import (
	"bytes"
	"context"
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
	if a, ok := v.(*answer); ok {
		// Written from a pooled buffer, which the request gives back once the response is out.
		p, err := jsoncodec.MarshalPooled(a.msg, `{"result":`, "}")
		if err != nil {
			return nil, fmt.Errorf("marshal response: %w", err)
		}
		a.pool.keep(p)
		return p.JSON, nil
	}
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

// answer is a response on its way out of a request that returns the JSON's buffer to the
// codec's pool once written (responseBuffers). grpc-gateway passes it from the response rewriter
// to Marshal, the one place that sees both the request and the JSON.
type answer struct {
	msg  proto.Message
	pool *responseBuffers
}

// responseBuffers are the buffers a request's response was written from; ServeHTTP gives them
// back after the handler returned, when the ResponseWriter no longer holds them. A request
// writes one response: its buffer and its answer take no allocation of their own.
type responseBuffers struct {
	kept   []jsoncodec.Pooled
	first  [1]jsoncodec.Pooled
	answer answer
}

func (r *responseBuffers) keep(p jsoncodec.Pooled) {
	if r.kept == nil {
		r.kept = r.first[:0]
	}
	r.kept = append(r.kept, p)
}

func (r *responseBuffers) release() {
	for _, p := range r.kept {
		p.Release()
	}
	r.kept = r.kept[:0]
}

// pooledAnswers is the mux's response rewriter: responses of requests that carry an exchange
// (serve) go out as answers.
func pooledAnswers(ctx context.Context, resp proto.Message) (any, error) {
	if x, ok := ctx.Value(exchangeKey{}).(*exchange); ok && resp != nil {
		x.buffers.answer = answer{msg: resp, pool: &x.buffers}
		return &x.buffers.answer, nil
	}
	return resp, nil
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
		// Once decoded, the body's buffer is not used: its share of the bodies' budget goes
		// back before the call, not once it is answered (body.go).
		defer releaseBody(r)
		body, err := readBody(r)
		if err != nil {
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				return fmt.Errorf("Request body is larger than %d MiB.", MaxBodyBytes>>20)
			case errors.Is(err, errBodiesBusy):
				return errBodiesBusy // errorHandler answers 503 (the body's budgetedBody says so)
			}
			return errors.New("Request body could not be read.")
		}
		if err := c.Unmarshal(body, v); err != nil {
			return err
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return io.EOF // the generated handlers treat EOF as "no body"
		}
		return nil
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
