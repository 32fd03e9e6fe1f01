#!/usr/bin/env bash
# edits.sh <copy>: the edits of shared files that adding the notes service takes, in a copy of
# the repository (scripts/check-new-service): its routes, one line (and its import) in
# services.All(), its line in TestNeedsDeriveFromModules.
set -euo pipefail
dst="$1"
cat >>"$dst/gateway/http_rules.yaml" <<'YAML'
    - selector: collab.notes.v1.NotesService.AddNote
      post: /v2/notes/add
      body: "*"
    - selector: collab.notes.v1.NotesService.GetNotes
      post: /v2/notes/get
      body: "*"
YAML
edit() { # edit <file> <sed script>: fails when the script changed nothing
  local before
  before="$(cksum <"$1")"
  sed -i "$2" "$1"
  [ "$(cksum <"$1")" != "$before" ] || { echo "edits.sh: $1 did not change: its layout moved, update edits.sh" >&2; exit 1; }
}
edit "$dst/services/services.go" 's#^\t"github.com/collab/collab/services/memory"$#&\n\t"github.com/collab/collab/services/notes"#'
edit "$dst/services/services.go" 's#^\t\twebhooks.Module(),$#&\n\t\tnotes.Module(),#'
edit "$dst/collabd/config_test.go" 's#^\t\t"webhooks": *{"workspace"},$#&\n\t\t"notes": {"workspace"},#'
