// Command render writes the per-service parts of the deployment files from the list of
// services (deploy.Render): scripts/generate runs it.
//
//	go run ./deploy/render [repository root]
package main

import (
	"fmt"
	"os"

	"github.com/collab/collab/deploy"
	"github.com/collab/collab/services"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if err := deploy.Write(root, services.All()); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}
