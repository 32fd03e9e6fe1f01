package collabctl

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Exit codes of Main.
const (
	ExitOK = 0
	// ExitFailed: the API refused the operation, or the server could not be reached or read.
	ExitFailed = 1
	// ExitUsage: the command line or its input is wrong; nothing was sent.
	ExitUsage = 2
)

// EnvPrefix starts the environment twin of every global flag: --api-key is COLLABCTL_API_KEY.
const EnvPrefix = "COLLABCTL_"

// EnvName is the environment twin of a global flag.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// usageError is a mistake on the command line or in its input: exit 2, nothing sent.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// session is what every command runs with: the global settings, the client and the streams.
type session struct {
	client  *Client
	grpc    grpcTarget
	timeout time.Duration
	output  string // "table" or "json"
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	getenv  func(string) string
}

// command is one leaf of the command tree ("keys create").
type command struct {
	words   string
	args    string // the synopsis of its arguments, for the usage text
	summary string
	run     func(ctx context.Context, s *session, args []string) error
}

func commands() []command {
	return []command{
		{"workspace create", "--owner-email EMAIL [--name NAME] [--workspace-name NAME] [--avatar URL]", "create a workspace (prints its token once)", workspaceCreate},
		{"workspace get", "", "show the workspace of the workspace credentials", workspaceGet},
		{"workspace settings", "[--set NAME=VALUE ...]", "show or change the workspace's settings (console switches)", workspaceSettings},
		{"keys create", "[--name NAME] [--type testing|production] [--domain D ...] [--no-auth-token]", "create an API key (prints its auth token once)", keysCreate},
		{"keys list", "", "list the workspace's API keys", keysList},
		{"tokens list", "API_KEY", "list an API key's auth tokens (masked)", tokensList},
		{"tokens reset", "API_KEY", "replace an API key's auth tokens with a new one (prints it once)", tokensReset},
		{"call", "OPERATION [-f FILE|-] [-d JSON] [--auth auto|key|workspace|none] [--via auto|http|grpc]", "call any operation by path (/v2/...) or method (collab.x.v1.Service.Method) with JSON data; internal ones over gRPC", call},
		{"webhooks attempts tail", "--endpoint ID | --message ID [--status S] [--interval 2s] [--last 10]", "print webhook delivery attempts as they are made, until interrupted", webhookAttemptsTail},
		{"relay backlog", "--metrics-url URL [--metrics-url URL ...]", "the event relay's backlog per producer and subscriber, from processes' /metrics", relayBacklog},
	}
}

// Main runs collabctl with args (without the program name) and returns the exit code. getenv
// supplies the environment twins of the global flags.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	s, rest, err := parseGlobals(args, stdin, stdout, stderr, getenv)
	if err != nil {
		return report(stderr, err)
	}
	if len(rest) == 0 {
		printUsage(stderr, nil)
		return ExitUsage
	}
	cmd, cmdArgs, ok := findCommand(rest)
	if !ok {
		return report(stderr, usagef("unknown command %q; run collabctl -h for the list", strings.Join(rest, " ")))
	}
	return report(stderr, cmd.run(ctx, s, cmdArgs))
}

func findCommand(words []string) (command, []string, bool) {
	var best command
	n := 0
	for _, c := range commands() {
		w := strings.Fields(c.words)
		if len(w) > len(words) || len(w) <= n {
			continue
		}
		match := true
		for i := range w {
			if words[i] != w[i] {
				match = false
				break
			}
		}
		if match {
			best, n = c, len(w)
		}
	}
	return best, words[min(n, len(words)):], n > 0
}

// report prints err the way its kind asks and returns the exit code.
func report(stderr io.Writer, err error) int {
	var ue *usageError
	var ae *APIError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "collabctl:", ue.msg)
		return ExitUsage
	case errors.As(err, &ae) && ae.GRPC:
		fmt.Fprintf(stderr, "collabctl: %s (gRPC): %s\n", sanitize(ae.Status), sanitize(ae.Message))
		return ExitFailed
	case errors.As(err, &ae):
		// The status is the server's text like the message: whatever answered (a proxy, another
		// server) may put a terminal's escape sequences in it.
		fmt.Fprintf(stderr, "collabctl: %s (HTTP %d): %s\n", sanitize(ae.Status), ae.HTTPStatus, sanitize(ae.Message))
		if len(ae.Details) > 0 {
			fmt.Fprintf(stderr, "details: %s\n", sanitize(string(ae.Details)))
		}
		return ExitFailed
	default:
		fmt.Fprintln(stderr, "collabctl:", sanitize(err.Error()))
		return ExitFailed
	}
}

func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `collabctl: the operator's command line of collab (HTTP API; docs/operations.md, "collabctl").

Usage: collabctl [global flags] COMMAND [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %s %s\n      %s\n", c.words, c.args, c.summary)
	}
	fmt.Fprint(w, `
Credentials come from the environment (preferred; flags would show in the process list):
  COLLABCTL_WORKSPACE_ID, COLLABCTL_WORKSPACE_TOKEN   workspace operations (workspace, keys, tokens)
  COLLABCTL_API_KEY, COLLABCTL_AUTH_TOKEN             key operations (webhooks, most of call)
  COLLABCTL_INTERNAL_TOKEN                            internal operations (call over gRPC), or
  COLLABCTL_GRPC_CERT_FILE, COLLABCTL_GRPC_KEY_FILE   a client certificate of a mutual-TLS deployment
