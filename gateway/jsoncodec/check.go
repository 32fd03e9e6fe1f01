package jsoncodec

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// checkJSON compares a decoded JSON value with the message it is meant to fill and returns a
// message naming the first field of the wrong type ("data.userIds must be an array of
// strings."). protojson's own errors name fields in a format it reserves the right to change,
// so callers get ours. Unknown fields are ignored, as the decoder ignores them. v is data's
// value, at level 1 of MaxDepth.
func checkJSON(path string, v any, md protoreflect.MessageDescriptor) string {
	return checkMessage(path, v, md, 1)
}

// checkMessage checks v, at the given level of nesting, against md. The walk is bounded by
// MaxDepth of its own, whatever parsed v.
func checkMessage(path string, v any, md protoreflect.MessageDescriptor, level int) string {
	if level > MaxDepth {
		return errTooDeep.Error()
	}
	if wk := wellKnown(path, v, md); wk != "-" {
		return wk
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return path + " must be an object."
	}
	fields := md.Fields()
	for name, val := range obj {
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(name))
		}
		if fd == nil || val == nil && !isValueMessage(fd) {
			continue
		}
		if msg := checkField(path+"."+name, val, fd, level+1); msg != "" {
			return msg
		}
	}
	return ""
}

func isValueMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
}

// checkField checks the value of field fd, at the given level.
func checkField(path string, v any, fd protoreflect.FieldDescriptor, level int) string {
	if level > MaxDepth && (fd.IsMap() || fd.IsList()) {
		return errTooDeep.Error()
	}
	switch {
	case fd.IsMap():
		obj, ok := v.(map[string]any)
		if !ok {
			return path + " must be an object."
		}
		for k, item := range obj {
			if item == nil && !isValueMessage(fd.MapValue()) {
				return fmt.Sprintf("%s.%s must not be null.", path, k)
			}
			if msg := checkSingle(path+"."+k, item, fd.MapValue(), level+1); msg != "" {
				return msg
			}
		}
		return ""
	case fd.IsList():
		arr, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("%s must be an array of %s.", path, plural(fd))
		}
		for i, item := range arr {
			p := fmt.Sprintf("%s[%d]", path, i)
			if item == nil && !isValueMessage(fd) {
				return p + " must not be null."
			}
			if msg := checkSingle(p, item, fd, level+1); msg != "" {
				return msg
			}
		}
		return ""
	default:
		return checkSingle(path, v, fd, level)
	}
}

func checkSingle(path string, v any, fd protoreflect.FieldDescriptor, level int) string {
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
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessage(path, v, fd.Message(), level)
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
		if _, ok := v.(map[string]any); !ok {
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
		if _, ok := v.(map[string]any); !ok {
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
