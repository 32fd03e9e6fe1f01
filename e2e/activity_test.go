package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// activityIDs lists the ids of Get Activity Logs' records, in the order answered, and the
// page token.
func (s *system) activityIDs(t *testing.T, k map[string]string, query map[string]any) ([]string, string) {
	t.Helper()
	result := s.call("/v2/activities/get", k, query).ok(t)
	var ids []string
	for _, r := range result["data"].([]any) {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	tok, _ := result["pageToken"].(string)
	return ids, tok
}

// onBothStores runs test on a process with the memory store and on one with the embedded
// FerretDB (--data-dir), side by side.
func onBothStores(t *testing.T, test func(t *testing.T, s *system)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		test(t, newSystem(t))
	})
	t.Run("ferretdb", func(t *testing.T) {
		t.Parallel()
		test(t, persistentSystem(t))
	})
}

func (s *system) addOrganization(t *testing.T, k map[string]string, org string) {
	t.Helper()
	s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": org, "organizationName": "O"}}}).data(t, "")
}

func (s *system) publish(t *testing.T, k map[string]string, event map[string]any) string {
	t.Helper()
	return s.call("/v2/events/publish", k, event).data(t, "Event published successfully.")["eventId"].(string)
}

// Events published over HTTP become activity records as the config says.
func TestPublishedEventsBecomeActivityPerConfig(t *testing.T) {
	t.Parallel()
	onBothStores(t, testPublishedEventsBecomeActivityPerConfig)
}

