package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"

	"github.com/collab/collab/gateway/jsoncodec"
)

// MaxBodyBytes is the largest request body the gateway reads.
const MaxBodyBytes = 4 << 20

// MaxBodyBytesInFlight bounds the request bodies the gateway reads and holds at once, all
// requests of the process together (docs/operations.md, "HTTP listener").
const MaxBodyBytesInFlight = 128 << 20

// bodyBudget is what is left of the bytes of request bodies the gateway may hold at once: each
// request takes its body's share before its body is read and gives it back when it is
// answered, so many connections sending large bodies hold at most the budget, not 4 MiB each
// for as long as the server's read timeout (issue 20, attack pass 26).
type bodyBudget struct{ left atomic.Int64 }

func newBodyBudget(n int64) *bodyBudget {
	b := &bodyBudget{}
	b.left.Store(n)
	return b
}

// take reserves n bytes, or reports false when fewer are left.
func (b *bodyBudget) take(n int64) bool {
	for {
		left := b.left.Load()
		if left < n {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

func (b *bodyBudget) give(n int64) {
	if n != 0 {
		b.left.Add(n)
	}
}

// bodyCharge is what a request's body takes from the budget: its declared length, or the most
// the gateway reads (MaxBodyBytes) when it declares none (chunked, HTTP/2) or more.
func bodyCharge(contentLength int64) int64 {
	if contentLength < 0 || contentLength > MaxBodyBytes {
		return MaxBodyBytes
	}
	return contentLength
}

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

// sizedBody is a request's body with its declared length (-1: none), which readBody reads into
// a buffer of that size.
type sizedBody struct {
	io.ReadCloser
	size int64
}

// readBody reads a request's body. A body of declared length is read into a buffer of exactly
// that length: io.ReadAll's buffer, grown as the body comes, reached 5.5 MiB for a body of 4, more
// than the body's share of MaxBodyBytesInFlight.
func readBody(r io.Reader) ([]byte, error) {
	b, ok := r.(*sizedBody)
	if !ok || b.size < 0 || b.size > MaxBodyBytes {
		return io.ReadAll(r)
	}
	body := make([]byte, b.size)
	if _, err := io.ReadFull(b, body); err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

func (c *envelopeCodec) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		body, err := readBody(r)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return fmt.Errorf("Request body is larger than %d MiB.", MaxBodyBytes>>20)
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
