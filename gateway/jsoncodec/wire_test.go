package jsoncodec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	_ "github.com/collab/collab/proto/collab/documents/v1"
	_ "github.com/collab/collab/proto/collab/lifecycle/v1"
	_ "github.com/collab/collab/proto/collab/options/v1"
	_ "github.com/collab/collab/proto/collab/users/v1"
	_ "github.com/collab/collab/proto/collab/workspace/v1"
)

var reference = protojson.MarshalOptions{EmitUnpopulated: true}

// apiTypes is every message of the API.
func apiTypes(t testing.TB) []protoreflect.MessageType {
	t.Helper()
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if strings.HasPrefix(string(mt.Descriptor().FullName()), "collab.") {
			types = append(types, mt)
		}
		return true
	})
	if len(types) < 50 {
		t.Fatalf("only %d API message types registered", len(types))
	}
	return types
}

// allTypes is the test-only message set and every message of the API.
func allTypes(t testing.TB) []protoreflect.MessageType {
	leaf, kinds := testTypes(t)
	return append([]protoreflect.MessageType{leaf, kinds}, apiTypes(t)...)
}

// sameAsProtojson checks that our bytes are protojson's, byte for byte once protojson's
// deliberately random spaces are removed, or that both refuse. It reports whether both wrote.
func sameAsProtojson(t *testing.T, what string, want []byte, wantErr error, got []byte, gotErr error) bool {
	t.Helper()
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("%s: protojson error %v, ours %v\nprotojson %s\nours      %s", what, wantErr, gotErr, want, got)
	}
	if wantErr != nil {
		return false
	}
	if w := compact(t, want); w != string(got) {
		t.Fatalf("%s differs:\nprotojson %s\nours      %s", what, w, got)
	}
	return true
}

// Marshal writes exactly what protojson writes, for random messages of every kind of field in
// the test-only set and of every message of the API, decoded messages going through
// proto.Marshal and the wire encoder.
func TestMarshalMatchesProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	written, total := 0, 0
	for _, mt := range allTypes(t) {
		rounds := 60
		if mt.Descriptor().FullName().Parent() == testPackage {
			rounds = 300
		}
		for i := range rounds {
			m := mt.New()
			if i > 0 {
				fill(r, m, 3)
			}
			want, wantErr := reference.Marshal(m.Interface())
			got, gotErr := Marshal(m.Interface(), "", "")
			total++
			if sameAsProtojson(t, string(mt.Descriptor().FullName()), want, wantErr, got, gotErr) {
				written++
			}
		}
	}
	if written < total*3/4 {
		t.Fatalf("only %d of %d random messages could be written: the test hardly compares", written, total)
	}
}

// Wire bytes that repeat singular fields, mix packed and unpacked runs, switch oneof members,
// repeat map keys, carry unknown fields or fields of the wrong wire type: all valid protobuf,
// which a decoder merges. The wire encoder writes what protojson writes for the decoded result.
func TestWireMatchesDecodingOfOddBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	written, total := 0, 0
	for _, mt := range allTypes(t) {
		// Each round is three byte sequences of random messages; the test package's types
		// hold every kind of field, the API's repeat them (22 s under the race detector at 25
		// and 150 rounds, 9 s now; the fuzz targets look further).
		rounds := 10
		if mt.Descriptor().FullName().Parent() == testPackage {
			rounds = 60
		}
		md := mt.Descriptor()
		for range rounds {
			a, b := mt.New(), mt.New()
			fill(r, a, 3)
			fill(r, b, 3)
			wa, errA := proto.Marshal(a.Interface())
			wb, errB := proto.Marshal(b.Interface())
			if errA != nil || errB != nil {
				t.Fatalf("%s: %v %v", md.FullName(), errA, errB)
			}
			for _, wire := range [][]byte{
				append(append([]byte{}, wa...), wb...),
				reencode(r, md, wa),
				reencode(r, md, append(append([]byte{}, wa...), wb...)),
			} {
				decoded := mt.New().Interface()
				if err := proto.Unmarshal(wire, decoded); err != nil {
					t.Fatalf("%s: the test made invalid bytes: %v\n%x", md.FullName(), err, wire)
				}
				want, wantErr := reference.Marshal(decoded)
				got, gotErr := appendWireJSON(nil, md, wire)
				total++
				if sameAsProtojson(t, fmt.Sprintf("%s from %x", md.FullName(), wire), want, wantErr, got, gotErr) {
					written++
				}
			}
		}
	}
	if written < total/2 {
		t.Fatalf("only %d of %d byte sequences could be written: the test hardly compares", written, total)
	}
}