func testPublishedEventsBecomeActivityPerConfig(t *testing.T, s *system) {
	k := s.devKey()
	s.addOrganization(t, k, "o")

	// Never configured: disabled, and shown as just that.
	cfg := s.call("/v2/workspace/activityconfig/get", k, map[string]any{}).data(t, "Activity config retrieved successfully.")
	if fmt.Sprint(cfg) != "map[activityServiceConfig:map[isEnabled:false]]" {
		t.Fatalf("default config %v", cfg)
	}
	s.publish(t, k, map[string]any{"id": "before", "type": "comment.add", "organizationId": "o"})

	cfg = s.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true, "triggers": map[string]any{"comment": map[string]any{"delete": false, "comment.update": true}}}).data(t, "Activity config updated successfully.")
	if got := fmt.Sprint(cfg["activityServiceConfig"]); got != "map[isEnabled:true triggers:map[comment:map[delete:false update:true]]]" {
		t.Fatalf("config after update %s", got)
	}
	user := map[string]any{"userId": "u1", "name": "Ada", "email": "ada@example.com"}
	id := s.publish(t, k, map[string]any{"id": "c1", "type": "comment.add", "organizationId": "o", "documentId": "d", "actionUser": user,
		"targetEntityId": "thread-1", "channel": "general", "data": map[string]any{"commentText": "Hello"}})
	if id != "c1" {
		t.Fatalf("event id %q", id)
	}
	s.publish(t, k, map[string]any{"id": "c1", "type": "comment.add", "organizationId": "o"})       // repeated: one record
	s.publish(t, k, map[string]any{"id": "gone", "type": "comment.delete", "organizationId": "o"})  // trigger off
	s.publish(t, k, map[string]any{"id": "huddle", "type": "huddle.create", "organizationId": "o"}) // no activity feature
	s.call("/v2/events/publish", k, map[string]any{"id": "elsewhere", "type": "reaction.add", "organizationId": "o2"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	s.call("/v2/activities/get", k, map[string]any{"organizationId": "o2"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	generated := s.publish(t, k, map[string]any{"type": "crdt.update_data", "organizationId": "o", "documentId": "d",
		"data": map[string]any{"displayMessageTemplate": "{{user}} edited", "displayMessageTemplateData": map[string]any{"user": "Ada"}, "entityData": []any{1, "x"}}})

	ids, tok := s.activityIDs(t, k, map[string]any{"organizationId": "o"})
	if !slices.Equal(ids, []string{generated, "c1"}) || tok != "" {
		t.Fatalf("records %v (token %q)", ids, tok)
	}
	rec := s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "activityIds": []string{"c1"}}).ok(t)["data"].([]any)[0].(map[string]any)
	want := map[string]any{
		"id": "c1", "featureType": "comment", "actionType": "comment.add", "actionUser": user, "targetEntityId": "thread-1",
		"displayMessageTemplate":     "{{actionUser.name}}: {{actionType}}",
		"displayMessageTemplateData": map[string]any{"commentText": "Hello", "actionUser": user, "actionType": "comment.add"},
		"metadata":                   map[string]any{"apiKey": s.proc.Dev.APIKey, "documentId": "d", "organizationId": "o"},
		"timestamp":                  float64(s.clock.Now().UnixMilli()), "changes": nil, "entityData": nil, "entityTargetData": nil, "actionIcon": "", "immutable": false,
	}
	if fmt.Sprint(rec) != fmt.Sprint(want) {
		t.Fatalf("record\n%v\nwant\n%v", rec, want)
	}
	crdt := s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "featureTypes": []string{"crdt"}}).ok(t)["data"].([]any)[0].(map[string]any)
	if crdt["displayMessageTemplate"] != "{{user}} edited" || fmt.Sprint(crdt["displayMessageTemplateData"]) != "map[user:Ada]" || fmt.Sprint(crdt["entityData"]) != "[1 x]" {
		t.Fatalf("crdt record %v", crdt)
	}

	// Disabled again: nothing more is recorded.
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": false}).data(t, "")
	s.publish(t, k, map[string]any{"id": "late", "type": "comment.add", "organizationId": "o"})
	if ids, _ := s.activityIDs(t, k, map[string]any{"organizationId": "o"}); len(ids) != 2 {
		t.Fatalf("recorded while disabled: %v", ids)
	}
	// Another tenant sees none of it.
	ws, wsToken := s.newWorkspace("other@example.com")
	other := keyHeaders(s.newKey(ws, wsToken))
	s.call("/v2/activities/get", other, map[string]any{"organizationId": "o"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	s.addOrganization(t, other, "o")
	if ids, _ := s.activityIDs(t, other, map[string]any{"organizationId": "o"}); len(ids) != 0 {
		t.Fatalf("another tenant reads %v", ids)
	}

	// The organization's deletion removes its records.
	s.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{"o"}}).data(t, "")
	s.call("/v2/activities/get", k, map[string]any{"organizationId": "o"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	// Made again under the same id, it starts without the old one's records.
	s.addOrganization(t, k, "o")
	if ids, _ := s.activityIDs(t, k, map[string]any{"organizationId": "o"}); len(ids) != 0 {
		t.Fatalf("records outlived the organization: %v", ids)
	}
}

func TestActivityFiltersOrderAndPages(t *testing.T) {
	t.Parallel()
	onBothStores(t, testActivityFiltersOrderAndPages)
}

func testActivityFiltersOrderAndPages(t *testing.T, s *system) {
	k := s.devKey()
	s.addOrganization(t, k, "o")
	var adds []any
	for i := range 12 {
		adds = append(adds, map[string]any{"id": fmt.Sprintf("a%02d", i), "featureType": []string{"comment", "reaction", "custom"}[i%3],
			"actionType": []string{"comment.add", "reaction.add", "custom.approve"}[i%3], "actionUser": map[string]any{"userId": fmt.Sprintf("u%d", i%2)},
			"targetEntityId": fmt.Sprintf("t%d", i%4)})
	}
	added := s.call("/v2/activities/add", k, map[string]any{"organizationId": "o", "documentId": "d1", "activities": adds}).data(t, "Activity(s) added successfully.")
	if len(added) != 12 || fmt.Sprint(added["a00"]) != "map[message:Activity added. success:true]" {
		t.Fatalf("added %v", added)
	}
	again := s.call("/v2/activities/add", k, map[string]any{"organizationId": "o", "activities": []any{adds[0]}}).data(t, "")
	if fmt.Sprint(again["a00"]) != "map[message:An activity with this id already exists. success:false]" {
		t.Fatalf("repeat %v", again)
	}
	s.call("/v2/activities/add", k, map[string]any{"organizationId": "o", "documentId": "d2", "activities": []any{map[string]any{"id": "b", "featureType": "recorder", "actionType": "recorder.done"}}}).data(t, "")

	all := []string{"a00", "a01", "a02", "a03", "a04", "a05", "a06", "a07", "a08", "a09", "a10", "a11", "b"}
	desc := slices.Clone(all)
	slices.Reverse(desc)
	for name, c := range map[string]struct {
		query map[string]any
		want  []string
	}{
		"all, newest first": {map[string]any{}, desc},
		"ascending":         {map[string]any{"order": "asc"}, all},
		"document":          {map[string]any{"documentId": "d2"}, []string{"b"}},
		"feature types":     {map[string]any{"featureTypes": []string{"reaction", "recorder"}, "order": "asc"}, []string{"a01", "a04", "a07", "a10", "b"}},
		"action types":      {map[string]any{"actionTypes": []string{"custom.approve"}, "order": "asc"}, []string{"a02", "a05", "a08", "a11"}},
		"user":              {map[string]any{"userId": "u1", "order": "asc"}, []string{"a01", "a03", "a05", "a07", "a09", "a11"}},
		"target":            {map[string]any{"targetEntityId": "t3", "order": "asc"}, []string{"a03", "a07", "a11"}},
		"ids":               {map[string]any{"activityIds": []string{"a05", "b", "zzz"}, "order": "asc"}, []string{"a05", "b"}},
		"together":          {map[string]any{"userId": "u0", "featureTypes": []string{"comment"}}, []string{"a06", "a00"}},
		"every filter":      {map[string]any{"userId": "u0", "featureTypes": []string{"comment"}, "targetEntityId": "t2", "documentId": "d1"}, []string{"a06"}},
		"empty lists":       {map[string]any{"featureTypes": []string{}, "actionTypes": []string{}, "order": "asc"}, all},
	} {
		c.query["organizationId"] = "o"
		if got, _ := s.activityIDs(t, k, c.query); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}

	// Pages of 5 while records are added between pages: every record that existed at the start
	// comes exactly once.
	var seen []string
	query := map[string]any{"organizationId": "o", "pageSize": 5, "order": "asc"}
	for page := 0; ; page++ {
		ids, tok := s.activityIDs(t, k, query)
		seen = append(seen, ids...)
		s.clock.Advance(1)
		s.call("/v2/activities/add", k, map[string]any{"organizationId": "o", "activities": []any{map[string]any{"id": fmt.Sprintf("new%d", page), "featureType": "custom", "actionType": "custom.x"}}}).data(t, "")
		if tok == "" || page > 10 {
			break
		}
		query["pageToken"] = tok
		if page == 0 {
			// The token is bound to its query.
			s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "pageSize": 5, "order": "desc", "pageToken": tok}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")
			s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "pageSize": 5, "order": "asc", "userId": "u1", "pageToken": tok}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")
			s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "order": "asc", "pageToken": tampered(tok)}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")
		}
	}
	for _, id := range all {
		if n := countOf(seen, id); n != 1 {
			t.Fatalf("%s seen %d times across pages: %v", id, n, seen)
		}
	}
}

