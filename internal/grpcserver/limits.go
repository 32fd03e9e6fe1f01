package grpcserver

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	optionsv1 "github.com/collab/collab/proto/collab/options/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
)

// MaxRequestBytes and MaxRequestDepth are the request limits of the API's operations for direct
// gRPC callers, the HTTP gateway's figures (its 4 MiB body and 64 levels of nesting,
// docs/api.md "Envelope and transport"). The size is the request's protobuf encoding: for
// most requests smaller than their JSON, for free-form values (a 0 in a list: 2 bytes of JSON,
// 11 of protobuf) larger.
const (
	MaxRequestBytes = 4 << 20
	MaxRequestDepth = 64
)

var (
	errRequestTooLarge = apierr.InvalidArgument("Request body is larger than %d MiB.", MaxRequestBytes>>20)
	errRequestTooDeep  = apierr.InvalidArgument("Request body is nested too deeply: at most %d levels.", MaxRequestDepth)
)

// requestLimits refuses a request of an API operation (any auth class but internal) larger
// than MaxRequestBytes or nested deeper than MaxRequestDepth as its JSON would be, unless a
// trusted forwarder sent it (trusted: the gateway, which refused such bodies as JSON already,
// or another service). For direct gRPC callers this is the only check, and without it a
// PublishEvent whose data nested 4,000 levels deep was stored and served to HTTP callers.
// Internal operations are left alone: only the deployment's own services call them. trusted
// is asked only of requests past a limit, so the common request costs no metadata lookup.
func requestLimits(trusted func(context.Context) bool) grpc.UnaryServerInterceptor {
	var checks sync.Map // full method name → limitCheck
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m, ok := req.(proto.Message)
		if !ok {
			return handler(ctx, req)
		}
		if markedTooDeep(m) {
			return nil, errRequestTooDeep // whatever the method: its request was not decoded
		}
		c, known := checks.Load(info.FullMethod)
		if !known {
			c = checkFor(info.FullMethod, m.ProtoReflect().Descriptor())
			checks.Store(info.FullMethod, c)
		}
		check := c.(limitCheck)
		if check.skip {
			return handler(ctx, req)
		}
		large := proto.Size(m) > MaxRequestBytes
		if !large && !check.walk {
			return handler(ctx, req)
		}
		if trusted(ctx) {
			return handler(ctx, req)
		}
		if large {
			return nil, errRequestTooLarge
		}
		if tooDeep(m.ProtoReflect(), 1) {
			return nil, errRequestTooDeep
		}
		return handler(ctx, req)
	}
}

// limitCheck is what requestLimits checks of one method's requests.
type limitCheck struct {
	skip bool // an internal operation
	walk bool // its request type can nest deeper than the limit
}

func checkFor(fullMethod string, d protoreflect.MessageDescriptor) limitCheck {
	if authn.ClassOf(fullMethod) == optionsv1.Auth_AUTH_INTERNAL {
		return limitCheck{skip: true}
	}
	return limitCheck{walk: staticDepth(d, 1, map[protoreflect.FullName]bool{}) > MaxRequestDepth}
}

// unbounded is staticDepth's answer for a type that may nest without end.
const unbounded = MaxRequestDepth + 1

// staticDepth returns the deepest level a message of type d at level may reach as JSON, or
// unbounded when that has no bound (free-form values, recursive types), so that requests of
// types that cannot pass the limit are never walked.
func staticDepth(d protoreflect.MessageDescriptor, level int, seen map[protoreflect.FullName]bool) int {
	if level > MaxRequestDepth || seen[d.FullName()] || freeForm[d.FullName()] {
		return unbounded
	}
	seen[d.FullName()] = true
	defer delete(seen, d.FullName())
	deepest := level
	fields := d.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		child := level + 1 // a list's or map's array or object, or a message field's object
		switch {
		case fd.IsMap():
			if v := fd.MapValue(); v.Message() != nil {
				child = staticDepth(v.Message(), level+2, seen)
			}
		case fd.Message() != nil && fd.IsList():
			child = staticDepth(fd.Message(), level+2, seen)
		case fd.Message() != nil:
			child = staticDepth(fd.Message(), level+1, seen)
		case !fd.IsList():
			continue
		}
		deepest = max(deepest, child)
	}
	return deepest
}

// freeForm are the types whose JSON is any value (google.protobuf.Struct and its parts).
var freeForm = map[protoreflect.FullName]bool{
	"google.protobuf.Struct":    true,
	"google.protobuf.Value":     true,
	"google.protobuf.ListValue": true,
}

// tooDeep reports whether m, whose JSON sits at level, nests deeper than MaxRequestDepth. It
// stops at the first level past the limit, so its work is bounded by the request's size and its
// recursion by the limit. A Value is no level of its own: its struct or list is.
func tooDeep(m protoreflect.Message, level int) bool {
	name := m.Descriptor().FullName()
	if name == "google.protobuf.Value" {
		deep := false
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Message() != nil {
				deep = tooDeep(v.Message(), level)
			}
			return false // a Value has one field set
		})
		return deep
	}
	if level > MaxRequestDepth {
		return true
	}
	deep := false
	if name == "google.protobuf.Struct" || name == "google.protobuf.ListValue" {
		// Its one field (the struct's fields, the list's values) is its own JSON's members:
		// Values one level in.
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.IsMap() {
				v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
					deep = tooDeep(e.Message(), level+1)
					return !deep
				})
				return false
			}
			l := v.List()
			for i := 0; i < l.Len() && !deep; i++ {
				deep = tooDeep(l.Get(i).Message(), level+1)
			}
			return false
		})
		return deep
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		deep = fieldTooDeep(fd, v, level)
		return !deep
	})
	return deep
}

// fieldTooDeep is tooDeep for one field of a message at level.
func fieldTooDeep(fd protoreflect.FieldDescriptor, v protoreflect.Value, level int) bool {
	switch {
	case fd.IsMap():
		if level+1 > MaxRequestDepth {
			return true
		}
		if fd.MapValue().Message() == nil {
			return false
		}
		deep := false
		v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
			deep = tooDeep(e.Message(), level+2)
			return !deep
		})
		return deep
	case fd.IsList():
		if level+1 > MaxRequestDepth {
			return true
		}
		if fd.Message() == nil {
			return false
		}
		l := v.List()
		for i := range l.Len() {
			if tooDeep(l.Get(i).Message(), level+2) {
				return true
			}
		}
		return false
	case fd.Message() != nil:
		return tooDeep(v.Message(), level+1)
	}
	return false
}
