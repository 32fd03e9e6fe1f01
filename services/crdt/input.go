package crdt

import (
	"encoding/base64"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
	"github.com/collab/collab/internal/yjs"
)

// Limits (docs/api.md "CRDT"). Every request is checked whole before anything is read or
// written.
const (
	defaultContentKey = "content"
	// maxDataBytes bounds the JSON content of Add and Update (the HTTP body's 4 MiB bounds it
	// already; this holds for gRPC callers too).
	maxDataBytes = 4 << 20
	// maxUpdateBytes bounds one Yjs update of Apply, decoded.
	maxUpdateBytes = 4 << 20
	// maxStateBytes bounds an editor's state, so that one editor always fits in a Get answer
	// (8 MiB between services), as JSON and as base64 alike. The same bound holds on every
	// path that changes it: Add, Update, Apply and live sync.
	maxStateBytes = 5 << 20
	// maxDocMemory bounds the memory of an editor's document while a caller's update is
	// applied to it: the structs a 5 MiB state may hold can take forty times that (yjs.Limits).
	maxDocMemory = 64 << 20
	// maxEditors bounds Get without editorId.
	maxEditors = 1000
	// maxEventContentBytes bounds the content a crdt.update_data event carries.
	maxEventContentBytes = 64 << 10
)

// Formats of Get CRDT Data.
const (
	formatJSON = "json"
	formatYjs  = "yjs"
)

// Messages the caller sees (docs/api.md, "CRDT").
const (
	msgAdded        = "CRDT data added successfully."
	msgUpdated      = "CRDT data updated successfully."
	msgRetrieved    = "CRDT data retrieved successfully."
	msgApplied      = "CRDT update applied successfully."
	msgDeleted      = "CRDT data deleted successfully."
	msgExists       = "CRDT data already exists for this editor ID."
	msgNoData       = "No CRDT data found for this editor ID."
	msgOrgMissing   = "Organization does not exist."
	msgDocMissing   = "Document does not exist."
	msgTypes        = "type must be one of text, map, array, xml."
	msgOtherType    = "The editor's content at contentKey %q is of type %s; update it with type %s."
	msgNotMap       = "The editor's content at contentKey %q is a text, array or xml (emptied); update it with its type."
	msgBadUpdate    = "update is not a valid Yjs update."
	msgBadSV        = "stateVector is not a valid Yjs state vector."
	msgTooManyEds   = "The document has more than 1000 editors; ask for one editorId at a time."
	msgAnswerTooBig = "The answer is larger than 8 MiB; ask for one editorId at a time."
)

// Refusals of a change too large: the editor's state would pass maxStateBytes, its document
// maxDocMemory, or the update waits for too many others.
const (
	msgStateTooBig  = "The editor's CRDT data would be larger than 5 MiB after this change."
	msgStateTooMany = "The editor's CRDT data would be split into too many pieces after this change (more than 64 MiB in memory)."
	msgTooManyWait  = "The update depends on too many updates this editor has not received."
	msgTooComplex   = "update is too costly to integrate; send its changes in smaller updates."
)

// untrusted are the limits of a caller's Yjs update (Apply CRDT Update); live sync gives its
// clients' updates the same.
var untrusted = yjs.Limits{MaxEncoded: maxStateBytes, MaxSize: maxDocMemory}

// applyRefusal words the codec's refusal of a caller's update (yjs.Doc.ApplyUntrusted); other
// errors (the caller's context ended) go as they are.
func applyRefusal(err error) error {
	switch {
	case errors.Is(err, yjs.ErrEncodedTooLarge):
		return apierr.FailedPrecondition(msgStateTooBig)
	case errors.Is(err, yjs.ErrMemoryTooLarge):
		return apierr.FailedPrecondition(msgStateTooMany)
	case errors.Is(err, yjs.ErrTooManyPending):
		return apierr.FailedPrecondition(msgTooManyWait)
	case errors.Is(err, yjs.ErrTooComplex):
		return apierr.InvalidArgument(msgTooComplex)
	case errors.Is(err, yjs.ErrMalformed):
		return apierr.InvalidArgument(msgBadUpdate)
	}
	return err
}

// location is the checked organization, document and editor of a request.
type location struct {
	org, doc, editor string
}

func checkLocation(org, doc, editor string, editorRequired bool) (location, error) {
	if err := validate.ID("organizationId", org); err != nil {
		return location{}, err
	}
	if err := validate.ID("documentId", doc); err != nil {
		return location{}, err
	}
	check := validate.OptionalID
	if editorRequired {
		check = validate.ID
	}
	if err := check("editorId", editor); err != nil {
		return location{}, err
	}
	return location{org: org, doc: doc, editor: editor}, nil
}

// parseType reads a type; "" is refused when required, else means "not given" (ok false).
func parseType(v string, required bool) (k yjs.Kind, ok bool, err error) {
	if v == "" {
		if required {
			return 0, false, apierr.InvalidArgument("type is required.")
		}
		return 0, false, nil
	}
	k, ok = yjs.ParseKind(v)
	if !ok {
		return 0, false, apierr.InvalidArgument(msgTypes)
	}
	return k, true, nil
}