func countOf(list []string, v string) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}

func TestUpdateActivityLogsAndImmutability(t *testing.T) {
	t.Parallel()
	onBothStores(t, testUpdateActivityLogsAndImmutability)
}

func testUpdateActivityLogsAndImmutability(t *testing.T, s *system) {
	k := s.devKey()
	s.addOrganization(t, k, "o")
	add := func(id string) {
		s.call("/v2/activities/add", k, map[string]any{"organizationId": "o", "activities": []any{map[string]any{"id": id, "featureType": "comment", "actionType": "comment.add", "displayMessageTemplate": "old"}}}).data(t, "")
	}
	add("m")
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"immutable": true}).data(t, "")
	add("i")
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"immutable": false}).data(t, "")

	res := s.call("/v2/activities/update", k, map[string]any{"organizationId": "o", "activities": []any{
		map[string]any{"id": "m", "changes": map[string]any{"title": map[string]any{"from": "a", "to": "b"}}, "entityData": map[string]any{"x": 1}, "actionIcon": "https://example.com/i.png", "featureType": "reaction"},
		map[string]any{"id": "i", "displayMessageTemplate": "new"},
		map[string]any{"id": "missing", "actionIcon": "x"},
	}}).data(t, "Activity logs updated successfully.")
	if fmt.Sprint(res) != "map[i:map[message:Activity is immutable and cannot be updated. success:false] m:map[message:Activity updated. success:true] missing:map[message:Activity does not exist. success:false]]" {
		t.Fatalf("update results %v", res)
	}
	byID := map[string]map[string]any{}
	for _, r := range s.call("/v2/activities/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any) {
		byID[r.(map[string]any)["id"].(string)] = r.(map[string]any)
	}
	m, i := byID["m"], byID["i"]
	if fmt.Sprint(m["changes"]) != "map[title:map[from:a to:b]]" || fmt.Sprint(m["entityData"]) != "map[x:1]" || m["actionIcon"] != "https://example.com/i.png" ||
		m["displayMessageTemplate"] != "old" || m["featureType"] != "comment" || m["immutable"] != false {
		t.Fatalf("updated record %v", m)
	}
	if i["displayMessageTemplate"] != "old" || i["immutable"] != true {
		t.Fatalf("immutable record %v", i)
	}
}

