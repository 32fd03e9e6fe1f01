package jsoncodec

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

const tooDeep = "Request body is nested too deeply: at most 64 levels."

// arrays is n arrays nested in one another: n levels.
func arrays(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// objects is n objects nested in one another under the key "a", the innermost holding 1.
func objects(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

// values is n levels alternating arrays and objects, as Struct and Value take them: an array
// holding 1 and the next level, an object holding it under "k", down to the string "x".
func values(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i%2 == 1 {
			b.WriteString(`[1,`)
		} else {
			b.WriteString(`{"k":`)
		}
	}
	b.WriteString(`"x"`)
	for i := n; i >= 1; i-- {
		if i%2 == 1 {
			b.WriteByte(']')
		} else {
			b.WriteByte('}')
		}
	}
	return b.String()
}

type depthCase struct {
	name string
	mt   protoreflect.MessageType
	// body builds a body whose deepest array or object is at level n (data's object at 1).
	body func(n int) string
}

func depthCases() []depthCase {
	create := (&workspacev1.CreateWorkspaceRequest{}).ProtoReflect().Type()
	add := (&accessv1.AddPermissionsRequest{}).ProtoReflect().Type()
	return []depthCase{
		{"unknown field holding arrays", create, func(n int) string {
			return `{"data":{"ownerEmail":"a@b.co","x":` + arrays(n-1) + `}}`
		}},
		{"unknown field holding objects", create, func(n int) string {
			return `{"data":{"x":` + objects(n-1) + `,"name":"n"}}`
		}},
		{"beside data", create, func(n int) string {
			return `{"x":` + arrays(n) + `,"data":{}}`
		}},
		{"access context (a Struct)", add, func(n int) string {
			// data(1).permissions(2).context(3).access(4), then the field's value.
			return `{"data":{"user":{"userId":"u"},"permissions":{"context":{"access":{"k":` + values(n-4) + `}}}}}`
		}},
	}
}

// 64 levels are accepted, 65 refused with the depth message, by every path: the fast decoder
// (unknown fields), protojson (a Struct), and around data.
func TestUnmarshalDepthLimit(t *testing.T) {
	for _, c := range depthCases() {
		t.Run(c.name, func(t *testing.T) {
			if err := Unmarshal([]byte(c.body(MaxDepth)), c.mt.New().Interface()); err != nil {
				t.Fatalf("depth %d refused: %v\n%s", MaxDepth, err, c.body(MaxDepth))
			}
			for _, n := range []int{MaxDepth + 1, 20000} {
				err := Unmarshal([]byte(c.body(n)), c.mt.New().Interface())
				var ie *InputError
				if !errors.As(err, &ie) || err.Error() != tooDeep {
					t.Fatalf("depth %d: %v, want %q", n, err, tooDeep)
				}
			}
		})
	}
}

// The access context at depth 64 really reaches protojson and is decoded, so protojson's own
// limit sits above ours.
func TestUnmarshalDeepStructDecoded(t *testing.T) {
	var req accessv1.AddPermissionsRequest
	body := depthCases()[3].body(MaxDepth)
	if err := Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	v := req.GetPermissions().GetContext().GetAccess().GetFields()["k"]
	levels := 4
	for v != nil {
		levels++
		switch {
		case v.GetListValue() != nil:
			v = v.GetListValue().GetValues()[1]
		case v.GetStructValue() != nil:
			v = v.GetStructValue().GetFields()["k"]
		default:
			v = nil
			levels-- // the string at the bottom is no level
		}
	}
	if levels != MaxDepth {
		t.Fatalf("decoded %d levels, want %d", levels, MaxDepth)
	}
}

// Brackets in strings are no nesting; escaped quotes do not end a string.
func TestCheckDepthReadsStrings(t *testing.T) {
	deepText := strings.Repeat("[{", 100)
	for _, body := range []string{
		`{"data":{"name":"` + deepText + `"}}`,
		`{"data":{"name":"\"` + deepText + `\\"}}`,
		`{"data":{"` + deepText + `":1}}`,
		`]]]]{"data":{}}`, // stray closers do not lower the count below zero
	} {
		if err := checkDepth([]byte(body)); err != nil {
			t.Errorf("%.40s...: %v", body, err)
		}
	}
	if err := checkDepth([]byte(`{"data":{"name":"\"",` + `"x":` + arrays(MaxDepth) + `}}`)); err == nil {
		t.Error("an escaped quote hid the nesting after it")
	}
	if err := checkDepth([]byte(`]]]` + `{"data":{"x":` + arrays(MaxDepth) + `}}`)); err == nil {
		t.Error("stray closers hid the nesting after them")
	}
}

// The fast decoder bounds its own recursion, whatever ran before it.
func TestDecodeFastBoundsItsDepth(t *testing.T) {
	for _, c := range depthCases()[:3] {
		if err := decodeFast([]byte(c.body(MaxDepth+1)), c.mt.New().Interface()); !errors.Is(err, errTooDeep) {
			t.Errorf("%s: decodeFast at depth %d = %v, want errTooDeep", c.name, MaxDepth+1, err)
		}
		if err := decodeFast([]byte(c.body(MaxDepth)), c.mt.New().Interface()); err != nil {
			t.Errorf("%s: decodeFast at depth %d = %v", c.name, MaxDepth, err)
		}
	}
	body := hugeOpenBody()
	_, used := memoryUsedBy(func() {
		if err := decodeFast(body, &workspacev1.GetEmailVerificationStatusRequest{}); !errors.Is(err, errTooDeep) {
			t.Errorf("decodeFast on 4 MiB of [ = %v", err)
		}
	})
	if used > 1<<20 {
		t.Errorf("decodeFast took %d bytes to refuse", used)
	}
}

// So does the type check, which reads what encoding/json parsed.
func TestCheckJSONBoundsItsDepth(t *testing.T) {
	leaf, _ := testTypes(t)
	var v any = &object{}
	for range MaxDepth + 1 {
		v = &object{names: []string{"child"}, values: []any{v}}
	}
	if got := checkJSON("data", v, leaf.Descriptor()); got != tooDeep {
		t.Fatalf("checkJSON on %d levels = %q", MaxDepth+2, got)
	}
	v = &object{names: []string{"n"}, values: []any{"x"}}
	for range MaxDepth - 1 {
		v = &object{names: []string{"child"}, values: []any{v}}
	}
	if got := checkJSON("data", v, leaf.Descriptor()); !strings.HasSuffix(got, ".n must be an integer.") {
		t.Fatalf("checkJSON on %d levels = %q", MaxDepth, got)
	}
}

// hugeOpenBody is the attack: a body of 4 MiB whose data holds an unknown field opening arrays
// to the end.
func hugeOpenBody() []byte {
	const size = 4 << 20
	prefix := `{"data":{"x":`
	return []byte(prefix + strings.Repeat("[", size-len(prefix)))
}

// memoryUsedBy runs f and reports the bytes it allocated on the heap and how much the memory
// the process holds from the system grew (goroutine stacks included).
func memoryUsedBy(f func()) (allocated, grown uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if after.Sys > before.Sys {
		grown = after.Sys - before.Sys
	}
	return after.TotalAlloc - before.TotalAlloc, grown
}

// A refused deep body costs memory in proportion to its size, not its depth: 4 MiB of "[" used
// to cost hundreds of MB of stack in the fast decoder's skip.
func TestDeepBodyRefusalIsCheap(t *testing.T) {
	body := hugeOpenBody()
	var err error
	allocated, grown := memoryUsedBy(func() {
		err = Unmarshal(body, &workspacev1.GetEmailVerificationStatusRequest{})
	})
	if err == nil || err.Error() != tooDeep {
		t.Fatalf("Unmarshal = %v, want %q", err, tooDeep)
	}
	if allocated > uint64(len(body)) || grown > uint64(len(body)) {
		t.Fatalf("refusing a %d-byte body allocated %d bytes and grew the process by %d", len(body), allocated, grown)
	}
	if allocs := testing.AllocsPerRun(3, func() { _ = Unmarshal(body, &workspacev1.GetEmailVerificationStatusRequest{}) }); allocs > 2 {
		t.Fatalf("%v allocations to refuse it", allocs)
	}
}

// Deep bodies are refused before the message is touched.
func TestDeepBodyLeavesMessageEmpty(t *testing.T) {
	m := &workspacev1.CreateWorkspaceRequest{}
	if err := Unmarshal([]byte(`{"data":{"name":"n","x":`+arrays(MaxDepth+1)+`}}`), m); err == nil {
		t.Fatal("accepted")
	}
	if !proto.Equal(m, &workspacev1.CreateWorkspaceRequest{}) {
		t.Fatalf("message filled: %v", m)
	}
}