// reencode rewrites b, bytes of a message of type md, into other valid bytes: packed runs
// unpacked, split or kept; single elements packed; messages split into several occurrences;
// fields repeated; map entries with key and value reordered, repeated or missing; unknown
// field numbers and known numbers with a wire type that is not theirs.
func reencode(r *rand.Rand, md protoreflect.MessageDescriptor, b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			panic("reencode: invalid input")
		}
		field, val := b[:n+m], b[n:n+m]
		b = b[n+m:]
		if r.IntN(6) == 0 {
			out = appendJunk(r, md, out)
		}
		fd := md.Fields().ByNumber(num)
		times := 1
		if r.IntN(8) == 0 {
			times = 2
		}
		for range times {
			switch {
			case fd == nil:
				out = append(out, field...)
			case fd.IsList() && packable(fd) && typ == protowire.BytesType:
				content, _ := protowire.ConsumeBytes(val)
				out = repack(r, fd, content, out)
			case fd.IsList() && packable(fd) && r.IntN(3) == 0:
				// One element as a packed run of one.
				out = protowire.AppendTag(out, num, protowire.BytesType)
				out = protowire.AppendBytes(out, val)
			case fd.IsMap() && typ == protowire.BytesType:
				content, _ := protowire.ConsumeBytes(val)
				out = protowire.AppendTag(out, num, protowire.BytesType)
				out = protowire.AppendBytes(out, reencodeEntry(r, fd.Message(), content))
			case fd.Message() != nil && typ == protowire.BytesType:
				content, _ := protowire.ConsumeBytes(val)
				content = reencode(r, fd.Message(), content)
				if fd.IsList() || r.IntN(3) > 0 {
					out = protowire.AppendTag(out, num, protowire.BytesType)
					out = protowire.AppendBytes(out, content)
					break
				}
				// A singular message in two occurrences, which merge back into one.
				cut := fieldBoundary(r, content)
				out = protowire.AppendTag(out, num, protowire.BytesType)
				out = protowire.AppendBytes(out, content[:cut])
				out = protowire.AppendTag(out, num, protowire.BytesType)
				out = protowire.AppendBytes(out, content[cut:])
			default:
				out = append(out, field...)
			}
		}
	}
	if r.IntN(6) == 0 {
		out = appendJunk(r, md, out)
	}
	return out
}

func packable(fd protoreflect.FieldDescriptor) bool {
	s := newScalarSpec(fd)
	return s.packable()
}

// repack writes the numbers of a packed run (content) as single elements, as several runs, or
// as one run again.
func repack(r *rand.Rand, fd protoreflect.FieldDescriptor, content []byte, out []byte) []byte {
	wt := newScalarSpec(fd).wt
	var elems [][]byte
	for len(content) > 0 {
		var n int
		switch wt {
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(content)
		case protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(content)
		default:
			_, n = protowire.ConsumeFixed64(content)
		}
		elems = append(elems, content[:n])
		content = content[n:]
	}
	for len(elems) > 0 {
		k := 1 + r.IntN(len(elems))
		if r.IntN(2) == 0 {
			for _, e := range elems[:k] {
				out = protowire.AppendTag(out, fd.Number(), wt)
				out = append(out, e...)
			}
		} else {
			out = protowire.AppendTag(out, fd.Number(), protowire.BytesType)
			out = protowire.AppendBytes(out, bytes.Join(elems[:k], nil))
		}
		elems = elems[k:]
	}
	if r.IntN(10) == 0 {
		out = protowire.AppendTag(out, fd.Number(), protowire.BytesType)
		out = protowire.AppendBytes(out, nil) // an empty run
	}
	return out
}

