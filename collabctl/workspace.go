package collabctl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

// do calls the operation of a full method name with data and decodes the result.
func (s *session) do(ctx context.Context, method string, data any) (json.RawMessage, any, error) {
	op, err := resolveOperation(method)
	if err != nil {
		return nil, nil, err
	}
	if op.Path == "" {
		return nil, nil, fmt.Errorf("%s has no HTTP route in this build", method)
	}
	body, err := json.Marshal(data)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the data of %s: %w", method, err)
	}
	raw, err := s.client.Call(ctx, op.Path, op.auth(), body)
	if err != nil {
		return nil, nil, err
	}
	v, err := decode(raw)
	return raw, v, err
}

const (
	mCreateWorkspace = "collab.workspace.v1.WorkspaceService.CreateWorkspace"
	mGetWorkspace    = "collab.workspace.v1.WorkspaceService.GetWorkspace"
	mUpdateSettings  = "collab.workspace.v1.WorkspaceService.UpdateWorkspaceSettings"
	mCreateAPIKey    = "collab.workspace.v1.WorkspaceService.CreateApiKey"
	mListAPIKeys     = "collab.workspace.v1.WorkspaceService.ListApiKeys"
	mListAuthTokens  = "collab.workspace.v1.WorkspaceService.ListAuthTokens"
	mResetAuthToken  = "collab.workspace.v1.WorkspaceService.ResetAuthToken"
)

func workspaceCreate(ctx context.Context, s *session, args []string) error {
	fs := s.flags("workspace create")
	email := fs.String("owner-email", "", "the owner's email (required); a verification link is mailed to it")
	name := fs.String("name", "", "the owner's name")
	wsName := fs.String("workspace-name", "", "the workspace's name (default: My Workspace)")
	avatar := fs.String("avatar", "", "URL of the owner's avatar")
	if _, err := s.parse(fs, args); err != nil {
		return err
	}
	if *email == "" {
		return usagef("workspace create needs --owner-email")
	}
	data := map[string]string{"ownerEmail": *email}
	for k, v := range map[string]string{"name": *name, "workspaceName": *wsName, "avatar": *avatar} {
		if v != "" {
			data[k] = v
		}
	}
	raw, v, err := s.do(ctx, mCreateWorkspace, data)
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	if err := printWorkspace(s, field(v, "data"), "workspace token"); err != nil {
		return err
	}
	fmt.Fprintf(s.stderr, "The workspace token is shown only now: keep it (%s).\n", EnvName("workspace-token"))
	return nil
}

func workspaceGet(ctx context.Context, s *session, args []string) error {
	if _, err := s.parse(s.flags("workspace get"), args); err != nil {
		return err
	}
	raw, v, err := s.do(ctx, mGetWorkspace, map[string]any{})
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	return printWorkspace(s, field(v, "data"), "workspace token (masked)")
}

func printWorkspace(s *session, ws any, tokenLabel string) error {
	t := newTable(s.stdout)
	t.row("workspace id:", cell(field(ws, "id")))
	t.row("name:", cell(field(ws, "name")))
	t.row("owner:", strings.TrimSpace(cell(field(ws, "owner", "name"))+" <"+cell(field(ws, "owner", "email"))+">"))
	t.row("email verified:", cell(field(ws, "emailVerified")))
	t.row(tokenLabel+":", cell(field(ws, "authToken")))
	if settings, ok := field(ws, "settings").(map[string]any); ok {
		for _, k := range sortedKeys(settings) {
			t.row("settings."+k+":", cell(settings[k]))
		}
	}
	if keys, ok := field(ws, "apiKeyList").(map[string]any); ok {
		for _, k := range sortedKeys(keys) {
			t.row("api key:", k+" ("+cell(field(keys[k], "type"))+", "+cell(field(keys[k], "apiKeyName"))+")")
		}
	}
	return t.flush()
}

// settingFields are the switches Update Workspace Settings takes, read from its request
// message, so a setting added to the API is settable without a change here.
func settingFields() protoreflect.FieldDescriptors {
	return (&workspacev1.UpdateWorkspaceSettingsRequest{}).ProtoReflect().Descriptor().Fields()
}

func settingNames() []string {
	fields := settingFields()
	names := make([]string, 0, fields.Len())
	for i := range fields.Len() {
		names = append(names, fields.Get(i).JSONName())
	}
	return names
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func workspaceSettings(ctx context.Context, s *session, args []string) error {
	fs := s.flags("workspace settings")
	var sets stringList
	fs.Var(&sets, "set", "NAME=VALUE, repeatable; NAME is one of "+strings.Join(settingNames(), ", ")+" (or its snake_case or kebab-case form); booleans take true/false, on/off, 1/0")
	if _, err := s.parse(fs, args); err != nil {
		return err
	}
	if len(sets) == 0 {
		_, v, err := s.do(ctx, mGetWorkspace, map[string]any{})
		if err != nil {
			return err
		}
		if s.output == "json" {
			return printValue(s.stdout, field(v, "data", "settings"))
		}
		return printGeneric(s.stdout, field(v, "data", "settings"))
	}
	data := map[string]any{}
	for _, kv := range sets {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef("--set %q: want NAME=VALUE", kv)
		}
		f := findSetting(name)
		if f == nil {
			return usagef("--set: no setting %q; the settings are %s", name, strings.Join(settingNames(), ", "))
		}
		switch f.Kind() {
		case protoreflect.BoolKind:
			b, err := parseSwitch(value)
			if err != nil {
				return usagef("--set %s: %v", name, err)
			}
			data[f.JSONName()] = b
		case protoreflect.StringKind:
			data[f.JSONName()] = value
		default:
			return usagef("--set %s: collabctl cannot set a %s; use collabctl call %s", name, f.Kind(), mUpdateSettings)
		}
	}
	raw, v, err := s.do(ctx, mUpdateSettings, data)
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	return printGeneric(s.stdout, field(v, "data"))
}

