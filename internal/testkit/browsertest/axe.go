package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/chromedp/chromedp"

	"github.com/collab/collab/internal/testkit/nodeproject"
)

// axeProject is e2e/axe: axe-core pinned by its committed lockfile.
var axeProject = nodeproject.New(nodeproject.Spec{
	Rel: filepath.Join("e2e", "axe"), Marker: "README.md", Who: "browsertest", What: "axe-core, the accessibility checker",
})

// AxeViolation is one rule axe-core found broken on a page, with the elements that break it.
type AxeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

func (v AxeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(v.Targets, ", "))
}

// Axe runs axe-core (the real one, e2e/axe) in the page of ctx's tab and returns its violations
// of impact serious or critical. It is evaluated through the DevTools protocol, which the
// page's Content-Security-Policy does not govern, so a strict page needs no exception for it.
func Axe(ctx context.Context) ([]AxeViolation, error) {
	p, err := axeProject.Prepare()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(p.Dir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		return nil, fmt.Errorf("browsertest: reading axe-core: %w", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](string(src)+";0")); err != nil {
		return nil, fmt.Errorf("browsertest: loading axe-core into the page: %w", err)
	}
	const run = `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
		.filter(v => v.impact === 'serious' || v.impact === 'critical')
		.map(v => ({id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map(n => n.target.join(' '))})))`
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]AxeViolation](run, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("browsertest: running axe-core: %w", err)
	}
	return found, nil
}
