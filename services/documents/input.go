package documents

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/validate"
)

// checkCount requires 1 to limit items in the list called field.
func checkCount(field, item string, n, limit int) error {
	if n == 0 {
		return apierr.InvalidArgument("%s must contain at least one %s.", field, item)
	}
	if n > limit {
		return apierr.InvalidArgument("%s must contain at most %d %ss.", field, limit, item)
	}
	return nil
}

// checkItems checks a list of items keyed by an id (the documents or folders of an add or an
// update): 1 to maxItems of them, each item's id valid and not repeated, then rest(i) for the
// item's other fields, item by item, so the first bad field in list order is the one named.
func checkItems(list, item, idField string, n int, id func(i int) string, rest func(i int) error) error {
	if err := checkCount(list, item, n, maxItems); err != nil {
		return err
	}
	seen := map[string]int{}
	for i := range n {
		if err := validate.ID(field(list, i, idField), id(i)); err != nil {
			return err
		}
		if err := checkUnique(list, idField, i, id(i), seen); err != nil {
			return err
		}
		if err := rest(i); err != nil {
			return err
		}
	}
	return nil
}

// checkUnique refuses an id that an earlier item of the list had: results are keyed by id, so
// two items with one id could not both be answered.
func checkUnique(list, idField string, i int, id string, seen map[string]int) error {
	if j, dup := seen[id]; dup {
		return apierr.InvalidArgument("%s[%d].%s repeats %s[%d].%s: each id may appear once.", list, i, idField, list, j, idField)
	}
	seen[id] = i
	return nil
}

// checkPageSize applies the default and the bounds.
func checkPageSize(v int32) (int, error) {
	if v == 0 {
		return defaultPageSize, nil
	}
	if v < 1 || v > maxPageSize {
		return 0, apierr.InvalidArgument("pageSize must be between 1 and %d.", maxPageSize)
	}
	return int(v), nil
}

func field(list string, i int, name string) string { return fmt.Sprintf("%s[%d].%s", list, i, name) }

func trim(v string) string { return strings.TrimSpace(v) }

// trimPtr returns the trimmed value of an optional field, nil when it was not sent.
func trimPtr(v *string) *string {
	if v == nil {
		return nil
	}
	t := strings.TrimSpace(*v)
	return &t
}

// pageScope binds a page token to its query: the listing, the tenant and every filter. Ids
// hold no control characters (validate), so the separator cannot be forged; the id filter is
// sorted so its order does not matter.
func pageScope(listing, apiKey string, filters []string, ids []string) string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	parts := append([]string{listing, apiKey}, filters...)
	parts = append(parts, "ids")
	return strings.Join(append(parts, sorted...), "\x00")
}

// tokenPosition is the sealed form of a Position.
type tokenPosition struct {
	CreatedAt int64  `json:"c"`
	ID        string `json:"i"`
}

// openPage returns the position a token holds, nil for no token, or INVALID_ARGUMENT for a
// token that was not sealed for this query or has expired.
func openPage(sealer *cursor.Sealer, token, scope string) (*Position, error) {
	if token == "" {
		return nil, nil
	}
	var p tokenPosition
	if err := sealer.Open(token, scope, &p); err != nil {
		return nil, cursor.Refusal("pageToken", err)
	}
	return &Position{CreatedAt: time.UnixMilli(p.CreatedAt).UTC(), ID: p.ID}, nil
}

// nextPage seals the position after last.
func nextPage(sealer *cursor.Sealer, scope string, last Position) (*string, error) {
	tok, err := sealer.Seal(scope, tokenPosition{CreatedAt: last.CreatedAt.UnixMilli(), ID: last.ID})
	if err != nil {
		return nil, fmt.Errorf("seal page token: %w", err)
	}
	return &tok, nil
}
