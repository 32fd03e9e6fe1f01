package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/collab/collab/internal/apierr"
)

// RequestRules checks a request against the buf.validate rules written beside its fields in
// the .proto (collab.options.v1's predefined rules and the fields' own), before the handler:
// the first rule broken answers INVALID_ARGUMENT with "<field's JSON path> <rule's message>",
// or the rule's message alone for a rule on the whole request ("Provide either documentId or
// folderId, not both."), the API's sentences (docs/api.md). A rule that cannot be built or
// evaluated fails closed: INTERNAL, its cause logged by the error mapping.
func RequestRules() grpc.UnaryServerInterceptor {
	v, err := protovalidate.New(protovalidate.WithFailFast())
	if err != nil {
		// New fails only on a broken CEL environment of the library itself.
		panic(fmt.Sprintf("grpcserver: protovalidate: %v", err))
	}
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		m, ok := req.(proto.Message)
		if !ok {
			return handler(ctx, req)
		}
		if err := v.Validate(m); err != nil {
			return nil, ruleError(m.ProtoReflect().Descriptor(), err)
		}
		return handler(ctx, req)
	}
}

// ruleError words the first violation of err for the caller, or wraps err (a rule that could
// not be compiled or evaluated) as an internal error.
func ruleError(md protoreflect.MessageDescriptor, err error) error {
	var verr *protovalidate.ValidationError
	if !errors.As(err, &verr) || len(verr.Violations) == 0 {
		return fmt.Errorf("request rules of %s: %w", md.FullName(), err)
	}
	v := verr.Violations[0].Proto
	path := jsonPath(md, v.GetField())
	if path == "" {
		return apierr.InvalidArgument("%s", v.GetMessage())
	}
	return apierr.InvalidArgument("%s %s", path, v.GetMessage())
}

// jsonPath writes a violation's field path as the API names fields: JSON names, indexes and
// keys in brackets ("users[2].userId").
func jsonPath(md protoreflect.MessageDescriptor, path *validate.FieldPath) string {
	var b strings.Builder
	for i, e := range path.GetElements() {
		if i > 0 {
			b.WriteByte('.')
		}
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(protoreflect.FieldNumber(e.GetFieldNumber()))
		}
		if fd == nil {
			b.WriteString(e.GetFieldName())
			md = nil
		} else {
			b.WriteString(fd.JSONName())
			md = fd.Message()
			if fd.IsMap() {
				md = fd.MapValue().Message()
			}
		}
		switch e.WhichSubscript() {
		case validate.FieldPathElement_Index_case:
			b.WriteString("[" + strconv.FormatUint(e.GetIndex(), 10) + "]")
		case validate.FieldPathElement_StringKey_case:
			b.WriteString("[" + strconv.Quote(e.GetStringKey()) + "]")
		case validate.FieldPathElement_IntKey_case:
			b.WriteString("[" + strconv.FormatInt(e.GetIntKey(), 10) + "]")
		case validate.FieldPathElement_UintKey_case:
			b.WriteString("[" + strconv.FormatUint(e.GetUintKey(), 10) + "]")
		case validate.FieldPathElement_BoolKey_case:
			b.WriteString("[" + strconv.FormatBool(e.GetBoolKey()) + "]")
		case validate.FieldPathElement_Subscript_not_set_case:
		}
	}
	return b.String()
}