// reencodeEntry rewrites a map entry: fields reordered, repeated or dropped, junk added.
func reencodeEntry(r *rand.Rand, md protoreflect.MessageDescriptor, b []byte) []byte {
	var fields [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		field := b[:n+m]
		if fd := md.Fields().ByNumber(num); fd != nil && fd.Message() != nil && typ == protowire.BytesType {
			content, _ := protowire.ConsumeBytes(b[n : n+m])
			field = protowire.AppendTag(nil, num, typ)
			field = protowire.AppendBytes(field, reencode(r, fd.Message(), content))
		}
		fields = append(fields, field)
		b = b[n+m:]
	}
	switch r.IntN(6) {
	case 0:
		slices.Reverse(fields)
	case 1:
		if len(fields) > 0 {
			fields = append(fields, fields[r.IntN(len(fields))])
		}
	case 2:
		if len(fields) > 0 {
			i := r.IntN(len(fields))
			fields = append(fields[:i], fields[i+1:]...)
		}
	case 3:
		// Not a key of the wrong wire type after a good one: proto's reflective decoder (which
		// decodes the dynamic test messages) panics on it, though the generated code's decoder
		// keeps the good key, as the wire encoder does.
		junk := appendJunk(r, md, nil)
		if num, _, _ := protowire.ConsumeTag(junk); num != 1 {
			fields = append(fields, junk)
		}
	}
	return bytes.Join(fields, nil)
}

// fieldBoundary is a random offset in b at which a field starts (or len(b)).
func fieldBoundary(r *rand.Rand, b []byte) int {
	offsets := []int{0}
	for off := 0; off < len(b); {
		_, _, _, _, end := next(b, off)
		off = end
		offsets = append(offsets, off)
	}
	return offsets[r.IntN(len(offsets))]
}

// appendJunk appends a field a decoder keeps as unknown: a number md does not have, or one it
// has with a wire type that is not the field's.
func appendJunk(r *rand.Rand, md protoreflect.MessageDescriptor, out []byte) []byte {
	num := protowire.Number(7777 + r.IntN(3))
	typ := []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type, protowire.BytesType}[r.IntN(4)]
	if fields := md.Fields(); fields.Len() > 0 && r.IntN(2) == 0 {
		fd := fields.Get(r.IntN(fields.Len()))
		p := planFor(md)
		f := &p.fields[fd.Index()]
		var wrong []protowire.Type
		for _, t := range []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type, protowire.BytesType} {
			if !f.accepts(t) {
				wrong = append(wrong, t)
			}
		}
		if len(wrong) > 0 {
			num, typ = fd.Number(), wrong[r.IntN(len(wrong))]
		}
	}
	out = protowire.AppendTag(out, num, typ)
	switch typ {
	case protowire.VarintType:
		return protowire.AppendVarint(out, r.Uint64()>>r.IntN(64))
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(out, r.Uint32())
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(out, r.Uint64())
	}
	// A packed-looking run, or bytes that are no message at all.
	return protowire.AppendBytes(out, []byte{0x08, 0x96, 0x01, 0xff}[:r.IntN(5)])
}

// Large messages (several MB) are written like protojson writes them.
func TestMarshalLargeMessages(t *testing.T) {
	leaf, kinds := testTypes(t)
	md := kinds.Descriptor()
	m := kinds.New()
	fields := md.Fields()
	strs := m.Mutable(fields.ByName("r_string")).List()
	for i := range 2000 {
		strs.Append(protoreflect.ValueOfString(strings.Repeat(string(rune('a'+i%26)), 1000) + "\n\"é"))
	}
	ints := m.Mutable(fields.ByName("p_int64")).List()
	doubles := m.Mutable(fields.ByName("u_double")).List()
	for i := range 100000 {
		ints.Append(protoreflect.ValueOfInt64(int64(i) * -7919))
		doubles.Append(protoreflect.ValueOfFloat64(float64(i) / 3))
	}
	byName := m.Mutable(fields.ByName("map_string_leaf")).Map()
	for i := range 20000 {
		l := leaf.New()
		l.Set(leaf.Descriptor().Fields().ByName("n"), protoreflect.ValueOfInt32(int32(i)))
		l.Set(leaf.Descriptor().Fields().ByName("s"), protoreflect.ValueOfString(fmt.Sprint("leaf ", i)))
		byName.Set(protoreflect.ValueOfString(fmt.Sprintf("k%07d", 20000-i)).MapKey(), protoreflect.ValueOfMessage(l))
	}
	want, wantErr := reference.Marshal(m.Interface())
	got, gotErr := Marshal(m.Interface(), "", "")
	if len(want) < 4<<20 {
		t.Fatalf("only %d bytes of JSON: not a large message", len(want))
	}
	sameAsProtojson(t, "large Kinds", want, wantErr, got, gotErr)
}

