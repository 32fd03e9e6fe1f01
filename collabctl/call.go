package collabctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

// callVia says whether an operation is called over gRPC: --via's choice (auto: HTTP, gRPC
// for operations without a route), refused when the operation cannot go that way.
func callVia(op operation, via string) (bool, error) {
	switch via {
	case "auto":
		return op.Path == "", nil
	case "grpc":
		if op.Method == "" {
			return false, usagef("%s is not a path of the API this collabctl was built with: no method to call over gRPC", op.Path)
		}
		return true, nil
	case "http":
		if op.Path == "" && op.Class == optionsv1.Auth_AUTH_INTERNAL {
			return false, usagef("%s is an internal operation: it has no HTTP route; call it over gRPC (--grpc-addr, %s)", op.Method, EnvName("internal-token"))
		}
		if op.Path == "" {
			// Not every operation without a route is internal (Get JWKS is public).
			return false, usagef("%s has no HTTP route; call it over gRPC (--grpc-addr)", op.Method)
		}
		return false, nil
	}
	return false, usagef("--via must be auto, http or grpc, not %q", via)
}

// call is collabctl's call command: one operation, by path or method, with its data, over
// HTTP or gRPC, its answer printed.
func call(ctx context.Context, s *session, args []string) error {
	fs := s.flags("call")
	file := fs.String("f", "", "read the data (the JSON object under \"data\") from FILE, or from standard input with -")
	inline := fs.String("d", "", "the data as a JSON object on the command line")
	auth := fs.String("auth", "auto", "credentials to send: auto (those the operation declares), key, workspace or none")
	via := fs.String("via", "auto", "auto (HTTP, gRPC for internal operations), http or grpc (--grpc-addr)")
	// The operation may come before the flags (collabctl call /v2/workspace/get -o json) or after
	// them; flag parsing stops at the first argument that is not a flag.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
		if _, err := s.parse(fs, args); err != nil {
			return err
		}
	} else {
		rest, err := s.parse(fs, args, "OPERATION (a path /v2/... or a method collab.<service>.v1.<Service>.<Method>)")
		if err != nil {
			return err
		}
		name = rest[0]
	}
	op, err := resolveOperation(name)
	if err != nil {
		return err
	}
	class, err := callAuth(op, *auth)
	if err != nil {
		return err
	}
	overGRPC, err := callVia(op, *via)
	if err != nil {
		return err
	}
	data, err := readData(s.stdin, *file, *inline)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if overGRPC {
		raw, err = s.callGRPC(ctx, op, class, data)
	} else {
		raw, err = s.client.Call(ctx, op.Path, class, data)
	}
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	v, err := decode(raw)
	if err != nil {
		return err
	}
	d, ok := v.(map[string]any)
	if !ok || d["data"] == nil {
		return printGeneric(s.stdout, v)
	}
	if err := printGeneric(s.stdout, d["data"]); err != nil {
		return err
	}
	// Page tokens travel beside data (List API Keys' nextPageToken, the documents' pageToken):
	// an operator reading a page needs them to ask for the next one. Status and message only
	// repeat that the call succeeded.
	t := newTable(s.stdout)
	for _, k := range sortedKeys(d) {
		if k != "data" && k != "status" && k != "message" {
			t.row(k+":", cell(d[k]))
		}
	}
	return t.flush()
}

// callAuth is the credential class call sends: the operation's own unless --auth names one.
func callAuth(op operation, flag string) (Auth, error) {
	switch flag {
	case "key":
		return AuthKey, nil
	case "workspace":
		return AuthWorkspace, nil
	case "none":
		return AuthNone, nil
	case "auto":
		if op.Method == "" {
			return 0, usagef("%s is not a path of the API this collabctl was built with; say which credentials it takes with --auth key|workspace|none", op.Path)
		}
		if op.Class == optionsv1.Auth_AUTH_UNSPECIFIED {
			return 0, usagef("%s declares no auth class; say which credentials to send with --auth", op.Method)
		}
		return op.auth(), nil
	}
	return 0, usagef("--auth must be auto, key, workspace or none, not %q", flag)
}

// readData reads the request's data: one JSON object, from a file, standard input or the
// command line; {} when none is given.
func readData(stdin io.Reader, file, inline string) (json.RawMessage, error) {
	var (
		raw    []byte
		source string
	)
	switch {
	case file != "" && inline != "":
		return nil, usagef("give the data with -f or with -d, not both")
	case inline != "":
		raw, source = []byte(inline), "-d"
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, maxRequest+1))
		if err != nil {
			return nil, fmt.Errorf("reading the data from standard input: %w", err)
		}
		raw, source = b, "standard input"
	case file != "":
		f, err := os.Open(file) //nolint:gosec // G304: the file the user named with -f
		if err != nil {
			return nil, usagef("-f: %v", err)
		}
		defer func() { _ = f.Close() }() // only read
		b, err := io.ReadAll(io.LimitReader(f, maxRequest+1))
		if err != nil {
			return nil, fmt.Errorf("reading the data from %s: %w", file, err)
		}
		raw, source = b, file
	default:
		return json.RawMessage("{}"), nil
	}
	if len(raw) > maxRequest {
		return nil, usagef("the data in %s is larger than the API's limit of %d MiB", source, maxRequest>>20)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, usagef("the data in %s is empty; want a JSON object such as {}", source)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, usagef("the data in %s is not valid JSON: %s", source, jsonProblem(raw, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, usagef("the data in %s holds more than one JSON value; want one object", source)
	}
	if trimmed := bytes.TrimSpace(v); trimmed[0] != '{' {
		return nil, usagef("the data in %s is not a JSON object (the fields of the request, without the {\"data\": ...} wrapper)", source)
	}
	return v, nil
}

// jsonProblem words a JSON error with its line and column.
func jsonProblem(raw []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var off int64 = -1
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ends early"
	}
	if off < 0 {
		return err.Error()
	}
	off = min(off, int64(len(raw)))
	line := 1 + bytes.Count(raw[:off], []byte("\n"))
	// Offset counts the bytes read up to and including the offending one.
	col := off - int64(bytes.LastIndexByte(raw[:off], '\n')) - 1
	return fmt.Sprintf("%v (line %d, column %d)", err, line, col)
}
