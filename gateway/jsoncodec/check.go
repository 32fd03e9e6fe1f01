package jsoncodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// object is a JSON object as the check reads it: its members in the order they were written,
// so that of several faults the first one written is reported, the same one on every call.
type object struct {
	names  []string
	values []any
}

// parseJSON reads one JSON value for the check: objects as *object, arrays as []any, numbers
// as json.Number. Nesting is bounded by MaxDepth whatever ran before it (the envelope is not
// part of v, so data's object is level 1).
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 1)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, level int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return tok, nil
	}
	if level > MaxDepth {
		return nil, errTooDeep
	}
	switch d {
	case '{':
		obj := &object{}
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseValue(dec, level+1)
			if err != nil {
				return nil, err
			}
			obj.names = append(obj.names, name.(string))
			obj.values = append(obj.values, v)
		}
		_, err := dec.Token() // }
		return obj, err
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := parseValue(dec, level+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ]
		return arr, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// checkJSON compares data's parsed value with the message it is meant to fill and returns a
// message naming the first field of the wrong type ("data.userIds must be an array of
// strings.") or the first unknown field that is a near miss of a known one (nearmiss.go), in
// the order written; "" when it finds neither. protojson's own errors name fields in a format it
// reserves the right to change, so callers get ours. Other unknown fields are ignored, as the
// decoders ignore them.
func checkJSON(path string, v any, md protoreflect.MessageDescriptor) string {
	return checker{types: true}.message(path, v, md, 1)
}

// nearMissIn is checkJSON for near misses only: for a body protojson accepted, whose types
// are right (and where checkJSON's stricter rules, 64-bit integers within 2^53, do not apply).
func nearMissIn(path string, v any, md protoreflect.MessageDescriptor) string {
	return checker{types: false}.message(path, v, md, 1)
}

// checker walks a parsed value beside a message descriptor.
type checker struct {
	types bool // report values of the wrong type, not only near misses
}

// wrong is msg, a value of the wrong type, when the checker reports those.
func (c checker) wrong(msg string) string {
	if c.types {
		return msg
	}
	return ""
}

// message checks v, at the given level of nesting, against md. The walk is bounded by MaxDepth
// of its own, whatever parsed v.
func (c checker) message(path string, v any, md protoreflect.MessageDescriptor, level int) string {
	if level > MaxDepth {
		return errTooDeep.Error()
	}
	if wk := wellKnown(path, v, md); wk != "-" {
		return c.wrong(wk)
	}
	obj, ok := v.(*object)
	if !ok {
		return c.wrong(path + " must be an object.")
	}
	fields := md.Fields()
	for i, name := range obj.names {
		val := obj.values[i]
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(name))
		}
		if fd == nil {
			if hint := nearMiss(md, name); hint != "" {
				return nearMissMessage(path+"."+name, hint)
			}
			continue
		}
		if val == nil && !isValueMessage(fd) {
			continue
		}
		if msg := c.field(path+"."+name, val, fd, level+1); msg != "" {
			return msg
		}
	}
	return ""
}

func isValueMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
}

// field checks the value of field fd, at the given level.
func (c checker) field(path string, v any, fd protoreflect.FieldDescriptor, level int) string {
	if level > MaxDepth && (fd.IsMap() || fd.IsList()) {
		return errTooDeep.Error()
	}
	switch {
	case fd.IsMap():
		obj, ok := v.(*object)
		if !ok {
			return c.wrong(path + " must be an object.")
		}
		for i, k := range obj.names {
			item := obj.values[i]
			if item == nil && !isValueMessage(fd.MapValue()) {
				if msg := c.wrong(fmt.Sprintf("%s.%s must not be null.", path, k)); msg != "" {
					return msg
				}
				continue
			}
			if msg := c.single(path+"."+k, item, fd.MapValue(), level+1); msg != "" {
				return msg
			}
		}
		return ""
	case fd.IsList():
		arr, ok := v.([]any)
		if !ok {
			return c.wrong(fmt.Sprintf("%s must be an array of %s.", path, plural(fd)))
		}
		for i, item := range arr {
			p := fmt.Sprintf("%s[%d]", path, i)
			if item == nil && !isValueMessage(fd) {
				if msg := c.wrong(p + " must not be null."); msg != "" {
					return msg
				}
				continue
			}
			if msg := c.single(p, item, fd, level+1); msg != "" {
				return msg
			}
		}
		return ""
	default:
		return c.single(path, v, fd, level)
	}
}

