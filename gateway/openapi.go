package gateway

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"sync"
)

//go:embed openapi/collab.swagger.json
var generatedOpenAPI []byte

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
	openAPIErr  error
)

// openAPI is the generated document with the envelopes the gateway adds: protoc-gen-openapiv2
// describes the gRPC messages, while callers send {"data": <request>} and receive
// {"result": <response>} or {"error": {...}}.
func openAPI() ([]byte, error) {
	openAPIOnce.Do(func() {
		var doc map[string]any
		if openAPIErr = json.Unmarshal(generatedOpenAPI, &doc); openAPIErr != nil {
			return
		}
		doc["info"] = map[string]any{"title": "collab administrative API", "version": "v2"}
		defs, _ := doc["definitions"].(map[string]any)
		delete(defs, "google.rpc.Status")
		delete(defs, "google.protobuf.Any")
		defs["Error"] = map[string]any{
			"type": "object",
			"properties": map[string]any{"error": map[string]any{
				"type":     "object",
				"required": []string{"status", "message"},
				"properties": map[string]any{
					"status":  map[string]any{"type": "string", "example": "INVALID_ARGUMENT"},
					"message": map[string]any{"type": "string"},
					"details": map[string]any{"type": "object"},
				},
			}},
		}
		paths, _ := doc["paths"].(map[string]any)
		for _, p := range paths {
			ops, _ := p.(map[string]any)
			for _, o := range ops {
				op, _ := o.(map[string]any)
				params, _ := op["parameters"].([]any)
				for _, prm := range params {
					if pm, _ := prm.(map[string]any); pm["in"] == "body" {
						pm["schema"] = map[string]any{"type": "object", "required": []string{"data"},
							"properties": map[string]any{"data": pm["schema"]}}
					}
				}
				if op == nil {
					continue
				}
				responses, _ := op["responses"].(map[string]any)
				if responses == nil {
					responses = map[string]any{}
					op["responses"] = responses
				}
				if ok, _ := responses["200"].(map[string]any); ok != nil {
					ok["schema"] = map[string]any{"type": "object", "properties": map[string]any{"result": ok["schema"]}}
				}
				responses["default"] = map[string]any{"description": "An error.", "schema": map[string]any{"$ref": "#/definitions/Error"}}
			}
		}
		openAPIDoc, openAPIErr = json.MarshalIndent(doc, "", "  ")
	})
	return openAPIDoc, openAPIErr
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, err := openAPI()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]string{"status": "INTERNAL", "message": "Internal error."}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}
