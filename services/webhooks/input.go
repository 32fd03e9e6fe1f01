package webhooks

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/egress"
	"github.com/collab/collab/internal/validate"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"
)

// Limits (docs/webhooks.md).
const (
	maxFilterTypes     = 100
	maxChannels        = 100
	maxMetadataKeys    = 50
	maxMetadataValue   = 1000
	maxDescription     = 1000
	maxRateLimit       = 10000
	defaultListLimit   = 50
	maxListLimit       = 250
	maxPublicKeyLength = 16 << 10
)

const (
	msgBadURL        = "url must be a valid http(s) URL."
	msgPrivateTarget = "url must not point to a loopback, private or link-local address."
	msgNoField       = "At least one endpoint field besides endpointId must be provided."
	msgNotClearable  = "%s cannot be null (only description, filterTypes, channels, rateLimit, uid and metadata can be cleared)."
)

// clearedFields reads Update Endpoint's clear_fields: the optional fields to unset, by their
// proto names, which the gateway fills from the fields sent as null. A field that has no unset
// state (url, disabled), or that the request also sets, is refused; see docs/webhooks.md,
// "Clearing endpoint fields".
func clearedFields(req *webhooksv1.UpdateEndpointRequest) (EndpointFields, error) {
	var c EndpointFields
	fields := req.ProtoReflect().Descriptor().Fields()
	for i, name := range req.GetClearFields() {
		fd := fields.ByName(protoreflect.Name(name))
		if fd == nil {
			return c, apierr.InvalidArgument("clearFields[%d] names no field of this request: give the proto names of the fields to clear "+
				"(description, filter_types, channels, rate_limit, uid, metadata).", i)
		}
		var set bool // the request gives the field a value too
		switch name {
		case "description":
			c.Description, set = true, req.Description != nil
		case "filter_types":
			c.FilterTypes, set = true, req.FilterTypes != nil
		case "channels":
			c.Channels, set = true, req.Channels != nil
		case "rate_limit":
			c.RateLimit, set = true, req.RateLimit != nil
		case "uid":
			c.UID, set = true, req.Uid != nil
		case "metadata":
			c.Metadata, set = true, req.Metadata != nil
		default:
			return c, apierr.InvalidArgument(msgNotClearable, fd.JSONName())
		}
		if set {
			return c, apierr.InvalidArgument("%s cannot be both set and cleared.", fd.JSONName())
		}
	}
	return c, nil
}

// targets decides which receiver addresses may be called.
type targets struct {
	allowPrivate bool
}

// checkURL checks an endpoint URL: http(s) with a host, and when the host is a literal address,
// one that may be called.
func (tg targets) checkURL(field, raw string) error {
	if !validate.IsHTTPURL(raw) || strings.IndexFunc(raw, validate.NameControl) >= 0 {
		if field == "url" {
			return apierr.InvalidArgument(msgBadURL)
		}
		return apierr.InvalidArgument("%s must be a valid http(s) URL.", field)
	}
	u, _ := url.Parse(raw)
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && egress.Blocked(ip) && !tg.allowPrivate {
		return apierr.InvalidArgument(msgPrivateTarget)
	}
	if u.User != nil {
		return apierr.InvalidArgument("%s must not hold credentials; use the endpoint's signature to authenticate deliveries.", field)
	}
	return nil
}

// stringList reads a filterTypes or channels array: nil when absent, refused when empty or
// holding anything but strings.
func stringList(field string, l *structpb.ListValue, max int, check func(string, string) error) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	if len(l.GetValues()) == 0 {
		return nil, apierr.InvalidArgument("%s must be a non-empty array of strings when given.", field)
	}
	if len(l.GetValues()) > max {
		return nil, apierr.InvalidArgument("%s must hold at most %d values.", field, max)
	}
	out := make([]string, 0, len(l.GetValues()))
	for i, v := range l.GetValues() {
		s, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, apierr.InvalidArgument("%s must be a non-empty array of strings when given.", field)
		}
		if err := check(fmt.Sprintf("%s[%d]", field, i), s.StringValue); err != nil {
			return nil, err
		}
		if !slices.Contains(out, s.StringValue) {
			out = append(out, s.StringValue)
		}
	}
	return out, nil
}

func checkChannel(field, v string) error { return validate.ID(field, v) }

func metadataOf(s *structpb.Struct) (map[string]string, error) {
	if s == nil {
		return nil, nil
	}
	if len(s.GetFields()) > maxMetadataKeys {
		return nil, apierr.InvalidArgument("metadata must hold at most %d keys.", maxMetadataKeys)
	}
	out := map[string]string{}
	for k, v := range s.GetFields() {
		str, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, apierr.InvalidArgument("metadata values must be strings (metadata.%s is not).", k)
		}
		if err := validate.Name("metadata key", k, 256); err != nil {
			return nil, err
		}
		if err := validate.MaxLength("metadata."+k, str.StringValue, maxMetadataValue); err != nil {
			return nil, err
		}
		out[k] = str.StringValue
	}
	return out, nil
}

func checkRateLimit(v *int32) (*int, error) {
	if v == nil {
		return nil, nil
	}
	if *v < 1 || *v > maxRateLimit {
		return nil, apierr.InvalidArgument("rateLimit must be a positive integer (at most %d).", maxRateLimit)
	}
	n := int(*v)
	return &n, nil
}

// endpointFields checks the fields create and update share into a patch.
func (tg targets) endpointFields(urlv, description, uid *string, filter, channels *structpb.ListValue, rate *int32, meta *structpb.Struct) (EndpointPatch, error) {
	var p EndpointPatch
	var err error
	if urlv != nil {
		if err := tg.checkURL("url", *urlv); err != nil {
			return p, err
		}
		p.URL = urlv
	}
	if description != nil {
		if err := validate.Name("description", *description, maxDescription); err != nil {
			return p, err
		}
		p.Description = description
	}
	if uid != nil {
		if err := validate.OptionalID("uid", *uid); err != nil {
			return p, err
		}
		p.UID = uid
	}
	if p.FilterTypes, err = stringList("filterTypes", filter, maxFilterTypes, validate.EventType); err != nil {
		return p, err
	}
	if p.Channels, err = stringList("channels", channels, maxChannels, checkChannel); err != nil {
		return p, err
	}
	if p.RateLimit, err = checkRateLimit(rate); err != nil {
		return p, err
	}
	if p.Metadata, err = metadataOf(meta); err != nil {
		return p, err
	}
	return p, nil
}

func listLimit(v *int32) (int, error) {
	if v == nil {
		return defaultListLimit, nil
	}
	if *v < 1 || *v > maxListLimit {
		return 0, apierr.InvalidArgument("limit must be between 1 and %d.", maxListLimit)
	}
	return int(*v), nil
}