func TestWireRefusesBrokenBytes(t *testing.T) {
	_, kinds := testTypes(t)
	md := (&accessv1.GetPermissionsResponse{}).ProtoReflect().Descriptor()
	good, _ := proto.Marshal(&accessv1.GetPermissionsResponse{Status: "success", Data: map[string]*accessv1.UserPermissions{"u": {}}})
	pInt32 := kinds.Descriptor().Fields().ByName("p_int32").Number()
	for _, c := range []struct {
		md  protoreflect.MessageDescriptor
		b   []byte
		why string
	}{
		{md, good[:len(good)-1], "truncated"},
		{md, []byte{0xff}, "a tag cut short"},
		{md, []byte{0x0a, 0x05, 'a'}, "a length past the end"},
		{md, []byte{0x00, 0x01}, "field number 0"},
		{md, []byte{0x0c}, "an end-group without a start"},
		{kinds.Descriptor(), protowire.AppendBytes(protowire.AppendTag(nil, pInt32, protowire.BytesType), []byte{0x80}), "a packed run cut short"},
	} {
		if got, err := appendWireJSON(nil, c.md, c.b); err == nil {
			t.Errorf("%s (%x) accepted: %s", c.why, c.b, got)
		}
		if err := proto.Unmarshal(c.b, dynamicpb.NewMessage(c.md)); err == nil {
			t.Errorf("%s (%x): proto.Unmarshal accepts it, so should we", c.why, c.b)
		}
	}
}

// Bytes nested deeper than a decoder would decode are refused, not followed down.
func TestWireRefusesDeepNesting(t *testing.T) {
	leaf, _ := testTypes(t)
	child := leaf.Descriptor().Fields().ByName("child").Number()
	const depth = maxWireDepth + 2
	lengths := make([]int, depth+1) // lengths[k]: the bytes of a message with k levels under it
	for k := 1; k <= depth; k++ {
		lengths[k] = lengths[k-1] + protowire.SizeTag(child) + protowire.SizeBytes(lengths[k-1])
	}
	var b []byte
	for k := depth; k >= 1; k-- {
		b = protowire.AppendTag(b, child, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(lengths[k-1]))
	}
	if _, err := appendWireJSON(nil, leaf.Descriptor(), b); err == nil {
		t.Fatal("bytes nested past the decoders' limit accepted")
	}
	if err := proto.Unmarshal(b, leaf.New().Interface()); err == nil {
		t.Fatal("proto.Unmarshal decodes them: the test is not deep enough")
	}
}

// Every field of every message of the API (and of the messages they hold) is of a kind the
// wire encoder writes itself: none would fall back to protojson or fail.
func TestAPIMessagesAreWrittenFromWire(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor, report func(protoreflect.FieldDescriptor, string))
	walk = func(md protoreflect.MessageDescriptor, report func(protoreflect.FieldDescriptor, string)) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			if why := whyNotFromWire(fd); why != "" {
				report(fd, why)
			}
			if fd.Message() != nil {
				walk(fd.Message(), report)
			}
		}
	}
	for _, mt := range apiTypes(t) {
		walk(mt.Descriptor(), func(fd protoreflect.FieldDescriptor, why string) {
			t.Errorf("%s (in %s) uses %s: the wire encoder does not write it itself", fd.FullName(), mt.Descriptor().FullName(), why)
		})
	}
	if !seen["google.protobuf.Struct"] || !seen["google.protobuf.Value"] {
		t.Fatal("the walk did not reach the well-known types the API uses")
	}

	// The same walk does catch what it looks for.
	_, kinds := testTypes(t)
	clear(seen)
	var caught []string
	walk(kinds.Descriptor(), func(fd protoreflect.FieldDescriptor, _ string) { caught = append(caught, string(fd.Name())) })
	if strings.Join(caught, " ") != "any timestamp duration field_mask" {
		t.Fatalf("the walk caught %v in the test messages, want the four protojson types", caught)
	}
}