Exit codes: 0 done, 1 the API refused or the server could not be reached, 2 usage error.
`)
	if fs != nil {
		fmt.Fprint(w, "\nGlobal flags (each has an environment twin, COLLABCTL_<FLAG>; the flag wins):\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// globals are the global flags; each has its environment twin.
type globals struct {
	url, workspaceID, workspaceToken, apiKey, authToken, output, caFile string
	grpcAddr, internalToken, grpcCertFile, grpcKeyFile                  string
	grpcTLS                                                             bool
	timeout                                                             time.Duration
}

func parseGlobals(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) (*session, []string, error) {
	var g globals
	fs := flag.NewFlagSet("collabctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	strs := map[string]*string{}
	str := func(p *string, name, def, usage string) {
		fs.StringVar(p, name, def, usage)
		strs[name] = p
	}
	str(&g.url, "url", "http://127.0.0.1:8080", "base URL of the HTTP API (the gateway)")
	str(&g.workspaceID, "workspace-id", "", "workspace id, for workspace operations")
	str(&g.workspaceToken, "workspace-token", "", "workspace auth token (a secret: prefer the environment)")
	str(&g.apiKey, "api-key", "", "API key, for key operations")
	str(&g.authToken, "auth-token", "", "the API key's auth token (a secret: prefer the environment)")
	str(&g.output, "output", "table", "output: table or json")
	fs.StringVar(&g.output, "o", "table", "shorthand for --output")
	str(&g.caFile, "ca-file", "", "PEM file of the CA certificates to trust for https URLs (instead of the system's)")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "time limit of each request")
	str(&g.grpcAddr, "grpc-addr", "", "host:port of a process's gRPC listener, for call of internal operations (or with --via grpc)")
	fs.BoolVar(&g.grpcTLS, "grpc-tls", false, "use TLS to --grpc-addr (trusting --ca-file, or the system's roots)")
	str(&g.grpcCertFile, "grpc-cert-file", "", "client certificate (PEM) for a gRPC listener with mutual TLS (collabd --grpc-tls-*); implies --grpc-tls")
	str(&g.grpcKeyFile, "grpc-key-file", "", "the key of --grpc-cert-file")
	str(&g.internalToken, "internal-token", "", "the deployment's internal token, for internal operations (a secret: prefer the environment)")
	// -h prints the usage once, to stdout (below); errors are reported by report.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs)
			return nil, nil, err
		}
		return nil, nil, usagef("%v; run collabctl -h for the flags", err)
	}
	// The environment fills what the command line did not set. Secrets are read here, after
	// parsing, rather than becoming flag defaults, which -h would print.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, p := range strs {
		if v := getenv(EnvName(name)); v != "" && !set[name] && !(name == "output" && set["o"]) {
			*p = v
		}
	}
	if v := getenv(EnvName("timeout")); v != "" && !set["timeout"] {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, nil, usagef("%s=%q is not a duration (e.g. 30s)", EnvName("timeout"), v)
		}
		g.timeout = d
	}
	if v := getenv(EnvName("grpc-tls")); v != "" && !set["grpc-tls"] {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, nil, usagef("%s=%q is not a boolean", EnvName("grpc-tls"), v)
		}
		g.grpcTLS = b
	}
	if g.timeout <= 0 {
		return nil, nil, usagef("--timeout must be positive")
	}
	if err := checkOutput(g.output); err != nil {
		return nil, nil, err
	}
	client, err := NewClient(g.url, Credentials{WorkspaceID: g.workspaceID, WorkspaceToken: g.workspaceToken, APIKey: g.apiKey, AuthToken: g.authToken}, g.caFile, g.timeout)
	if err != nil {
		return nil, nil, err
	}
	tlsCfg, err := tlsConfig(g.caFile)
	if err != nil {
		return nil, nil, err
	}
	if (g.grpcCertFile == "") != (g.grpcKeyFile == "") {
		return nil, nil, usagef("--grpc-cert-file and --grpc-key-file go together")
	}
	clientCert := g.grpcCertFile != ""
	if clientCert {
		pair, err := tls.LoadX509KeyPair(g.grpcCertFile, g.grpcKeyFile)
		if err != nil {
			return nil, nil, usagef("--grpc-cert-file, --grpc-key-file: %v", err)
		}
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	grpcTarget := grpcTarget{addr: g.grpcAddr, useTLS: g.grpcTLS || clientCert, tlsConfig: tlsCfg, clientCert: clientCert, internalToken: g.internalToken}
	return &session{client: client, grpc: grpcTarget, timeout: g.timeout, output: g.output, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}, fs.Args(), nil
}

func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return usagef("--output must be table or json, not %q", o)
	}
	return nil
}

// flags returns the flag set of a command, with --output/-o, which a command takes as well as
// the global flag (collabctl keys list -o json).
func (s *session) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("collabctl "+name, flag.ContinueOnError)
	// Errors are reported once, by report; -h prints the synopsis and flags (parse).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&s.output, "output", s.output, "output: table or json")
	fs.StringVar(&s.output, "o", s.output, "shorthand for --output")
	return fs
}

// parse parses a command's flags, turning flag errors into usage errors and refusing stray
// arguments beyond want positional ones.
func (s *session) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			synopsis := ""
			for _, c := range commands() {
				if "collabctl "+c.words == fs.Name() {
					synopsis = c.args + "\n    " + c.summary
				}
			}
			fmt.Fprintf(s.stdout, "Usage: %s %s\n\nFlags:\n", fs.Name(), synopsis)
			fs.SetOutput(s.stdout)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usagef("%s: %v", fs.Name(), err)
	}
	if err := checkOutput(s.output); err != nil {
		return nil, err
	}
	rest := fs.Args()
	if len(rest) != len(positional) {
		if len(positional) == 0 {
			return nil, usagef("%s takes no arguments, got %q", fs.Name(), strings.Join(rest, " "))
		}
		return nil, usagef("%s needs %s", fs.Name(), strings.Join(positional, " "))
	}
	return rest, nil
}