// single checks one value of fd's kind (a list element or map value included).
func (c checker) single(path string, v any, fd protoreflect.FieldDescriptor, level int) string {
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		return c.message(path, v, fd.Message(), level)
	}
	return c.wrong(checkScalar(path, v, fd))
}

// checkScalar checks a value of a kind other than a message.
func checkScalar(path string, v any, fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if _, ok := v.(string); !ok {
			return path + " must be a string."
		}
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			return path + " must be a boolean."
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return checkInteger(path, v, math.MinInt32, math.MaxInt32)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return checkInteger(path, v, 0, math.MaxUint32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return checkInteger(path, v, -(1 << 53), 1<<53)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return checkInteger(path, v, 0, 1<<53)
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		if _, ok := number(v); !ok {
			return path + " must be a number."
		}
	case protoreflect.EnumKind:
		switch e := v.(type) {
		case string:
			if fd.Enum().Values().ByName(protoreflect.Name(e)) == nil {
				return fmt.Sprintf("%s has an unknown value %q.", path, e)
			}
		default:
			if msg := checkInteger(path, v, math.MinInt32, math.MaxInt32); msg != "" {
				return msg
			}
		}
	case protoreflect.BytesKind:
		if _, ok := v.(string); !ok {
			return path + " must be a base64 string."
		}
	}
	return ""
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case string:
		// protojson accepts numbers in strings; so do we.
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil
	}
	return 0, false
}

func checkInteger(path string, v any, min, max float64) string {
	f, ok := number(v)
	if !ok || f != math.Trunc(f) {
		return path + " must be an integer."
	}
	if f < min || f > max {
		return fmt.Sprintf("%s is out of range.", path)
	}
	return ""
}

func plural(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return "strings"
	case protoreflect.BoolKind:
		return "booleans"
	case protoreflect.MessageKind:
		if fd.Message().FullName() == "google.protobuf.Value" {
			return "values"
		}
		return "objects"
	default:
		return "numbers"
	}
}

// wellKnown checks the well-known types protojson maps to other JSON shapes; "-" means md is
// an ordinary message.
func wellKnown(path string, v any, md protoreflect.MessageDescriptor) string {
	switch md.FullName() {
	case "google.protobuf.Value":
		return ""
	case "google.protobuf.Struct":
		if _, ok := v.(*object); !ok {
			return path + " must be an object."
		}
		return ""
	case "google.protobuf.ListValue":
		if _, ok := v.([]any); !ok {
			return path + " must be an array."
		}
		return ""
	case "google.protobuf.StringValue":
		if _, ok := v.(string); !ok {
			return path + " must be a string."
		}
		return ""
	case "google.protobuf.BoolValue":
		if _, ok := v.(bool); !ok {
			return path + " must be a boolean."
		}
		return ""
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue":
		if _, ok := number(v); !ok {
			return path + " must be a number."
		}
		return ""
	case "google.protobuf.Int32Value":
		return checkInteger(path, v, math.MinInt32, math.MaxInt32)
	case "google.protobuf.UInt32Value":
		return checkInteger(path, v, 0, math.MaxUint32)
	case "google.protobuf.Int64Value", "google.protobuf.UInt64Value":
		return checkInteger(path, v, -(1 << 53), 1<<53)
	case "google.protobuf.BytesValue":
		if _, ok := v.(string); !ok {
			return path + " must be a base64 string."
		}
		return ""
	case "google.protobuf.Any":
		// {"@type": ..., ...}: its fields depend on the type named; protojson checks them.
		if _, ok := v.(*object); !ok {
			return path + " must be an object."
		}
		return ""
	case "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask":
		if _, ok := v.(string); !ok {
			return path + " must be a string."
		}
		return ""
	}
	return "-"
}
