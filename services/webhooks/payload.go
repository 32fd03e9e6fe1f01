package webhooks

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
)

// errNotJSON is a payload value JSON cannot hold: a NaN or infinite timestamp, which a gRPC
// caller can send (in data, such numbers are written as the strings AsInterface gives them).
var errNotJSON = errors.New("a number JSON cannot hold")

// buildPayload is the payload of docs/webhooks.md, "Delivery": {event, actionType, source,
// data, webhookId, platform}. data is the event's data with its context (organizationId,
// documentId, targetEntityId, channel, actionUser, eventId, timestamp) added where the data
// does not set them; with protect (enableDataProtection), every "email" and the "name" of
// every object that names a user (has a "userId") are left out.
//
// It writes the JSON straight from the event's Struct, byte for byte what encoding/json makes
// of the same values as maps (keys sorted, <, > and & escaped, numbers as float64):
// buildPayload runs for every event a tenant's endpoints take, and the maps and reflection of
// json.Marshal were 40% of the allocations of a delivery to one endpoint
// (TestPayloadIsWhatJSONMarshalWrites and FuzzPayload hold it to encoding/json's bytes).
func buildPayload(d *eventsv1.Event, webhookID string, protect bool) ([]byte, error) {
	feature, action, _ := strings.Cut(d.GetType(), ".")
	b := make([]byte, 0, 256+proto64(d))
	b = append(b, `{"actionType":`...)
	b = appendString(b, action)
	b = append(b, `,"data":`...)
	b, err := appendData(b, d, protect)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"event":`...)
	b = appendString(b, d.GetType())
	b = append(b, `,"platform":"collab","source":`...)
	b = appendString(b, feature)
	b = append(b, `,"webhookId":`...)
	b = appendString(b, webhookID)
	return append(b, '}'), nil
}

// proto64 guesses the size of the event's data in JSON, for the buffer's first capacity.
func proto64(d *eventsv1.Event) int { return 64 * len(d.GetData().GetFields()) }

// contextKeys are the keys of the event's context in data, sorted.
var contextKeys = []string{"actionUser", "channel", "documentId", "eventId", "organizationId", "targetEntityId", "timestamp"}

// appendData writes data: the event's data and the context fields it does not set, in key
// order.
func appendData(b []byte, d *eventsv1.Event, protect bool) ([]byte, error) {
	fields := d.GetData().GetFields()
	var extra []string
	for _, k := range contextKeys {
		if _, set := fields[k]; !set {
			extra = append(extra, k)
		}
	}
	return appendObject(b, fields, extra, func(b []byte, k string) ([]byte, error) { return appendContext(b, d, k, protect) }, protect)
}

// appendObject writes an object of fields and of the extra keys (written by extraValue), all
// in key order, leaving out with protect every "email" and, when the object has a "userId",
// its "name".
func appendObject(b []byte, fields map[string]*structpb.Value, extra []string, extraValue func([]byte, string) ([]byte, error), protect bool) ([]byte, error) {
	keys := make([]string, 0, len(fields)+len(extra))
	for k := range fields {
		keys = append(keys, k)
	}
	keys = append(keys, extra...)
	slices.Sort(keys)
	_, isUser := fields["userId"]
	b = append(b, '{')
	first := true
	for _, k := range keys {
		if protect && (k == "email" || isUser && k == "name") {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(appendString(b, k), ':')
		var err error
		if v, ok := fields[k]; ok {
			b, err = appendValue(b, v, protect)
		} else {
			b, err = extraValue(b, k)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendContext writes the value of one of the event's context fields in data.
func appendContext(b []byte, d *eventsv1.Event, key string, protect bool) ([]byte, error) {
	switch key {
	case "actionUser":
		u := d.GetActionUser()
		if protect { // an object with a userId: its name and email go
			return append(appendString(append(b, `{"userId":`...), u.GetUserId()), '}'), nil
		}
		b = appendString(append(b, `{"email":`...), u.GetEmail())
		b = appendString(append(b, `,"name":`...), u.GetName())
		return append(appendString(append(b, `,"userId":`...), u.GetUserId()), '}'), nil
	case "timestamp":
		return appendFloat(b, d.GetTimestamp())
	case "channel":
		return appendString(b, d.GetChannel()), nil
	case "documentId":
		return appendString(b, d.GetDocumentId()), nil
	case "eventId":
		return appendString(b, d.GetId()), nil
	case "organizationId":
		return appendString(b, d.GetOrganizationId()), nil
	}
	return appendString(b, d.GetTargetEntityId()), nil // targetEntityId
}

// appendValue writes a value of the event's data as encoding/json writes what AsInterface
// makes of it.
func appendValue(b []byte, v *structpb.Value, protect bool) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		switch f := k.NumberValue; {
		case math.IsNaN(f):
			return append(b, `"NaN"`...), nil // as AsInterface gives them
		case math.IsInf(f, 1):
			return append(b, `"Infinity"`...), nil
		case math.IsInf(f, -1):
			return append(b, `"-Infinity"`...), nil
		}
		return appendFloat(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_StructValue:
		return appendObject(b, k.StructValue.GetFields(), nil, nil, protect)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, protect); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return append(b, "null"...), nil // a null, or a value of no kind
}

// appendFloat writes a number as encoding/json writes a float64: the shortest form that reads
// back the same, in exponent form below 1e-6 and from 1e21, the exponent without a leading 0.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errNotJSON
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes a JSON string as encoding/json does: ", \ and control characters
// escaped, <, > and & as \u003c, \u003e and \u0026, U+2028 and U+2029 escaped, and each byte
// of invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