func checkContentKey(v string) (string, error) {
	if v == "" {
		return defaultContentKey, nil
	}
	if err := validate.ID("contentKey", v); err != nil {
		return "", err
	}
	return v, nil
}

// content is the checked content of Add or Update.
type content struct {
	location
	kind  yjs.Kind
	key   string
	value any // as encoding/json decodes it
}

// checkContent checks Add and Update: the location, the type, the data against the type (the
// spec's messages), the content key.
func checkContent(org, doc, editor string, data *structpb.Value, typ, contentKey string) (*content, error) {
	loc, err := checkLocation(org, doc, editor, true)
	if err != nil {
		return nil, err
	}
	kind, _, err := parseType(typ, true)
	if err != nil {
		return nil, err
	}
	if data == nil || data.GetKind() == nil {
		return nil, apierr.InvalidArgument("data is required.")
	}
	var fits bool
	switch kind {
	case yjs.Text, yjs.XML:
		_, fits = data.GetKind().(*structpb.Value_StringValue)
	case yjs.Map:
		_, fits = data.GetKind().(*structpb.Value_StructValue)
	case yjs.Array:
		_, fits = data.GetKind().(*structpb.Value_ListValue)
	}
	if !fits {
		return nil, apierr.InvalidArgument("Data must be %s for type %s.", shapeOf(kind), kind)
	}
	if proto.Size(data) > maxDataBytes {
		return nil, apierr.InvalidArgument("data must be at most %d MiB.", maxDataBytes>>20)
	}
	key, err := checkContentKey(contentKey)
	if err != nil {
		return nil, err
	}
	return &content{location: loc, kind: kind, key: key, value: data.AsInterface()}, nil
}

// shapeOf names the JSON shape a type's data has, as the spec's messages do.
func shapeOf(k yjs.Kind) string {
	switch k {
	case yjs.Map:
		return "an object"
	case yjs.Array:
		return "an array"
	default:
		return "a string"
	}
}

// replaceRefusal words a refusal of the caller's content by the codec: too large for the
// document's memory (as an update past it is), or not fitting its type (valueRefusal).
func replaceRefusal(k yjs.Kind, err error) error {
	if errors.Is(err, yjs.ErrMemoryTooLarge) {
		return apierr.FailedPrecondition(msgStateTooMany)
	}
	return valueRefusal(k, err)
}

// valueRefusal words a refusal of the codec (yjs.ErrValue: the value does not fit the type, or
// XML that does not parse).
func valueRefusal(k yjs.Kind, err error) error {
	return apierr.InvalidArgument("Data is not valid for type %s: %s.", k, strings.TrimSuffix(err.Error(), "."))
}

// reading is a checked Get CRDT Data request.
type reading struct {
	location
	kind        yjs.Kind
	kindGiven   bool
	key         string // "" when not given
	format      string
	stateVector []byte
}

func checkGet(org, doc, editor, typ, contentKey, format, stateVector string) (*reading, error) {
	loc, err := checkLocation(org, doc, editor, false)
	if err != nil {
		return nil, err
	}
	r := &reading{location: loc}
	if r.kind, r.kindGiven, err = parseType(typ, false); err != nil {
		return nil, err
	}
	if contentKey != "" {
		if r.key, err = checkContentKey(contentKey); err != nil {
			return nil, err
		}
	}
	switch format {
	case "", formatJSON:
		r.format = formatJSON
	case formatYjs:
		r.format = formatYjs
	default:
		return nil, apierr.InvalidArgument("format must be json or yjs.")
	}
	if stateVector != "" {
		if r.format != formatYjs {
			return nil, apierr.InvalidArgument("stateVector is only allowed with format yjs.")
		}
		if r.stateVector, err = decodeBase64(stateVector); err != nil {
			return nil, apierr.InvalidArgument("stateVector must be base64.")
		}
	}
	return r, nil
}

// checkApply checks Apply CRDT Update and returns the decoded update.
func checkApply(org, doc, editor, update string) (location, []byte, error) {
	loc, err := checkLocation(org, doc, editor, true)
	if err != nil {
		return location{}, nil, err
	}
	if update == "" {
		return location{}, nil, apierr.InvalidArgument("update is required.")
	}
	if base64.StdEncoding.DecodedLen(len(update)) > maxUpdateBytes+3 {
		return location{}, nil, apierr.InvalidArgument("update must be at most %d MiB.", maxUpdateBytes>>20)
	}
	raw, err := decodeBase64(update)
	if err != nil {
		return location{}, nil, apierr.InvalidArgument("update must be base64.")
	}
	if len(raw) > maxUpdateBytes {
		return location{}, nil, apierr.InvalidArgument("update must be at most %d MiB.", maxUpdateBytes>>20)
	}
	return loc, raw, nil
}

// decodeBase64 reads standard base64 (RFC 4648 section 4), with or without padding; the
// URL-safe alphabet (section 5) is accepted too, as browsers' encoders differ.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	return enc.DecodeString(s)
}
