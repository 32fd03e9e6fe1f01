package webhooktest

import (
	"path/filepath"

	"github.com/collab/collab/internal/testkit/nodeproject"
)

// receiver is e2e/webhookreceiver, the real Standard Webhooks receiver the tests drive.
var receiver = nodeproject.New(nodeproject.Spec{
	Rel: filepath.Join("e2e", "webhookreceiver"), Marker: "receiver.mjs", Who: "webhooktest", What: "the webhook receiver of the tests",
})

// prepare finds node and the receiver's directory and installs the receiver's dependencies if
// they are missing, once per test binary.
func prepare() (nodeproject.Project, error) { return receiver.Prepare() }