func findSetting(name string) protoreflect.FieldDescriptor {
	norm := strings.ReplaceAll(name, "-", "_")
	fields := settingFields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.JSONName() == name || string(f.Name()) == norm {
			return f
		}
	}
	return nil
}

func parseSwitch(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "yes":
		return true, nil
	case "off", "no":
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean (true/false, on/off)", v)
	}
	return b, nil
}

func keysCreate(ctx context.Context, s *session, args []string) error {
	fs := s.flags("keys create")
	name := fs.String("name", "", "the key's name")
	typ := fs.String("type", "", "testing (the default) or production")
	var domains stringList
	fs.Var(&domains, "domain", "an allowed domain, repeatable")
	noToken := fs.Bool("no-auth-token", false, "create the key without an auth token (reset one later with tokens reset)")
	if _, err := s.parse(fs, args); err != nil {
		return err
	}
	data := map[string]any{}
	if *name != "" {
		data["apiKeyName"] = *name
	}
	if *typ != "" {
		data["type"] = *typ
	}
	if len(domains) > 0 {
		data["allowedDomains"] = []string(domains)
	}
	if *noToken {
		data["createAuthToken"] = false
	}
	raw, v, err := s.do(ctx, mCreateAPIKey, data)
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	t := newTable(s.stdout)
	t.row("api key:", cell(field(v, "data", "apiKey")))
	if tok := field(v, "data", "authToken"); tok != nil {
		t.row("auth token:", cell(tok))
		defer fmt.Fprintf(s.stderr, "The auth token is shown only now: keep it (%s).\n", EnvName("auth-token"))
	}
	return t.flush()
}

// maxPages bounds a listing that follows page tokens, against a server that never ends one.
const maxPages = 1000

func keysList(ctx context.Context, s *session, args []string) error {
	if _, err := s.parse(s.flags("keys list"), args); err != nil {
		return err
	}
	var keys []any
	token := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return fmt.Errorf("more than %d pages of API keys; stopped", maxPages)
		}
		data := map[string]any{}
		if token != "" {
			data["pageToken"] = token
		}
		_, v, err := s.do(ctx, mListAPIKeys, data)
		if err != nil {
			return err
		}
		items, _ := field(v, "data").([]any)
		keys = append(keys, items...)
		next, _ := field(v, "nextPageToken").(string)
		if next == "" || next == token {
			break
		}
		token = next
	}
	if keys == nil {
		keys = []any{}
	}
	if s.output == "json" {
		return printValue(s.stdout, keys)
	}
	t := newTable(s.stdout, "API KEY", "NAME", "TYPE")
	for _, k := range keys {
		t.row(cell(field(k, "id")), cell(field(k, "apiKeyName")), cell(field(k, "type")))
	}
	return t.flush()
}

func tokensList(ctx context.Context, s *session, args []string) error {
	rest, err := s.parse(s.flags("tokens list"), args, "API_KEY")
	if err != nil {
		return err
	}
	raw, v, err := s.do(ctx, mListAuthTokens, map[string]any{"apiKey": rest[0]})
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	t := newTable(s.stdout, "AUTH TOKEN", "NAME", "DOMAINS")
	tokens, _ := field(v, "data", "authTokens").([]any)
	for _, tok := range tokens {
		var domains []string
		if ds, ok := field(tok, "domains").([]any); ok {
			for _, d := range ds {
				domains = append(domains, cell(d))
			}
		}
		slices.Sort(domains)
		t.row(cell(field(tok, "token")), cell(field(tok, "name")), strings.Join(domains, ","))
	}
	return t.flush()
}

func tokensReset(ctx context.Context, s *session, args []string) error {
	rest, err := s.parse(s.flags("tokens reset"), args, "API_KEY")
	if err != nil {
		return err
	}
	raw, v, err := s.do(ctx, mResetAuthToken, map[string]any{"apiKey": rest[0]})
	if err != nil {
		return err
	}
	if s.output == "json" {
		return printJSON(s.stdout, raw)
	}
	t := newTable(s.stdout)
	t.row("api key:", cell(field(v, "data", "apiKey")))
	t.row("auth token:", cell(field(v, "data", "newAuthToken", "token")))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(s.stderr, "The key's previous auth tokens no longer work; the new one is shown only now (%s).\n", EnvName("auth-token"))
	return nil
}
