// Package protoset is every protobuf file of the API, linked into the binary that imports it:
// what ranges over the API's methods (collabctl's operations, the auth-class guard) ranges over
// this list, not over the global registry, which holds only what the binary happens to link
// (a test binary importing the services holds everything; collabctl alone did not). The list
// is generated from proto/ (protoset.pb.go, scripts/generate), and scripts/check-generated
// fails while it is stale, so a new proto package cannot be missing from it.
package protoset

import (
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Files returns every protobuf file of proto/, by path.
func Files() []protoreflect.FileDescriptor { return slices.Clone(files) }

// Services returns every service of those files, in the files' order.
func Services() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	for _, f := range files {
		for i := range f.Services().Len() {
			out = append(out, f.Services().Get(i))
		}
	}
	return out
}

// Methods returns every method of every service, in the services' order.
func Methods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, s := range Services() {
		for i := range s.Methods().Len() {
			out = append(out, s.Methods().Get(i))
		}
	}
	return out
}