func TestActivityBadInput(t *testing.T) { onBothStores(t, testActivityBadInput) }

func testActivityBadInput(t *testing.T, s *system) {
	k := s.devKey()
	s.addOrganization(t, k, "o")
	bad := func(path string, data map[string]any, msg string) {
		t.Helper()
		s.call(path, k, data).fails(t, 400, "INVALID_ARGUMENT", msg)
	}
	get := "/v2/activities/get"
	bad(get, map[string]any{}, "organizationId is required.")
	bad(get, map[string]any{"organizationId": "o", "featureTypes": []string{"comments"}}, "featureTypes[0] must be one of comment, reaction, recorder, crdt, custom.")
	bad(get, map[string]any{"organizationId": "o", "order": "newest"}, "order must be asc or desc.")
	bad(get, map[string]any{"organizationId": "o", "pageSize": 0}, "pageSize must be between 1 and 10000.")
	bad(get, map[string]any{"organizationId": "o", "pageSize": 10001}, "pageSize must be between 1 and 10000.")
	bad(get, map[string]any{"organizationId": "o", "pageToken": "forged"}, "pageToken is invalid.")
	bad(get, map[string]any{"organizationId": "o", "activityIds": make([]string, 1001)}, "activityIds must contain at most 1000 ids.")
	bad(get, map[string]any{"organizationId": "o", "pageSize": "ten"}, "")

	upd := "/v2/activities/update"
	bad(upd, map[string]any{"activities": []any{map[string]any{"id": "a", "actionIcon": "x"}}}, "organizationId is required.")
	bad(upd, map[string]any{"organizationId": "o"}, "activities must contain at least one activity.")
	bad(upd, map[string]any{"organizationId": "o", "activities": []any{map[string]any{"actionIcon": "x"}}}, "activities[0].id is required.")
	bad(upd, map[string]any{"organizationId": "o", "activities": []any{map[string]any{"id": "a"}}}, "activities[0] must set at least one of changes, entityData, entityTargetData, displayMessageTemplate, displayMessageTemplateData, actionIcon.")
	bad(upd, map[string]any{"organizationId": "o", "activities": []any{map[string]any{"id": "a", "changes": map[string]any{"t": 1}}}}, "activities[0].changes.t must be an object {from, to}.")
	bad(upd, map[string]any{"organizationId": "o", "activities": []any{map[string]any{"id": "a", "actionIcon": "x"}, map[string]any{"id": "a", "actionIcon": "y"}}}, "activities[1].id repeats activities[0].id: each activity may appear once.")

	add := "/v2/activities/add"
	one := func(a map[string]any) map[string]any {
		return map[string]any{"organizationId": "o", "activities": []any{a}}
	}
	bad(add, one(map[string]any{"actionType": "comment.add"}), "activities[0].featureType is required.")
	bad(add, one(map[string]any{"featureType": "huddle", "actionType": "huddle.join"}), "activities[0].featureType must be one of comment, reaction, recorder, crdt, custom.")
	bad(add, one(map[string]any{"featureType": "comment"}), "activities[0].actionType is required.")
	bad(add, one(map[string]any{"id": "no spaces", "featureType": "comment", "actionType": "comment.add"}), "activities[0].id may contain only letters, digits, _ and -.")
	bad(add, one(map[string]any{"featureType": "comment", "actionType": "comment.add", "actionUser": map[string]any{"email": "x"}}), "activities[0].actionUser.email must be a valid email address.")
	bad(add, one(map[string]any{"featureType": "comment", "actionType": "comment.add", "entityData": strings.Repeat("x", 70<<10)}), "activities[0].entityData must be at most 64 KiB.")
	many := make([]any, 101)
	for i := range many {
		many[i] = map[string]any{"featureType": "comment", "actionType": "comment.add"}
	}
	bad(add, map[string]any{"organizationId": "o", "activities": many}, "activities must contain at most 100 activities.")
	s.call(add, k, one(map[string]any{"featureType": "comment", "actionType": "comment.add"})).data(t, "")
	s.call(add, k, map[string]any{"organizationId": "nope", "activities": []any{map[string]any{"featureType": "comment", "actionType": "comment.add"}}}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")

	cfg := "/v2/workspace/activityconfig/update"
	bad(cfg, map[string]any{}, "Provide at least one of isEnabled, immutable, triggers.")
	bad(cfg, map[string]any{"triggers": map[string]any{"huddle": map[string]any{"join": true}}}, `triggers has an unknown feature "huddle": features are comment, reaction, recorder, crdt, custom.`)
	bad(cfg, map[string]any{"triggers": map[string]any{"comment": true}}, "triggers.comment must be an object of event names to booleans.")
	bad(cfg, map[string]any{"triggers": map[string]any{"comment": map[string]any{"add": "yes"}}}, "triggers.comment.add must be a boolean.")
	bad(cfg, map[string]any{"triggers": map[string]any{"comment": map[string]any{"Add Now": true}}}, `triggers.comment has an invalid event name "Add Now": use the action (e.g. add) or the whole type (e.g. comment.add).`)
	bad(cfg, map[string]any{"isEnabled": "yes"}, "")
	bad(cfg, map[string]any{"triggers": map[string]any{"custom": map[string]any{"my.thing": false}}}, `triggers.custom has an invalid event name "my.thing": use the action (e.g. add) or the whole type (e.g. custom.add).`)
	bad(cfg, map[string]any{"triggers": map[string]any{"comment": map[string]any{"add": false, "comment.add": true}}}, "triggers.comment names the event add twice.")

	pub := "/v2/events/publish"
	bad(pub, map[string]any{"organizationId": "o"}, "type is required.")
	bad(pub, map[string]any{"type": "comment.add"}, "organizationId is required.")
	bad(pub, map[string]any{"type": "organization.deleted", "organizationId": "o"}, "type organization.deleted is reserved for collab's own events.")
	bad(pub, map[string]any{"type": "comment.add", "organizationId": "o", "data": "text"}, "")

	// Nothing was written by any of it: the one valid add is the only record.
	if ids, _ := s.activityIDs(t, k, map[string]any{"organizationId": "o"}); len(ids) != 1 {
		t.Fatalf("refused requests wrote %v", ids)
	}
	if cfg := s.call("/v2/workspace/activityconfig/get", k, map[string]any{}).data(t, ""); fmt.Sprint(cfg) != "map[activityServiceConfig:map[isEnabled:false]]" {
		t.Fatalf("refused config updates wrote %v", cfg)
	}
	// Wrong credentials.
	s.call(get, keyHeaders(s.proc.Dev.APIKey, "wrong"), map[string]any{"organizationId": "o"}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
	s.call(pub, keyHeaders("nokey", "x"), map[string]any{"type": "comment.add", "organizationId": "o"}).fails(t, 403, "PERMISSION_DENIED", "")
}
